"""User-facing errors. Each carries a one-line message that names the file and the problem.

The CLI prints `error: <message>` and the viewer shows the message; neither shows a traceback. The original
exception, when there is one, is chained (`raise ... from e`) for the log.
"""

from __future__ import annotations

import sys
from pathlib import Path

from app.spelling import shown, spelt  # re-exported: every face spells names through app.errors

__all__ = ["shown", "spelt"]  # and the names defined below


class SegLensError(Exception):
    """Base of all errors a user may see. `str(err)` is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))  # one line, always


class ModelError(SegLensError):
    """The model file is missing, corrupt, or not an image model this app understands."""


class SidecarError(ModelError):
    """The sidecar YAML is malformed: the message names the file and the key."""


class ImageError(SegLensError):
    """An image could not be read or decoded: the message names the file and the problem."""


class InferenceError(SegLensError):
    """ONNX Runtime failed while running the model on an input."""


class OutputError(SegLensError):
    """An output file could not be written."""


class MissingExtra(SegLensError):
    """A feature whose distribution comes with one of SegLens's extras (pyproject.toml) is not installed here: the
    line names the feature and the extra that brings it."""

    def __init__(self, *, feature: str, extra: str) -> None:
        self.feature, self.extra = feature, extra
        super().__init__(extra_line(feature=feature, extra=extra))


def extra_line(*, feature: str, extra: str) -> str:
    """`PACS needs the 'pacs' extra: pip install "seglens[pacs]"` (a frozen build: the extra it does not ship)."""
    if getattr(sys, "frozen", False):
        return f"{feature} needs the '{extra}' extra, which this build does not ship"
    return f'{feature} needs the \'{extra}\' extra: pip install "seglens[{extra}]"'


def need_extra(module: str, *, extra: str, feature: str) -> None:
    """Raise MissingExtra unless `module` (a package of the extra's distribution, e.g. "pynetdicom") can be imported
    here. It is found, not imported (no import cost on a menu click); the caller imports it as before."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module)
    except ValueError:  # imported already, without a spec
        return
    except ImportError:  # its parent package is missing
        found = None
    if found is None:
        raise MissingExtra(feature=feature, extra=extra)


def error_line(path: Path, exc: BaseException) -> str:
    """The error's one line, starting with the input's path (model errors name only the model)."""
    message = str(exc)
    return message if message.startswith(str(path)) else f"{path}: {message}"


def unexpected_error_line(path: Path | str, exc: BaseException) -> str:
    """One line for an error nobody planned for: the file, the exception type, its first 300 characters."""
    return f"{path}: unexpected error ({one_line(exc, most=300, typed=True)})"


def one_line(exc: BaseException, *, most: int = 200, typed: bool = False, first: bool = False) -> str:
    """`exc`'s message on one line and at most `most` characters (a library's message may be long), or its type's
    name where the message says nothing. `typed` puts the type first for an error nobody planned for
    (`KeyError: 'x'`: the message alone would not say what went wrong); a SegLensError is already such a line.
    `first`: the message's first line only (ONNX Runtime and Pillow put what went wrong there, detail after it)."""
    text = str(exc).strip()
    if first:
        text = text.splitlines()[0] if text else ""
    text = " ".join(text.split())[:most]
    if typed and not isinstance(exc, SegLensError):
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text or type(exc).__name__


def with_article(noun: str) -> str:
    """`noun` after `a` or `an` as it is said: `an accession number`, `a patient name`, `an MR` (an acronym by
    the names of its letters: em-ar), `a US`, `an 8-bit PNG`."""
    word = noun.split(" ", 1)[0]
    acronym = word.isupper() and len(word) <= 5
    first = noun[:1].upper()
    vowel = first in ("AEFHILMNORSX" if acronym else "AEIOU") or first == "8"
    return f"{'an' if vowel else 'a'} {noun}"
