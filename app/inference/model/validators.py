"""Value checks shared by the sidecar and `--runtime`: each returns the clean value or raises
ValueError("must be …, got …"), which the caller prefixes with the file and key."""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.guard.untrusted import TooLarge, read_untrusted

Check = Callable[[Any], Any]

MAX_SHOWN = 80  # characters of a refused value quoted in an error message
_MAX_KEY_SHOWN = 60  # characters of a sidecar key quoted

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
        chosen: str = value
        return chosen

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

MAX_MODALITIES = 16


def modality_codes(value: Any) -> tuple[str, ...]:
    """DICOM Modality codes (`CT`, or a list `[CT, PT]`), upper-cased: letters and digits, 1 to 16 each."""
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > MAX_MODALITIES:
        raise ValueError(f"must be a DICOM modality code (CT, MR, CR, DX, US, ...) or a list of 1 to "
                         f"{MAX_MODALITIES}, got {shown(value)}")
    codes = []
    for item in items:
        if not isinstance(item, str) or not re.fullmatch(r"[A-Za-z0-9]{1,16}", item.strip()):
            raise ValueError(f"must be a DICOM modality code (CT, MR, CR, DX, US, ...) or a list of them, "
                             f"got {shown(value)}")
        codes.append(item.strip().upper())
    return tuple(dict.fromkeys(codes))


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    raise ValueError(f"must be true or false, got {shown(value)}")


# C0 and C1 controls (tab and newline included: a name is one line) and the bidirectional overrides that make
# `exe.png` read as `gnp.exe`: class names reach CSV cells, column names, DICOM labels and the terminal.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def control_character(name: str) -> str | None:
    """The first control character in `name`, spelt visibly (`\\x1b`, `\\u202e`), or None when there is none."""
    found = _CONTROL.search(name)
    return None if found is None else _escape(found)


def visible(name: str) -> str:
    """`name` with every control character spelt out (`\\x1b`): for names SegLens must accept (model
    metadata) but must not pass on raw."""
    return _CONTROL.sub(_escape, name)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def class_name(value: Any) -> str:
    """A class name: non-empty text without control characters (see `control_character`)."""
    name = text(value)
    bad = control_character(name)
    if bad is not None:
        # the name as visible() spells it, quoted but not through repr (which doubled its backslash: lu\\x1bng)
        raise ValueError(f"must not hold a control character, got {bad} in '{visible(name)[:MAX_SHOWN]}'")
    return name


def read_at_most(path: Path, limit: int) -> bytes | None:
    """The file's bytes, or None when it holds more than `limit` (never reads more than one byte past it: a
    sidecar or label file named by a model must not be able to fill memory). Only a regular file is opened, and
    without waiting (a FIFO would block open() until a writer came): app.guard.untrusted.NotRegularFile otherwise,
    and OSError as open() raises it."""
    try:
        return read_untrusted(path, limit=limit)
    except TooLarge:
        return None


def short_key(key: str) -> str:
    """A sidecar key as an error line quotes it: at most 60 characters."""
    return key if len(key) <= _MAX_KEY_SHOWN else key[:_MAX_KEY_SHOWN - 3] + "..."


def fraction(value: Any) -> float:
    fraction = number(value)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"must be between 0 and 1, got {shown(value)}")
    return fraction


class KeyedValueError(ValueError):
    """A refused value inside a list, with the key below the list's (`[2].class`)."""

    def __init__(self, subkey: str, problem: str) -> None:
        super().__init__(problem)
        self.subkey = subkey
