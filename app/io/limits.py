"""How much a file may declare before SegLens allocates anything for it.

A header is a promise a small file cannot keep: 368 bytes of NIfTI declared 1×1×3000×3000 (9 M slices), a
341 KB `.nii.gz` inflated to a GB of float64, a 1.3 MB TIFF page held 1,000 planes. Every decoder reads the
declared shape and element type first and asks here before it builds per-slice records or decodes a pixel.
The budgets follow `--max-megapixels` (app.io.images.pixel_limit), so one option bounds every kind of input.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.errors import ImageError

MAX_SLICES = 100_000  # a 4D fMRI run of 72 slices × 1,200 time points has 86,400
VOLUME_FACTOR = 4  # a whole volume may hold this many times the per-image pixel limit …
_VOLUME_BYTES_PER_VOXEL = 4  # … counted as float32 voxels (what a slice is decoded to)
_IMAGE_BYTES_PER_PIXEL = 8  # a decoded 2D image: 16-bit RGBA or float64 gray at the pixel limit


def volume_bytes_limit(max_pixels: int) -> int:
    """The largest decoded volume, in bytes, at a per-image limit of `max_pixels`."""
    return VOLUME_FACTOR * _VOLUME_BYTES_PER_VOXEL * max_pixels


def image_bytes_limit(max_pixels: int) -> int:
    """The largest decoded 2D image (every sample and plane of it), in bytes."""
    return _IMAGE_BYTES_PER_PIXEL * max_pixels


def size_text(n_bytes: int) -> str:
    """`452 bytes`, `2.9 MB`, `315 MB`, `1.2 GB`: a size for an error line."""
    if n_bytes < 100_000:
        return f"{n_bytes} bytes"
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:.1f} GB"
    return f"{n_bytes / 1e6:.0f} MB" if n_bytes >= 1e7 else f"{n_bytes / 1e6:.1f} MB"


def megapixels(pixels: float, *, beside: float | None = None) -> str:
    """`pixels` in megapixels for an error line: whole from 10 up, else one decimal, trailing zeros dropped, and
    more decimals where that rounding would read as `beside` (pixels too): 1024×1024 beside a limit of 1 is
    `1.05`, not `1` (which read as within it)."""
    value = pixels / 1e6
    decimals = 0 if value >= 10 else 1
    while decimals < 6 and ((value > 0 and round(value, decimals) == 0)
                            or (beside is not None and round(value, decimals) == round(beside / 1e6, decimals))):
        decimals += 1
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def shape_text(shape: Sequence[int]) -> str:
    return "×".join(str(int(n)) for n in shape)


def check_slices(path: object, count: int) -> None:
    """Refuse a volume of more slices (slices × time points) than MAX_SLICES, before one record is made."""
    if count > MAX_SLICES:
        raise ImageError(f"{path}: {count} slices declared; the limit is {MAX_SLICES}")


def check_decoded(path: object, shape: Sequence[int], itemsize: int, limit: int, *, dtype: str,
                  what: str = "image") -> None:
    """Refuse `shape` of `dtype` elements (`itemsize` bytes each) when decoding it would take over `limit`
    bytes: every dimension counts (depth, samples per pixel, time points), not only rows × columns."""
    total = itemsize
    for n in shape:
        total *= max(int(n), 0)
    if total > limit:
        raise ImageError(f"{path}: {what} too large ({shape_text(shape)} {dtype} = {size_text(total)} decoded; "
                         f"the limit is {size_text(limit)}, from --max-megapixels)")
