"""TIFF through tifffile: BigTIFF, tiled, the full-resolution level of a pyramidal or OME-TIFF,
8/16-bit and float, and a multi-page file's pages (or an OME-TIFF's planes) as frames.

`open_tiff` reads the header only: the plane's size (the whole level, whatever its tiles), its whole declared
shape (depth and samples per pixel included) and element type, and the frame count, so `read_image` can refuse an
image over `--max-megapixels`, or one whose decoded bytes are over the budget, before a pixel is decoded.
`TiffPlane.read` decodes one frame. Whatever tifffile cannot take (a damaged file, a compression whose codec is
missing — imagecodecs, the fast-decode extra, brings LZW, JPEG, ... — CMYK, a volumetric page within the limit)
returns None, and Pillow decodes the file as before and reports what is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

if TYPE_CHECKING:
    from tifffile import TiffFile

_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic TIFF and BigTIFF, both byte orders


def is_tiff(path: Path, *, root: Path | None = None) -> bool:
    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root) as handle:  # a FIFO or a device: refused
            return handle.read(4) in _MAGIC
    except OSError:
        return False


@dataclass(frozen=True)
class TiffPlanes:
    path: Path
    sizes: tuple[tuple[int, int], ...]  # (width, height) of each frame, from the header
    shapes: tuple[tuple[int, ...], ...] = ()  # each frame's whole decoded shape (depth, samples: every axis)
    itemsizes: tuple[int, ...] = ()  # bytes per element of each frame's decoded type
    root: Path | None = None  # the watched folder it was found in: every open under it only

    @property
    def frames(self) -> int:
        return len(self.sizes)

    def read(self, frame: int) -> tuple[np.ndarray, str] | None:
        """Frame `frame` as (array, Pillow-like mode): H×W, or H×W×S for S samples (RGB, RGBA) — None when
        tifffile cannot decode it (Pillow then does)."""
        import tifffile

        try:
            with open_untrusted(self.path, limit=INPUT_FILE_LIMIT, root=self.root) as handle, \
                    tifffile.TiffFile(handle) as tif:
                page = _frames(tif)[frame]
                key = page.keyframe
                orientation = key.tags.valueof(274, 1)  # Orientation (Pillow's TIFF path ignored it)
                values = _orient(page.asarray(), int(orientation or 1), key.axes)
                photometric = int(key.photometric)
                if photometric == _YCBCR and int(key.compression) == _JPEG:
                    photometric = _RGB  # JPEG tiles (slide scanners): the JPEG decoder returns RGB
                return _normalise(values, key.axes, photometric, key.colormap)
        except Exception:  # damaged, or a codec that is not installed: Pillow's turn
            return None


def open_tiff(path: Path, *, root: Path | None = None) -> TiffPlanes | None:
    """The frames' sizes, from the header (nothing decoded); None when tifffile cannot parse the file (or, under
    `root`, cannot open it there)."""
    import tifffile

    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root) as handle, tifffile.TiffFile(handle) as tif:
            pages = _frames(tif)
            sizes = tuple((int(p.keyframe.imagewidth), int(p.keyframe.imagelength)) for p in pages)
            shapes = tuple(tuple(int(n) for n in p.keyframe.shape) for p in pages)
            itemsizes = tuple(_itemsize(p.keyframe) for p in pages)
    except Exception:
        return None
    return TiffPlanes(path, sizes, shapes, itemsizes, root) if sizes else None


def _itemsize(page: Any) -> int:  # a TiffPage's keyframe
    """Bytes per decoded element: the page's dtype, or a byte per sample when tifffile does not know it (a
    bit depth it leaves to Pillow, which decodes to at least a byte)."""
    dtype = page.dtype
    return 1 if dtype is None else int(np.dtype(dtype).itemsize)


def _frames(tif: TiffFile) -> list[Any]:  # TiffPage or TiffFrame (tifffile types a page's attributes loosely)
    """The pages shown as frames. A pyramid (SubIFDs, OME, or levels in the main chain) or a shaped/OME/ImageJ
    stack: the first series' full-resolution pages. Pages of different sizes (several series): every page
    that is not a reduced-resolution copy, as Pillow counts them."""
    series = tif.series[0]
    if len(tif.series) == 1 or series.is_pyramidal:
        return [page for page in series.levels[0].pages if page is not None]
    return [page for page in tif.pages if not page.is_reduced]  # type: ignore[union-attr]  # pages, not frames


_MINISWHITE, _MINISBLACK, _RGB, _PALETTE, _YCBCR, _JPEG = 0, 1, 2, 3, 6, 7
_ORIENT = {  # the TIFF/EXIF Orientation tag → what turns the stored rows and columns upright (Pillow's mapping)
    2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1], 4: lambda a: a[::-1],
    5: lambda a: a.swapaxes(0, 1), 6: lambda a: a[::-1].swapaxes(0, 1),
    7: lambda a: a[::-1, ::-1].swapaxes(0, 1), 8: lambda a: a[:, ::-1].swapaxes(0, 1),
}


def _orient(values: np.ndarray, orientation: int, axes: str) -> np.ndarray:
    if orientation not in _ORIENT or not axes.startswith("YX"):
        return values  # upright, or planar samples (SYX): left as stored
    return np.ascontiguousarray(_ORIENT[orientation](values))


def _normalise(values: np.ndarray, axes: str, photometric: int,
               colormap: np.ndarray | None) -> tuple[np.ndarray, str] | None:
    if set(axes) - set("YXS") or values.ndim != len(axes):
        return None  # a volumetric page (depth), or axes we do not understand
    if "S" in axes:
        values = np.moveaxis(values, axes.index("S"), -1)  # planar (SYX) → interleaved (YXS)
    samples = values.shape[2] if values.ndim == 3 else 1
    if photometric == _PALETTE and samples == 1 and colormap is not None and values.dtype.kind == "u":
        lut = (np.asarray(colormap).T >> 8).astype(np.uint8) if np.asarray(colormap).max() > 255 else \
            np.asarray(colormap).T.astype(np.uint8)
        return lut[values], "P"
    if photometric not in (_MINISWHITE, _MINISBLACK, _RGB):
        return None  # CMYK, YCbCr left undecoded, CIELab, ...: Pillow converts these
    if samples == 1:
        values = values[..., 0] if values.ndim == 3 else values
        if values.dtype == np.bool_:
            values = values.astype(np.uint8) * 255
        if photometric == _MINISWHITE and values.dtype.kind == "u":
            values = np.iinfo(values.dtype).max - values
        mode = {"u1": "L", "u2": "I;16"}.get(f"{values.dtype.kind}{values.dtype.itemsize}",
                                            "F" if values.dtype.kind == "f" else "I")
        return values, mode
    if samples in (3, 4) and values.dtype in (np.uint8, np.uint16):
        return values, ("RGB" if samples == 3 else "RGBA") + (";16" if values.dtype == np.uint16 else "")
    return None
