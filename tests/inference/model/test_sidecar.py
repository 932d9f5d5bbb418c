"""The sidecar overrides detection, and a broken one is refused with the file and key named."""

from __future__ import annotations

import pytest

from app.errors import SidecarError
from app.inference.model.builder import load_spec

GOOD = """
name: Stripes (test)
input:
  size: [64, 96]
  resize: letterbox
  size_divisor: 16
  scale: 1.0
  mean: [123.675, 116.28, 103.53]
  std: [58.395, 57.12, 57.375]
classes:
  - {name: background}
  - {name: red things, color: "#ff0000"}
  - blue things
postprocess:
  min_area: 12
  close_kernel: 3
"""


def test_sidecar_beside_model_overrides_detection(models):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text(GOOD)
    spec = load_spec(path)
    assert spec.name == "Stripes (test)" and spec.sidecar == path.with_suffix(".yaml")
    assert spec.input.size == (64, 96) and spec.input.resize == "letterbox" and spec.input.size_divisor == 16
    assert spec.input.mean == (123.675, 116.28, 103.53) and spec.input.scale == 1.0
    assert spec.class_names == ("background", "red things", "blue things")
    assert spec.classes[1].color == (255, 0, 0) and spec.classes[0].color is None
    assert spec.classes[2].color is not None  # unnamed colour: from the palette
    assert (spec.postprocess.min_area, spec.postprocess.close_kernel) == (12, 3)
    assert spec.sources["input.size"] == "sidecar" and spec.sources["input.color"] == "detected"


def test_explicit_config_path_wins(models, tmp_path):
    path = models("rgb_classes")
    other = tmp_path / "elsewhere.yaml"
    other.write_text("name: From elsewhere\n")
    assert load_spec(path, other).name == "From elsewhere"


@pytest.mark.parametrize(
    "text, key, problem",
    [
        ("colour: rgb\n", "colour", "unknown key"),
        ("input:\n  sise: [1, 2]\n", "input.sise", "unknown key"),
        ("input:\n  size: 512\n", "input.size", "must be [height, width]"),
        ("input:\n  mean: [0.5, 0.5]\n", "input.mean", "has 2 values"),
        ("input:\n  std: [0.2, 0, 0.2]\n", "input.std", "must not contain 0"),
        ("input:\n  resize: crop\n", "input.resize", "must be one of stretch | letterbox"),
        ("input:\n  scale: fast\n", "input.scale", "must be a number"),
        ("output:\n  threshold: 2\n", "output.threshold", "between 0 and 1"),
        ("classes:\n  - {name: a}\n  - {name: b}\n", "classes", "lists 2 classes"),
        ("classes:\n  - {name: a, colour: red}\n", "classes", "unknown key 'colour'"),
        ("classes:\n  - {name: a, color: reddish}\n  - b\n  - c\n", "classes", "[0].color"),
        ("task: classification\n", "task", "is classification"),
        ("input:\n  color: gray\n", "input.color", "3 channel"),
        ("postprocess:\n  min_area: -1\n", "postprocess.min_area", "from 0 to"),
        ("input: [1, 2]\n", "input", "must be a mapping"),
        ("input:\n  window: [40]\n", "input.window", "[center, width]"),
        ("input:\n  window: [40, 0]\n", "input.window", "width > 0"),
        ("input:\n  range: [100, -100]\n", "input.range", "low < high"),
        ("input:\n  range: [0, 1]\n  window: [1, 2]\n", "input.range", "both given"),
        ("runtime:\n  tensorrt: maybe\n", "runtime.tensorrt", "true or false"),
    ],
)
def test_broken_sidecar_names_file_and_key(models, text, key, problem):
    path = models("rgb_classes")
    sidecar = path.with_suffix(".yaml")
    sidecar.write_text(text)
    with pytest.raises(SidecarError) as err:
        load_spec(path)
    message = str(err.value)
    assert str(sidecar) in message and f"'{key}'" in message and problem in message
    assert "\n" not in message


def test_invalid_yaml_names_the_line(models):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text("name: ok\ninput: {size: [1, 2]\n")
    with pytest.raises(SidecarError, match=r"rgb_classes.yaml: invalid YAML at line \d"):
        load_spec(path)


def test_sidecar_size_must_match_a_fixed_model(models):
    path = models("fixed_size_classes", size=64)
    path.with_suffix(".yaml").write_text("input:\n  size: [32, 32]\n")
    with pytest.raises(SidecarError, match="fixed at"):
        load_spec(path)


def test_missing_explicit_sidecar(models, tmp_path):
    with pytest.raises(SidecarError, match="nope.yaml: sidecar file not found"):
        load_spec(models("rgb_classes"), tmp_path / "nope.yaml")
