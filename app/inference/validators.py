"""Value checks shared by the sidecar and `--runtime`: each returns the clean value or raises
ValueError("must be …, got …"), which the caller prefixes with the file and key."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

Check = Callable[[Any], Any]

MAX_SHOWN = 80  # characters of a refused value quoted in an error message

# reprlib stops at a few items per level and a few levels, so showing even a huge or deeply nested value
# (a sidecar is untrusted input) costs a bounded amount of work and memory; plain `repr` would expand it all.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 6, 6, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = MAX_SHOWN, MAX_SHOWN, 40


def shown(value: Any) -> str:
    """`repr(value)` for an error message, bounded in length and in the work it takes."""
    text = _SHORT.repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN - 3] + "..."


def kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty text, got {kind(value)}")
    return value.strip()


def choice(*options: str) -> Check:
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError(f"must be one of {' | '.join(options)}, got {shown(value)}")
        return value

    return check


def number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, got {kind(value)}")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {shown(value)}")
    return float(value)


def whole(minimum: int, maximum: int) -> Check:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise ValueError(f"must be a whole number from {minimum} to {maximum}, got {shown(value)}")
        return value

    return check

def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    raise ValueError(f"must be true or false, got {shown(value)}")


def read_at_most(path: Path, limit: int) -> bytes | None:
    """The file's bytes, or None when it holds more than `limit` (never reads more than one byte past it: a
    sidecar or label file named by a model must not be able to fill memory). OSError as open() raises it."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    return None if len(data) > limit else data
