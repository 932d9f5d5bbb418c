"""The sidecar's `nnunet:` section is checked like every sidecar key: a value of the wrong form, or one that does not
fit the model (its input channels, its outputs), is one line naming the file and the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.cli import main
from app.errors import SidecarError
from app.inference.model.builder import load_spec

FOLDER = (Path(__file__).resolve().parents[2] / "data" / "nnunet" / "Dataset901_CTPhantom" /
          "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("recipe") / "ct.onnx"
    assert main(["import", "nnunet", str(FOLDER), "--folds", "0", "--out", str(model)]) == 0
    return model


def with_recipe_line(model: Path, tmp_path: Path, key: str, value: str) -> Path:
    """A copy of the imported model whose sidecar's `nnunet.<key>` line is replaced (or added)."""
    copy = tmp_path / "m.onnx"
    copy.write_bytes(model.read_bytes())
    text = model.with_suffix(".yaml").read_text()
    line = f"  {key}: {value}"
    pattern = re.compile(rf"^  {key}: .*$", re.M)
    text = pattern.sub(line, text) if pattern.search(text) else text.rstrip("\n") + "\n" + line + "\n"
    copy.with_suffix(".yaml").write_text(text)
    return copy


@pytest.mark.parametrize(("key", "value", "said"), [
    ("channels", '[{"scheme": "ct", "clip": [0, 1], "mean": 0, "std": 1}, {"scheme": "zscore"}]',
     "'nnunet.channels' lists 2 but the model takes 1"),
    ("channels", '[{"scheme": "lungs"}]', "'nnunet.channels[0]' must be one of ct | zscore"),
    ("channels", '[{"scheme": "ct", "mean": 0, "std": 1}]', "'nnunet.channels[0]' scheme ct needs clip"),
    ("channels", '[{"scheme": "zscore", "clip": [0, 1]}]', "clip, mean and std apply to scheme ct"),
    ("resample", '{"order": 2}', "'nnunet.resample.order' must be a spline order, one of 0, 1, 3"),
    ("resample_back", '{"speed": 1}', "'nnunet.resample_back.speed' is not a resampling key"),
    ("step", "0", "'nnunet.step' must be above 0"),
    ("regions", "[[1, 2], [2]]", "'nnunet.regions' and regions_class_order go together"),
    ("parts", '[{"outputs": 2, "labels": [0, 1]}]', "'nnunet.parts' add up to 2 outputs, but the model has 3"),
    ("parts", '[{"outputs": 2, "labels": [0, 1, 2]}]', "'nnunet.parts[0]' has 2 outputs but 3 labels"),
    ("slice_spacing", '"thick"', "'nnunet.slice_spacing' must be one of model | volume"),
])
def test_a_recipe_that_does_not_fit_is_one_line_naming_the_key(imported, tmp_path, key, value, said):
    with pytest.raises(SidecarError) as caught:
        load_spec(with_recipe_line(imported, tmp_path, key, value))
    message = str(caught.value)
    assert said in message and "m.yaml" in message and "\n" not in message


def test_the_imported_recipe_loads_as_written(imported):
    spec = load_spec(imported)
    assert spec.volume is not None and spec.volume.nnunet is not None
    assert spec.sources["nnunet"] == "sidecar"
    assert spec.volume.nnunet.sources == 1
