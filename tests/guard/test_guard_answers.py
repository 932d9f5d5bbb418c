"""app.guard.answers.check_answer: a model's answer checked for dtype, shape, size and finiteness against what was
declared, before anything is drawn, decided or written from it (issue 36)."""

from __future__ import annotations

import numpy as np
import pytest

from app.guard.answers import AnswerRefused, Declared, check_answer, non_finite, shape_fits, shape_text

LOGITS = Declared("logits", ("float32", "float16"), (1, 3, None, None))


def test_a_declared_answer_passes_unchanged() -> None:
    array = np.zeros((1, 3, 8, 8), np.float32)
    assert check_answer("model.onnx", LOGITS, array) is array


@pytest.mark.parametrize(("value", "problem"), [(np.nan, "1 NaN of 192 values"), (np.inf, "1 +inf of 192 values"),
                                                (-np.inf, "1 -inf of 192 values")])
def test_a_non_finite_value_is_refused_naming_what(value: float, problem: str) -> None:
    array = np.zeros((1, 3, 8, 8), np.float32)
    array[0, 1, 2, 3] = value
    with pytest.raises(AnswerRefused) as caught:
        check_answer("remote h:1/m", LOGITS, array)
    assert str(caught.value) == (f"remote h:1/m: output 'logits' is not finite ({problem}); no result is made "
                                 "from it")


def test_every_kind_of_non_finite_is_counted() -> None:
    array = np.array([np.nan, np.nan, np.inf, -np.inf, 1.0], np.float16)
    assert non_finite(array) == "2 NaN, 1 +inf, 1 -inf of 5 values"


def test_finiteness_can_be_left_to_the_caller() -> None:
    array = np.full((1, 3, 2, 2), np.nan, np.float32)
    assert check_answer("m", LOGITS, array, finite=False) is array


@pytest.mark.parametrize(("array", "problem"), [
    (np.zeros((1, 3, 8, 8), np.float64), "is float64; declared float32 or float16"),
    (np.zeros((1, 4, 8, 8), np.float32), "has shape 1×4×8×8; declared 1×3×?×?"),
    (np.zeros((3, 8, 8), np.float32), "has shape 3×8×8; declared 1×3×?×?"),
    (np.zeros((1, 3, 8, 8), np.int64), "is int64"),
])
def test_another_dtype_or_shape_is_refused(array: np.ndarray, problem: str) -> None:
    with pytest.raises(AnswerRefused, match=problem.replace("?", r"\?")):
        check_answer("m", LOGITS, array)


def test_the_size_cap() -> None:
    with pytest.raises(AnswerRefused, match="the limit is 1000"):
        check_answer("m", LOGITS, np.zeros((1, 3, 20, 20), np.float32), max_bytes=1000)


def test_integers_are_never_called_non_finite() -> None:
    assert non_finite(np.array([1, 2], np.int64)) == "" and non_finite(np.zeros(0, np.float32)) == ""


def test_shapes() -> None:
    assert shape_fits((1, 3, 5, 5), (1, 3, None, -1)) and not shape_fits((1, 3), (1, 3, None))
    assert shape_text((1, None, -1, 4)) == "1×?×?×4" and shape_text(()) == "scalar"
