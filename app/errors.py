"""User-facing errors. Each carries a one-line message that names the file and the problem.

The CLI prints `error: <message>` and the viewer shows the message; neither shows a traceback. The original
exception, when there is one, is chained (`raise ... from e`) for the log.
"""

from __future__ import annotations

import re
from pathlib import Path


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


def error_line(path: Path, exc: BaseException) -> str:
    """The error's one line, starting with the input's path (model errors name only the model)."""
    message = str(exc)
    return message if message.startswith(str(path)) else f"{path}: {message}"


def unexpected_error_line(path: Path, exc: BaseException) -> str:
    """One line for an error nobody planned for: the file, the exception type, its first 300 characters."""
    return f"{path}: unexpected error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but tab and newline, C1 included


def shown(text: object) -> str:
    """`text` safe to print to a terminal: control characters (an ESC sequence in a file name would retitle or
    clear the user's terminal) and file-name bytes that are not UTF-8 become visible `\\xNN` escapes."""
    readable = str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", readable)
