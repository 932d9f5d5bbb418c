"""Auto-detection of layout, size, dtype and output kind from the ONNX file alone."""

from __future__ import annotations

from dataclasses import replace

import pytest
from onnx_factory import class_metadata

from app.errors import ModelError
from app.inference.model.builder import load_spec


def test_multiclass_scores_detected(models):
    spec = load_spec(models("rgb_classes"))
    assert (spec.task, spec.output.kind, spec.output.channel_axis) == ("segmentation", "scores", 1)
    assert (spec.input.layout, spec.input.channels, spec.input.dtype) == ("NCHW", 3, "float32")
    assert spec.input.size is None and spec.input.size_divisor == 32  # dynamic: keep size, pad
    assert spec.class_names == ("background", "class 1", "class 2")
    assert spec.classes[0].color is None and spec.classes[1].color is not None
    assert spec.sources["input.size"] == "detected" and spec.sources["classes"] == "default"


def test_class_names_from_metadata(models):
    spec = load_spec(models("rgb_classes", metadata=class_metadata(["bg", "leaf", "sky"])))
    assert spec.class_names == ("bg", "leaf", "sky")
    assert spec.sources["classes"] == "metadata"


def test_python_dict_metadata_names_as_exporters_write_them(models):
    spec = load_spec(models("rgb_classes", metadata={"names": "{0: 'bg', 1: 'a', 2: 'b'}"}))
    assert spec.class_names == ("bg", "a", "b")


def test_metadata_with_wrong_class_count_is_ignored(models):
    spec = load_spec(models("rgb_classes", metadata=class_metadata(["only", "two"])))
    assert spec.class_names == ("background", "class 1", "class 2")


@pytest.mark.parametrize("ends_in_sigmoid, activation", [(False, "sigmoid"), (True, "none")])
def test_binary_activation_depends_on_graph_end(models, ends_in_sigmoid, activation):
    spec = load_spec(models("binary_logits", end_with_sigmoid=ends_in_sigmoid))
    assert spec.output.kind == "binary"
    assert spec.output.activation == activation
    assert spec.input.color == "gray" and spec.input.channels == 1
    assert spec.class_names == ("background", "class 1")


def test_embedded_argmax_is_a_label_map_with_class_count_from_shape_inference(models):
    spec = load_spec(models("embedded_argmax"))
    assert spec.output.kind == "labels" and spec.output.activation == "none"
    assert len(spec.classes) == 3


@pytest.mark.parametrize("ends_in_softmax, activation", [(False, "softmax"), (True, "none")])
def test_classification_detected(models, ends_in_softmax, activation):
    spec = load_spec(models("classifier", end_with_softmax=ends_in_softmax))
    assert spec.task == "classification" and spec.output.kind == "classification"
    assert spec.output.activation == activation
    assert spec.input.size == (224, 224) and spec.input.size_divisor == 1
    assert spec.class_names == ("class 0", "class 1", "class 2")


def test_nhwc_input_detected(models):
    spec = load_spec(models("nhwc_classes"))
    assert spec.input.layout == "NHWC" and spec.input.channels == 3


def test_float16_input_detected(models):
    assert load_spec(models("float16_classes")).input.dtype == "float16"


def test_uint8_input_gets_raw_pixels(models):
    spec = load_spec(models("uint8_binary"))
    assert spec.input.dtype == "uint8" and spec.input.scale == 1.0


def test_fixed_size_input_detected(models):
    spec = load_spec(models("fixed_size_classes", size=64))
    assert spec.input.model_hw == (64, 64) and spec.input.size == (64, 64) and not spec.input.dynamic_hw


def test_text_model_is_refused_naming_inputs_and_outputs(models):
    path = models("text_model")
    with pytest.raises(ModelError) as err:
        load_spec(path)
    message = str(err.value)
    assert "not an image model" in message and "tokens[N,T] int64" in message
    assert "embeddings[N,T,8] float32" in message and str(path) in message
    assert "\n" not in message


def test_corrupt_file_is_refused(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07this is not protobuf at all" * 10)
    with pytest.raises(ModelError, match="broken.onnx: not a valid ONNX model"):
        load_spec(path)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(ModelError, match="missing.onnx: model file not found"):
        load_spec(tmp_path / "missing.onnx")


def test_label_count_is_the_classes_and_at_least_two(models):
    spec = load_spec(models("rgb_classes"))
    assert spec.label_count == 3
    assert replace(spec, classes=spec.classes[:1]).label_count == 2  # one class: its mask still holds 0 and 1
    assert replace(spec, classes=()).label_count == 2
