"""Property-based tests: geometry round trips and sidecar parsing never crash."""

from __future__ import annotations

import dataclasses
import re
import string

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import SidecarError
from app.inference.image.labelmap import segmentation_mask
from app.inference.image.preprocess import preprocess
from app.inference.model.sidecar import load_sidecar
from app.inference.model.spec import ClassInfo, InputSpec, ModelSpec, OutputSpec, PostprocessSpec

INPUT = InputSpec(name="x", layout="NCHW", channels=3, dtype="float32", model_hw=(None, None), size=None,
                  resize="stretch", size_divisor=1, color="rgb", scale=1 / 255, mean=(0.0,) * 3, std=(1.0,) * 3)
CLASSES = tuple(ClassInfo(n, None) for n in ("a", "b", "c"))


def spec_for(inp: InputSpec) -> ModelSpec:
    out = OutputSpec("y", "scores", 1, "softmax", 0.5)
    return ModelSpec(path=__import__("pathlib").Path("identity.onnx"), sidecar=None, name="identity",
                     task="segmentation", input=inp, output=out, classes=CLASSES, postprocess=PostprocessSpec(),
                     inputs=(), outputs=())


geometry = st.fixed_dictionaries({
    "h": st.integers(1, 160), "w": st.integers(1, 160),
    "size": st.one_of(st.none(), st.tuples(st.integers(8, 96), st.integers(8, 96))),
    "resize": st.sampled_from(["stretch", "letterbox"]),
    "divisor": st.sampled_from([1, 2, 8, 32]),
    "colour": st.sampled_from([(0, 200, 100), (10, 20, 220), (0, 90, 30)]),
})


@settings(max_examples=150, deadline=None)
@given(geometry)
def test_mask_is_the_image_size_labels_in_range_and_padding_never_leaks(g):
    """An identity 'model' (scores = RGB) on a one-colour image: every mask pixel is that colour's class.
    Padding (zeros, a tie that argmax resolves to class 0) must never reach the mask."""
    inp = dataclasses.replace(INPUT, size=g["size"], resize=g["resize"], size_divisor=g["divisor"])
    image = np.empty((g["h"], g["w"], 3), np.uint8)
    image[:] = g["colour"]
    tensor, geo = preprocess(inp, image)
    assert tensor.shape[2] % g["divisor"] == 0 and tensor.shape[3] % g["divisor"] == 0
    mask = segmentation_mask(spec_for(inp), tensor, geo)
    assert mask.shape == (g["h"], g["w"]) and mask.dtype == np.uint8
    assert mask.max() < len(CLASSES)
    assert (mask == int(np.argmax(g["colour"]))).all()


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(string.printable, max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(string.ascii_lowercase + "_.",
                                                                               max_size=12), inner, max_size=4)),
                      max_leaves=12)
keys = st.sampled_from(["name", "task", "input", "output", "classes", "postprocess", "runtime", "colour", "size"])
sub_keys = st.sampled_from(["size", "resize", "size_divisor", "color", "scale", "mean", "std", "window", "range",
                            "activation", "threshold", "min_area", "top_k", "tensorrt", "bogus"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(keys, st.one_of(values, st.dictionaries(sub_keys, values, max_size=4)), max_size=5))
def test_any_sidecar_parses_or_fails_with_one_line_naming_file_and_key(tmp_path, document):
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    try:
        parsed = load_sidecar(path)
    except SidecarError as err:
        message = str(err)
        assert message.startswith(str(path)) and "\n" not in message
        # safe_dump writes valid YAML: the problem is a key's, named in quotes, and it is one the document has
        quoted = re.match(rf"{re.escape(str(path))}: (?:unknown key )?'([^']+)'", message)
        assert quoted is not None, message
        assert re.split(r"[.\[]", quoted.group(1))[0] in document, message
    else:
        assert isinstance(parsed, dict)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_sidecar_reader(tmp_path, data):
    path = tmp_path / "bytes.yaml"
    path.write_bytes(data)
    try:
        load_sidecar(path)
    except SidecarError as err:
        assert str(path) in str(err)
