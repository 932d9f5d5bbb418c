"""app.guard.answers.check_answer: a model's answer is numbers — an output of object, complex, string, bytes,
structured or date dtype is refused whatever its metadata declared (or when it declared nothing, as a remote server
that leaves an output out of its metadata does), and so is a masked array, whose mask would hide values from the
finiteness check (issue 36; each was accepted before)."""

from __future__ import annotations

import numpy as np
import pytest

from app.guard.answers import AnswerRefused, Declared, check_answer

_NOT_NUMBERS = [
    (np.array([np.nan, "x"], dtype=object), "object"),
    (np.array([np.nan + 0j], np.complex64), "complex64"),
    (np.array([1 + 2j], np.complex128), "complex128"),
    (np.array(["a", "bc"]), "str64"),
    (np.array([b"ab"]), "bytes16"),
    (np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]), "void64"),
    (np.array(["2026-01-01"], dtype="datetime64[D]"), "datetime64[D]"),
    (np.array([1], dtype="timedelta64[s]"), "timedelta64[s]"),
]


@pytest.mark.parametrize(("array", "dtype"), _NOT_NUMBERS, ids=[d for _, d in _NOT_NUMBERS])
@pytest.mark.parametrize("declared", ["nothing", "that dtype"])
def test_an_answer_that_is_not_numbers_is_refused(array: np.ndarray, dtype: str, declared: str) -> None:
    want = Declared("out", () if declared == "nothing" else (dtype,))
    with pytest.raises(AnswerRefused) as caught:
        check_answer("remote h:1/m", want, array)
    assert str(caught.value) == (f"remote h:1/m: output 'out' is {dtype}, not numbers (a model's answer is bool, "
                                 "integers or floating point); no result is made from it")


def test_a_masked_array_is_refused_even_where_its_mask_hides_a_nan() -> None:
    masked = np.ma.masked_invalid(np.array([[1.0, np.nan]], np.float32))
    with pytest.raises(AnswerRefused) as caught:
        check_answer("m.onnx", Declared("out", ("float32",)), masked)
    assert str(caught.value) == ("m.onnx: output 'out' is a masked array (its mask would hide values from the "
                                 "checks); no result is made from it")
    clean = np.ma.masked_array(np.zeros(2, np.float32))
    with pytest.raises(AnswerRefused, match="masked array"):
        check_answer("m.onnx", Declared("out", ()), clean)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "float32", ">f4", "float64"])
def test_numbers_of_every_kind_still_pass(dtype: str) -> None:
    array = np.zeros((1, 2), dtype)
    assert check_answer("m", Declared("out", ()), array) is array
