"""Window/level: map high-dynamic-range values (CT Hounsfield units, 16-bit counts) to 8-bit grey levels.

The DICOM linear VOI function (PS3.3 C.11.2.1.2): values below `center − width/2` are black, above
`center + width/2` white, linear between. Used for display (interactive W/L) and, independently, for what the
model receives (`input.window` / `input.range` in the sidecar).
"""

from __future__ import annotations

import numpy as np


def apply_window(values: np.ndarray, center: float, width: float, *, invert: bool = False) -> np.ndarray:
    """uint8 grey levels of `values` through the window (center, width); `invert` for MONOCHROME1."""
    width = max(float(width), 1.0)
    low = center - 0.5 - (width - 1) / 2
    scaled = (values.astype(np.float32) - low) * (255.0 / (width - 1 if width > 1 else 1.0))
    np.clip(scaled, 0, 255, out=scaled)
    np.nan_to_num(scaled, copy=False, nan=0.0)  # NaN voxels (NIfTI, float TIFF) black, not an invalid cast
    levels = scaled.astype(np.uint8)
    return 255 - levels if invert else levels


def range_to_uint8(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """uint8 levels with `low` → 0 and `high` → 255 (clipped): the sidecar's `input.range`."""
    span = max(float(high) - float(low), 1e-6)
    levels: np.ndarray = np.clip(np.rint((values.astype(np.float32) - low) * (255.0 / span)), 0, 255).astype(np.uint8)
    return levels


def auto_window(values: np.ndarray) -> tuple[float, float]:
    """A window covering the 0.5–99.5 percentiles: a good first look at an image with no window of its own."""
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if finite.size == 0:
        return 0.0, 1.0
    sample = finite.ravel()[:: max(1, finite.size // 1_000_000)]  # percentiles of ≤ 1M samples: fast, same answer
    low, high = np.percentile(sample, [0.5, 99.5])
    if high <= low:
        low, high = float(sample.min()), float(sample.max()) + 1.0
    return float((low + high) / 2), float(high - low)
