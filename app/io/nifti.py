"""NIfTI volumes through nibabel: the header into a Volume, slices out of a small cache of loaded arrays.

Slice k is `data[:, :, k].T` (rows = the j axis, columns = the i axis); a 4D file's slice s is (t, k) with
t = s // K, k = s % K. A `.nii.gz` cannot be read one slice at a time without decompressing what precedes it, so
the last two volumes read are kept whole in memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from app.errors import ImageError
from app.io.volumes import SliceRef, Volume
from app.io.window import apply_window, auto_window

_CACHED_VOLUMES = 2
_cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
_windows: dict[tuple, tuple[float, float]] = {}
_lock = threading.Lock()  # the worker thread and a prefetch thread may read slices at once
_UNIT_TO_MM = {"meter": 1000.0, "mm": 1.0, "micron": 0.001}  # "unknown": assume mm
_VOLUME_FACTOR = 4  # a whole volume may hold this many times the per-image pixel limit


def nifti_stem(path: Path) -> str:
    """The file name without `.nii` / `.nii.gz`."""
    name = path.name
    for ending in (".nii.gz", ".nii"):
        if name.lower().endswith(ending):
            return name[: -len(ending)]
    return path.stem


def nifti_volume(path: Path) -> Volume:
    """A Volume from the NIfTI header (no voxel data is read). Raises ImageError naming the file."""
    img = _load(path)
    shape = tuple(int(n) for n in img.shape)
    if not 2 <= len(shape) <= 4 or min(shape) < 1:
        raise ImageError(f"{path}: unsupported NIfTI shape {shape} (2D, 3D or 4D expected)")
    depth = shape[2] if len(shape) > 2 else 1
    times = shape[3] if len(shape) > 3 else 1
    zooms = [float(z) for z in img.header.get_zooms()[:3]] + [1.0] * (3 - min(3, len(shape)))
    scale = _UNIT_TO_MM.get(img.header.get_xyzt_units()[0], 1.0)
    label = f"NIfTI · {nifti_stem(path)} ({depth} slices" + (f" × {times} time points)" if times > 1 else ")")
    return Volume(
        kind="nifti", source=path, key=nifti_stem(path), label=label,
        slices=tuple(SliceRef(path, frame=s) for s in range(depth * times)),
        rows=shape[1] if len(shape) > 1 else 1, columns=shape[0],
        spacing=(zooms[2] * scale, zooms[1] * scale, zooms[0] * scale),
        affine=np.asarray(img.affine, dtype=np.float64),
        info={"Format": "NIfTI", "Slices": str(depth)} | ({"Time points": str(times)} if times > 1 else {}),
        ordered_by="file", time_points=times,
    )


def read_nifti_slice(volume: Volume, index: int, *, max_pixels: int):
    """Slice `index` of a NIfTI volume as a DecodedImage: raw float32 values, the volume's window, uint8 pixels."""
    from app.io.images import DecodedImage

    path = volume.source
    if volume.rows * volume.columns > max_pixels:
        raise ImageError(f"{path}: slice too large ({volume.columns}×{volume.rows}; the limit is "
                         f"{max_pixels / 1e6:.0f} megapixels)")
    data, stamp = _data(path, max_pixels=max_pixels)
    k_count = data.shape[2] if data.ndim > 2 else 1
    t, k = divmod(index, k_count)
    plane = data if data.ndim == 2 else data[:, :, k] if data.ndim == 3 else data[:, :, k, t]
    raw = np.ascontiguousarray(np.asarray(plane, dtype=np.float32).T)
    window = volume.window or _shared_window(volume, data, stamp)
    info = dict(volume.info)
    info["Window"] = f"C {window[0]:g} / W {window[1]:g} (auto)"
    if volume.time_points > 1:
        info["Time point"] = f"{t + 1} / {volume.time_points}"
    return DecodedImage(path, apply_window(raw, *window), "NIfTI", raw, window, False, info, 1)


def _shared_window(volume: Volume, data: np.ndarray, stamp: tuple) -> tuple[float, float]:
    """Automatic window over the middle slice, computed once per file version."""
    with _lock:
        if stamp in _windows:
            return _windows[stamp]
    k_count = data.shape[2] if data.ndim > 2 else 1
    middle = data if data.ndim == 2 else data[:, :, k_count // 2] if data.ndim == 3 else data[:, :, k_count // 2, 0]
    window = auto_window(np.asarray(middle, dtype=np.float32))
    with _lock:
        _windows[stamp] = window
    return window


def _data(path: Path, *, max_pixels: int) -> tuple[np.ndarray, tuple]:
    """The whole voxel array (cached: 2 volumes, keyed by path and modification time) and its cache key."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise ImageError(f"{path}: {'file not found' if not path.exists() else exc.strerror}") from exc
    stamp = (str(path), stat.st_mtime_ns, stat.st_size)
    with _lock:
        if stamp in _cache:
            _cache.move_to_end(stamp)
            return _cache[stamp], stamp
    img = _load(path)
    voxels = int(np.prod(img.shape))
    if voxels > _VOLUME_FACTOR * max_pixels:
        raise ImageError(f"{path}: volume too large ({voxels / 1e6:.0f} megavoxels; the limit is "
                         f"{_VOLUME_FACTOR * max_pixels / 1e6:.0f})")
    try:
        data = np.asanyarray(img.dataobj)
    except Exception as exc:  # truncated gzip, short file, bad scaling: nibabel raises many kinds
        raise ImageError(f"{path}: damaged NIfTI data ({_one_line(exc)})") from exc
    if data.dtype == np.float64:
        data = data.astype(np.float32)  # scaled ints come back as float64: half the memory, same display
    with _lock:
        _cache[stamp] = data
        while len(_cache) > _CACHED_VOLUMES:
            _cache.popitem(last=False)
    return data, stamp


def _load(path: Path):
    import nibabel as nib

    if not path.exists():
        raise ImageError(f"{path}: file not found")
    try:
        return nib.load(str(path))
    except Exception as exc:  # ImageFileError, HeaderDataError, EOFError, zlib/gzip errors…
        raise ImageError(f"{path}: damaged NIfTI header ({_one_line(exc)})") from exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
