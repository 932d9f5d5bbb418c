"""The in-graph ArgMax is built with the `onnx` package, which refuses files ONNX Runtime's own loader would also
refuse: its errors must be the same one-line ModelError naming the model, not an 'unexpected error'."""

from __future__ import annotations

import onnx
import pytest

from app.errors import ModelError
from app.inference.model.builder import load_spec
from app.inference.model.runtime_options import RuntimeOptions
from app.inference.runtime.options import with_device_argmax
from app.inference.runtime.session import open_session


def _missing_external_weights(models):
    path = models("rgb_classes")
    onnx.save_model(onnx.load(str(path)), str(path), save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    (path.parent / "w.bin").unlink()
    return path


def test_missing_external_weights_on_the_device_argmax_path(models):
    """`device_argmax=on` builds the ArgMax before ONNX Runtime sees the file: onnx's ValidationError escaped."""
    path = _missing_external_weights(models)
    with pytest.raises(ModelError) as caught:
        open_session(load_spec(path), "cpu", runtime=RuntimeOptions(device_argmax="on"), warm_up=False)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message, message


def test_a_file_onnx_cannot_parse(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x0f\xff\xff\xff\xff")
    with pytest.raises(ModelError) as caught:
        with_device_argmax(path, 1)
    assert str(caught.value).startswith(str(path))
