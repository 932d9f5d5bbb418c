"""A model's answer is checked before anything is drawn, decided or written from it.

A local ONNX model, a remote server or a prompt decoder answers with arrays; any of them may be broken or lie: a
NaN or ±inf in the logits (every comparison with NaN is False, so a broken model passes every rule), an output of
another shape or dtype than its metadata declared, a channel count that does not match the classes, a server
whose declared input is 16384² for a 512² picture (a gigabyte uploaded per image). `check_answer` is the one
check on an answer; `check_declared_input` bounds what a server may ask to be sent by the image it is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_ANSWER_BYTES = 1 << 30  # one output of one picture: a 4096² × 16-class float32 map is 1 GiB
# numpy's kinds of numbers: bool, signed and unsigned integers, floating point. Not complex (a complex NaN passes a
# floating-point check), object (its nbytes counts pointers, not what they point to), strings, bytes, structured
# or dates: a model's answer is numbers, whatever a server's metadata declares or leaves out
_NUMBER_KINDS = frozenset("biuf")


class AnswerRefused(ValueError):
    """An answer that does not match what was declared or is not finite; the message is one line."""


@dataclass(frozen=True)
class Declared:
    """What an output was declared to be: its name, element types allowed (numpy names: "float32"), and shape
    (None for a dimension that may be anything)."""

    name: str
    dtypes: tuple[str, ...]
    shape: tuple[int | None, ...] | None = None


def check_answer(source: str, declared: Declared, array: np.ndarray, *, finite: bool = True,
                 max_bytes: int = MAX_ANSWER_BYTES) -> np.ndarray:
    """`array` when it is numbers (bool, integers or floating point; not a masked array) of a declared dtype and
    shape, within `max_bytes`, and (floats, `finite`) holds no NaN or ±inf; AnswerRefused naming `source` and the
    output otherwise."""
    where = f"{source}: output '{declared.name}'"
    if isinstance(array, np.ma.MaskedArray):
        raise AnswerRefused(f"{where} is a masked array (its mask would hide values from the checks); no result is "
                            "made from it")
    if array.dtype.kind not in _NUMBER_KINDS:
        raise AnswerRefused(f"{where} is {array.dtype.name}, not numbers (a model's answer is bool, integers or "
                            "floating point); no result is made from it")
    if declared.dtypes and array.dtype.name not in declared.dtypes:
        raise AnswerRefused(f"{where} is {array.dtype.name}; declared {' or '.join(declared.dtypes)}")
    if declared.shape is not None and not shape_fits(array.shape, declared.shape):
        raise AnswerRefused(f"{where} has shape {shape_text(array.shape)}; declared "
                            f"{shape_text(declared.shape)}")
    if array.nbytes > max_bytes:
        raise AnswerRefused(f"{where} is {array.nbytes} bytes; the limit is {max_bytes}")
    if finite:
        problem = non_finite(array)
        if problem:
            raise AnswerRefused(f"{where} is not finite ({problem}); no result is made from it")
    return array


def shape_fits(shape: Sequence[int], declared: Sequence[int | None]) -> bool:
    """Whether `shape` matches `declared` (same rank; None or a negative number matches any size)."""
    if len(shape) != len(declared):
        return False
    return all(d is None or d < 0 or d == s for s, d in zip(shape, declared, strict=True))


def shape_text(shape: Sequence[int | None]) -> str:
    return "×".join("?" if n is None or n < 0 else str(n) for n in shape) or "scalar"


def non_finite(array: np.ndarray) -> str:
    """"" when `array` is finite (or not floating point), else what is wrong (`3 NaN, 1 +inf of 64 values`)."""
    if not np.issubdtype(array.dtype, np.floating) or array.size == 0:
        return ""
    if np.isfinite(array.min()) and np.isfinite(array.max()):  # min/max propagate NaN: no per-element temporary
        return ""
    counts = ((int(np.count_nonzero(np.isnan(array))), "NaN"), (int(np.count_nonzero(array == np.inf)), "+inf"),
              (int(np.count_nonzero(array == -np.inf)), "-inf"))
    found = ", ".join(f"{n} {what}" for n, what in counts if n)
    return f"{found} of {array.size} values"


def check_declared_input(source: str, declared: Sequence[int | None], image_shape: Sequence[int] | None, *,
                         factor: float = 4.0, max_elements: int = 64 * 2**20) -> None:
    """AnswerRefused when a server's declared input (a fixed size it asks every picture to be resized to) holds
    more than `factor` times the elements of the picture it is given (and more than 4096² values: a small model
    input is never refused for a small picture), or more than `max_elements` in all: the server's metadata must
    not decide how much SegLens uploads. `image_shape` None: no picture yet (a session opening, before its
    warm-up), so only `max_elements` bounds it."""
    fixed = [int(n) for n in declared if n is not None and n > 0]
    asked = math.prod(fixed) if fixed else 0  # Python's integers: 2³² × 2³² must not wrap to 0 as int64 does
    if image_shape is None:
        if asked > max_elements:
            raise AnswerRefused(f"{source}: the server declares an input of {shape_text(declared)} ({asked} values, "
                                f"more than the {max_elements} SegLens uploads for one picture); refused")
        return
    given = math.prod(max(int(n), 1) for n in image_shape)
    if asked > max_elements or (asked > factor * max(given, 1) and asked > 4096 * 4096):
        raise AnswerRefused(f"{source}: the server declares an input of {shape_text(declared)} "
                            f"({asked} values) for a picture of {shape_text(image_shape)}; refused")
