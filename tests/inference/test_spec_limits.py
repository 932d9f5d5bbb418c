"""Absurd declared shapes: a tiny model file must not make the spec allocate per declared class or pixel."""

from __future__ import annotations

import pytest

from app.errors import ModelError
from app.inference.spec import MAX_CLASSIFICATION_CLASSES, load_spec

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
