"""A volume's image as one native array `[D, H, W]` (real units), read a few slices at a time: what the viewer's
three-plane view reslices and a 3D model is given (the folder run's and the viewer's). Every slice goes through the
volume decode (app.io.images.read_slice), and the whole array is checked against the volume limit
(`--max-megapixels`) before it is allocated.

Stepwise, as the viewer's whole-volume count (app.runs.view.fill): the caller runs `step()` between other work so a
300-slice series never holds the viewer still, and drops the stack when the reader leaves the volume.
"""

from __future__ import annotations

import numpy as np

from app.errors import ImageError
from app.io.images import pixel_limit, read_slice
from app.io.limits import check_decoded, shape_text, volume_bytes_limit
from app.io.volumes import Volume

CHUNK = 6  # slices per step: a few tens of milliseconds of DICOM decoding


class VolumeStack:
    """The image of `volume` (time point `time_point` of a 4D NIfTI, the first by default) as float32
    `[D, H, W]`, filled by `step`; into `into` when given (one channel of a case's `[C, D, H, W]`: app.io.channels)."""

    def __init__(self, volume: Volume, *, max_pixels: int | None = None, chunk: int = CHUNK, time_point: int = 0,
                 into: np.ndarray | None = None) -> None:
        """Raises ImageError (one line, naming the file) when the volume is over the limit: nothing allocated."""
        self.volume, self.chunk = volume, max(1, chunk)
        self._max_pixels = max_pixels or pixel_limit()
        self.depth = volume.depth // max(1, volume.time_points)
        self._first = min(max(0, time_point), max(1, volume.time_points) - 1) * self.depth
        shape = (self.depth, volume.rows, volume.columns)
        check_decoded(volume.source, shape, 4, volume_bytes_limit(self._max_pixels), dtype="float32",
                      what="volume")
        if into is not None and into.shape != shape:
            raise ImageError(f"{volume.source}: a {shape_text(shape)} volume, not {shape_text(into.shape)} like "
                             "the case's other channels")
        self.array = np.zeros(shape, np.float32) if into is None else into
        self.done = 0
        self.invert = False  # MONOCHROME1: the slices say so

    @property
    def complete(self) -> bool:
        return self.done >= self.depth

    def step(self) -> int:
        """Read up to `chunk` more slices; how many were read. Raises ImageError naming the slice that cannot be
        read or does not fit the volume (a colour slice, another size): the stack is then of no use."""
        start = self.done
        for k in range(start, min(self.depth, start + self.chunk)):
            image = read_slice(self.volume, self._first + k, max_pixels=self._max_pixels)
            values = image.raw if image.raw is not None else image.pixels
            if values.ndim != 2 or values.shape != self.array.shape[1:]:
                raise ImageError(f"{self.volume.source}: slice {k + 1} is {shape_text(values.shape)}, not a "
                                 f"{shape_text(self.array.shape[1:])} grey slice like the volume's")
            self.array[k] = values
            self.invert = image.invert
            self.done = k + 1
        return self.done - start
