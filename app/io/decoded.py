"""A decoded picture (what every reader returns: images, DICOM, a volume's slice) and the pixel limit they share.

Below the readers (app.io.images, dicom, series, nifti, volumes), which all build it: none of them imports another
for its record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.io.window import apply_window, auto_window

DEFAULT_MAX_PIXELS = 250_000_000  # ~ 16k × 16k; beyond that a decode would need GBs of memory


@dataclass(frozen=True)
class DecodedImage:
    path: Path | None
    pixels: np.ndarray  # uint8 H×W (gray) or H×W×3 (RGB): what the model gets unless its sidecar windows `raw`
    source_mode: str  # Pillow's mode before conversion ("RGB", "I;16", "P"), or "DICOM"
    raw: np.ndarray | None = None  # high-dynamic-range values (HU for CT, 16-bit counts) as float32, H×W
    window: tuple[float, float] | None = None  # (center, width) to display `raw`: the file's, or automatic
    invert: bool = False  # MONOCHROME1: high values are dark
    info: dict[str, str] = field(default_factory=dict)  # patient / study fields, frames, window
    frame_count: int = 1

    def display(self, window: tuple[float, float] | None = None) -> np.ndarray:
        """uint8 pixels for the screen: `raw` through `window` (default: the image's own), else `pixels`."""
        if self.raw is None:
            return self.pixels
        center, width = window or self.window or auto_window(self.raw)
        return apply_window(self.raw, center, width, invert=self.invert)

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def is_gray(self) -> bool:
        return self.pixels.ndim == 2


def pixel_limit() -> int:
    """The largest image decoded: SEGLENS_MAX_MEGAPIXELS (set by `--max-megapixels`), else 250 megapixels."""
    try:
        limit = int(float(os.environ["SEGLENS_MAX_MEGAPIXELS"]) * 1e6)
    except (KeyError, ValueError, OverflowError):  # unset, not a number, or ±inf
        return DEFAULT_MAX_PIXELS
    return limit if limit > 0 else DEFAULT_MAX_PIXELS  # 0 or below would refuse every image
