"""User-facing errors. Each carries a one-line message that names the file and the problem.

The CLI prints `error: <message>` and the viewer shows the message; neither shows a traceback. The original
exception, when there is one, is chained (`raise ... from e`) for the log.
"""

from __future__ import annotations


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
