"""Absurd declared shapes: a tiny model file must not make the spec allocate per declared class or pixel."""

from __future__ import annotations

import pytest

from app.errors import ModelError
from app.inference.model.builder import MAX_CLASSIFICATION_CLASSES, load_spec

INT64 = 7


def _refused(path, *words):
    with pytest.raises(ModelError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and all(w in message for w in words), message
    return message


def test_a_billion_class_classifier_is_refused_without_building_names(models):
    """A 121-byte model declaring [1, 1000000000] used to build a billion class names (tens of GB)."""
    path = models("declared_shapes", "billion", image=[1, 3, 8, 8], output=[1, 1_000_000_000])
    assert path.stat().st_size < 400
    _refused(path, "1000000000 classes", f"{MAX_CLASSIFICATION_CLASSES}")


def test_a_classifier_at_the_cap_is_accepted(models):
    path = models("declared_shapes", "cap", image=[1, 3, 8, 8], output=[1, MAX_CLASSIFICATION_CLASSES])
    assert len(load_spec(path).classes) == MAX_CLASSIFICATION_CLASSES


def test_an_argmax_over_a_billion_classes_is_refused(models):
    """An ArgMax label map: the class count comes from shape inference over the declared input."""
    path = models("declared_shapes", "labels", image=[1, 3, 8, 8], output=[1, 8, 8], output_type=INT64,
                  argmax_over=[1, 1_000_000_000, 8, 8])
    _refused(path, "1000000000 classes", "256")


def test_a_fixed_input_beyond_the_largest_side_is_refused(models):
    """A fixed [1,3,10**6,10**6] input would make the warm-up allocate a 12 TB tensor."""
    path = models("declared_shapes", "huge_input", image=[1, 3, 1_000_000, 1_000_000], output=[1, 2])
    _refused(path, "1000000", "16384")


def test_huge_class_name_metadata_is_not_parsed(models, monkeypatch):
    """Metadata is free text of any size: a few MB of a Python list literal made `ast.literal_eval` build an AST
    of GBs. Over the cap it is ignored (default names), without being parsed."""
    from app.inference.model import metadata as metadata_module

    parsed = []  # recorded, not raised: the parser's caller swallows exceptions (metadata must never stop a load)
    monkeypatch.setattr(metadata_module.ast, "literal_eval", lambda text: parsed.append(len(text)))
    monkeypatch.setattr(metadata_module.json, "loads", lambda text: parsed.append(len(text)))
    huge = "[" + "'a', " * 500_000 + "]"
    path = models("rgb_classes", metadata={"classes": huge})
    spec = load_spec(path)
    assert not parsed and spec.sources["classes"] == "default"
    assert spec.class_names == ("background", "class 1", "class 2")


def test_error_messages_cap_the_declared_inputs_and_outputs(models):
    """The model's inputs and outputs are named in a refusal; their names and number are the file's to choose."""
    import onnx_factory as f
    from onnx import helper

    long = "x" * 100_000
    path = models("declared_shapes", "pretend")  # replaced below by a model with long names and 500 inputs
    inputs = [f.tensor(f"{long}{i}", f.FLOAT, [1, 3, 8, 8]) for i in range(500)]
    f.save(path, [helper.make_node("Identity", [inputs[0].name], ["out"])], inputs, [f.tensor("out", f.FLOAT, [1, 2])])
    message = _refused(path, "500 inputs")
    assert len(message) < len(str(path)) + 1000
