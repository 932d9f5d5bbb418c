"""A station's frame made ready to be judged, and the one line that names a frame that could not be.

`prepare_frame` runs where the station reads (its ReadAhead helper thread for files, the station's own thread for
a camera): a file is decoded under its watched folder (every open goes through the untrusted gate with that root, so
a part swapped for a link or a FIFO since the watch source looked is refused by the very open that reads it, never
checked first and read by path after) and prepared for the model; a camera's pixels are prepared as they are. It never
raises: a frame that cannot be prepared carries its error, which the station judges as an ERROR verdict with
`error_reason`'s line — the frame named by its id, never its full path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.errors import ImageError, SegLensError
from app.inference.image import pipeline
from app.io.images import from_array, read_image

if TYPE_CHECKING:
    import numpy as np

    from app.inference.image.pipeline import Prepared
    from app.inference.model.spec import ModelSpec
    from app.io.decoded import DecodedImage
    from app.io.sources import Frame


@dataclass(frozen=True)
class Ready:
    """A frame made ready to be judged: prepared for the model with its display pixels, or why it cannot be."""

    frame: Frame
    prepared: Prepared | None
    pixels: np.ndarray | None
    error: Exception | None = None


def prepare_frame(spec: ModelSpec, frame: Frame) -> Ready:
    """Decode `frame` (a file) or take its pixels, and prepare it for the model; never raises (a file that cannot
    be decoded is a Ready with its error: the station's ERROR verdict)."""
    pixels = None
    try:
        if frame.path is not None:
            image, decode_ms = _decode(frame)
        else:
            assert frame.pixels is not None  # a Frame has one or the other
            image, decode_ms = from_array(frame.pixels), 0.0
        pixels = image.display()
        return Ready(frame, pipeline.prepare(spec, image, decode_ms=decode_ms), pixels)
    except Exception as exc:  # judged as an ERROR on the station's thread, with its one line
        return Ready(frame, None, pixels, exc)


def _decode(frame: Frame) -> tuple[DecodedImage, float]:
    """The frame's file decoded under its root (a watched folder), with the ms it took; the folder is not named in
    an error (a verdict's reason holds no path)."""
    assert frame.path is not None
    started = time.perf_counter()
    try:
        image = read_image(frame.path, root=frame.root)
    except ImageError as exc:
        if frame.root is None:
            raise
        head = f"{frame.path}: "
        text = str(exc)
        rest = text.removeprefix(head).replace(str(frame.path), "\0")  # the file's own path kept whole
        rest = rest.replace(str(frame.root), "the watched folder").replace("\0", str(frame.path))
        raise ImageError(head + rest if text.startswith(head) else rest) from exc
    return image, (time.perf_counter() - started) * 1000


def is_file(ready: Ready) -> bool:
    """A file's frame: the next one may be read ahead (a camera's may not: the newest must win)."""
    return ready.frame.path is not None


def error_reason(frame: Frame, exc: BaseException) -> str:
    """The error's one line, naming the frame by its id rather than its full path (paths only at DEBUG): the path is
    looked for folded onto one line, as a SegLensError's message holds it (a tab or two spaces in it kept it whole),
    and replaced before the line is cut (a cut through it left its start)."""
    text = " ".join(str(exc).split())
    if frame.path is not None:
        text = text.replace(" ".join(str(frame.path).split()), frame.id)
    line = text[:300] or type(exc).__name__
    if not isinstance(exc, SegLensError) and line != type(exc).__name__:
        line = f"{type(exc).__name__}: {line}"  # as one_line(typed=True): an error nobody planned for says its type
    return line if line.startswith(frame.id) else f"{frame.id}: {line}"
