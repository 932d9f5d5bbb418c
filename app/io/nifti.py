"""NIfTI volumes through nibabel: the header into a Volume, slices out of a small cache of loaded arrays.

Slice k is `data[:, :, k].T` (rows = the j axis, columns = the i axis); a 4D file's slice s is (t, k) with
t = s // K, k = s % K. Every declared size is checked from the header before anything is allocated
(app.io.limits): the slice count, the slice's pixels, the whole volume in bytes of the type it decodes to (float64
when the header scales the values), and for a `.nii` that the file holds the bytes its header declares.

A `.nii` is read one slice at a time (nibabel's array proxy seeks to it). A `.nii.gz` cannot be read one slice
at a time without decompressing what precedes it, so the last two volumes read are kept whole, in their stored
type (int16 stays int16), and each slice is scaled on its own: never the whole volume as float64.
"""

from __future__ import annotations

import gzip
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from app.errors import ImageError, one_line
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted
from app.io.decoded import DecodedImage, pixel_limit
from app.io.limits import check_decoded, check_slices, megapixels, size_text, volume_bytes_limit
from app.io.volumes import SliceRef, Volume
from app.io.window import apply_window, auto_window
from app.spelling import counted

# A NIfTI image as nibabel loads it: `Any`, for nibabel's own types leave `dataobj` (an array proxy) untyped.
NiftiImage = Any
_Stamp = tuple[str, int, int]  # (path, modification time in ns, size): one version of a file

_CACHED_VOLUMES = 2
_cache: OrderedDict[_Stamp, _Source] = OrderedDict()
_windows: dict[_Stamp, tuple[float, float]] = {}
_lock = threading.Lock()  # the worker thread and a prefetch thread may read slices at once
_UNIT_TO_MM = {"meter": 1000.0, "mm": 1.0, "micron": 0.001}  # "unknown": assume mm


def nifti_stem(path: Path) -> str:
    """The file name without `.nii` / `.nii.gz`."""
    name = path.name
    for ending in (".nii.gz", ".nii"):
        if name.lower().endswith(ending):
            return name[: -len(ending)]
    return path.stem


def nifti_volume(path: Path, *, max_pixels: int | None = None, root: Path | None = None) -> Volume:
    """A Volume from the NIfTI header (no voxel data is read), its declared sizes checked against `max_pixels`
    (default: app.io.decoded.pixel_limit) before a slice record is made. Raises ImageError naming the file.
    `root`: the watched folder the file was found in (every open goes through the untrusted gate under it)."""
    img = load_nifti_image(path, root=root)
    shape = tuple(int(n) for n in img.shape)
    if not 2 <= len(shape) <= 4 or min(shape) < 1:
        raise ImageError(f"{path}: unsupported NIfTI shape {shape} (2D, 3D or 4D expected)")
    _check_declared(path, img, shape, max_pixels=max_pixels or pixel_limit())
    depth = shape[2] if len(shape) > 2 else 1
    times = shape[3] if len(shape) > 3 else 1
    zooms = [float(z) for z in _stored_zooms(path, img, root=root)[:3]] + [1.0] * (3 - min(3, len(shape)))
    scale = _UNIT_TO_MM.get(img.header.get_xyzt_units()[0], 1.0)
    label = f"NIfTI · {nifti_stem(path)} ({counted(depth, 'slice')}" + (
        f" × {times} time points)" if times > 1 else ")")
    return Volume(
        kind="nifti", source=path, key=nifti_stem(path), label=label,
        slices=tuple(SliceRef(path, frame=s) for s in range(depth * times)),
        rows=shape[1] if len(shape) > 1 else 1, columns=shape[0],
        spacing=(zooms[2] * scale, zooms[1] * scale, zooms[0] * scale),
        affine=np.asarray(img.affine, dtype=np.float64),
        info={"Format": "NIfTI", "Slices": str(depth)} | ({"Time points": str(times)} if times > 1 else {}),
        ordered_by="file", time_points=times,
    )


def read_nifti_slice(volume: Volume, index: int, *, max_pixels: int, root: Path | None = None) -> DecodedImage:
    """Slice `index` of a NIfTI volume as a DecodedImage: raw float32 values, the volume's window, uint8 pixels.
    `root`: the watched folder it was found in (opened under it only)."""

    path = volume.source
    if volume.rows * volume.columns > max_pixels:
        raise ImageError(f"{path}: slice too large ({volume.columns}×{volume.rows}; the limit is "
                         f"{megapixels(max_pixels)} megapixels)")
    source = _source(path, max_pixels=max_pixels, root=root)
    raw = source.plane(index)
    window = volume.window or _shared_window(source)
    info = dict(volume.info)
    info["Window"] = f"C {window[0]:g} / W {window[1]:g} (auto)"
    if volume.time_points > 1:
        info["Time point"] = f"{index // source.k_count + 1} / {volume.time_points}"
    return DecodedImage(path, apply_window(raw, *window), "NIfTI", raw, window, False, info, 1)


def _shared_window(source: _Source) -> tuple[float, float]:
    """Automatic window over the middle slice, computed once per file version."""
    with _lock:
        if source.stamp in _windows:
            return _windows[source.stamp]
    window = auto_window(source.plane(source.depth // 2))
    with _lock:
        _windows[source.stamp] = window
    return window


class _Source:
    """One version of a NIfTI file, read a slice at a time: slice s as float32 rows × columns."""

    def __init__(self, path: Path, img: NiftiImage, stamp: _Stamp, root: Path | None = None) -> None:
        self.path, self.img, self.stamp, self.root = path, img, stamp, root
        shape = img.shape
        self.k_count = int(shape[2]) if len(shape) > 2 else 1
        self.depth = self.k_count * (int(shape[3]) if len(shape) > 3 else 1)
        self._stored: np.ndarray | None = None  # .nii.gz: the whole volume in its stored type, read once
        self._reading = threading.Lock()  # two threads asking at once decompress it once

    def plane(self, index: int) -> np.ndarray:
        t, k = divmod(index, self.k_count)
        where = (slice(None), slice(None), k, t)[:len(self.img.shape)]
        try:
            values = self._gzip_plane(where) if _compressed(self.path) else self.img.dataobj[where]
        except ImageError:
            raise
        except MemoryError as exc:
            raise ImageError(f"{self.path}: not enough memory to read this volume") from exc
        except Exception as exc:  # truncated gzip, short file, bad scaling: nibabel raises many kinds
            raise ImageError(f"{self.path}: damaged NIfTI data ({one_line(exc)})") from exc
        return np.ascontiguousarray(np.asarray(values, dtype=np.float32).T)

    def _gzip_plane(self, where: tuple[slice | int, ...]) -> np.ndarray:
        with self._reading:
            if self._stored is None:
                self._stored = _read_stored(self.path, self.img.dataobj, root=self.root)
            stored = self._stored
        slope, inter = _scaling(self.img)
        plane: np.ndarray = stored[where]
        if (slope, inter) == (1.0, 0.0):
            return plane
        scaled: np.ndarray = plane * slope + inter  # float64 for one slice only, as nibabel scales it
        return scaled


def _read_stored(path: Path, proxy: Any, *, root: Path | None = None) -> np.ndarray:  # proxy: nibabel's ArrayProxy
    """A `.nii.gz`'s voxels in their stored type, decompressed straight into one array (nibabel's own read holds
    the decompressed bytes and the array at once: twice the volume)."""
    values = np.empty(int(np.prod(proxy.shape, dtype=np.int64)), dtype=proxy.dtype)
    buffer, done = values.view(np.uint8).data, 0  # a memoryview over the array's bytes
    with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root) as raw, gzip.GzipFile(fileobj=raw) as stream:
        stream.seek(int(proxy.offset))  # forward: decompresses the header and extensions, nothing kept
        while done < len(buffer):
            got = stream.readinto(buffer[done:done + (16 << 20)])
            if not got:
                raise ImageError(f"{path}: damaged NIfTI data (the file ends after {size_text(done)} of "
                                 f"{size_text(len(buffer))} of voxels)")
            done += got
    shaped: np.ndarray = values.reshape(proxy.shape, order=proxy.order)
    return shaped


def _source(path: Path, *, max_pixels: int, root: Path | None = None) -> _Source:
    """The file's current version (cached: 2, keyed by path, modification time and size), its sizes checked.
    Under a `root` the name's own entry is looked at (a link is no version of a watched file)."""
    try:
        stat = path.lstat() if root is not None else path.stat()
    except OSError as exc:
        raise ImageError(f"{path}: {'file not found' if not path.exists() else exc.strerror}") from exc
    stamp = (str(path), stat.st_mtime_ns, stat.st_size)
    with _lock:
        if stamp in _cache:
            _cache.move_to_end(stamp)
            return _cache[stamp]
    img = _load(path, root=root)
    _check_declared(path, img, tuple(int(n) for n in img.shape), max_pixels=max_pixels)
    source = _Source(path, img, stamp, root)
    with _lock:
        _cache[stamp] = source
        while len(_cache) > _CACHED_VOLUMES:
            _cache.popitem(last=False)
    return source


def _check_declared(path: Path, img: NiftiImage, shape: tuple[int, ...], *, max_pixels: int) -> None:
    """Every size the header declares, before anything is allocated: the slice count, one slice's pixels, the
    volume in bytes of the type it decodes to (float64 when scaled), and a `.nii`'s bytes against the file's."""
    depth = shape[2] if len(shape) > 2 else 1
    times = shape[3] if len(shape) > 3 else 1
    check_slices(path, depth * times)
    rows, columns = (shape[1] if len(shape) > 1 else 1), shape[0]
    if rows * columns > max_pixels:
        raise ImageError(f"{path}: slice too large ({columns}×{rows}; the limit is "
                         f"{megapixels(max_pixels)} megapixels)")
    stored = np.dtype(img.get_data_dtype())
    decoded = stored if _scaling(img) == (1.0, 0.0) else np.dtype(np.float64)
    check_decoded(path, shape, decoded.itemsize, volume_bytes_limit(max_pixels), dtype=decoded.name,
                  what="volume")
    if not _compressed(path):
        offset, voxels = int(img.dataobj.offset), stored.itemsize * int(np.prod(shape, dtype=np.int64))
        held = path.stat().st_size
        if held < offset + voxels:
            raise ImageError(f"{path}: damaged NIfTI data (the header declares {size_text(voxels)} of voxels from "
                             f"byte {offset}; the file holds {size_text(held)})")


def _scaling(img: NiftiImage) -> tuple[float, float]:
    """(slope, intercept) the values are scaled by; (1, 0) when they are not (NaN or 0 slope means none)."""
    slope, inter = float(img.dataobj.slope), float(img.dataobj.inter)
    return (1.0 if not np.isfinite(slope) or slope == 0 else slope, 0.0 if not np.isfinite(inter) else inter)


def _stored_zooms(path: Path, img: NiftiImage, *, root: Path | None = None) -> tuple[float, ...]:
    """The voxel sizes as the file stores them. nibabel's loader mends a pixdim of 0 to 1 ("setting 0 dims to 1"),
    which would give a volume of invented 1 mm voxels, and so invented mL; the header is read again unmended here,
    so that app.io.volumes refuses a size of 0 (the volume is then read without geometry)."""
    zooms = tuple(float(z) for z in img.header.get_zooms())
    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root) as raw:
            stream = gzip.GzipFile(fileobj=raw) if _compressed(path) else raw
            header = type(img.header).from_fileobj(stream, check=False)
            stored = tuple(float(z) for z in header.get_zooms())
    except Exception:  # the loader read this header already: a second look that fails changes nothing
        return zooms
    return stored if len(stored) == len(zooms) else zooms


def _compressed(path: Path) -> bool:
    return path.name.lower().endswith(".gz")


def _load(path: Path, *, root: Path | None = None) -> NiftiImage:
    return load_nifti_image(path, root=root)


def load_nifti_image(path: Path, *, root: Path | None = None) -> NiftiImage:
    """The NIfTI-1 or NIfTI-2 image at `path`, built by nibabel from the one handle the untrusted gate opened (a
    FIFO, a device or a sparse giant refused without waiting; a file swapped for one after the open changes
    nothing): nibabel is never handed the path, which it would open again with a blocking `open()`. The image's
    array proxy keeps reading that handle (it is closed with the image). `root`: the watched folder it was found in
    (a link there, or a path leading out of it, refused). ImageError naming the file otherwise."""
    import nibabel as nib

    try:
        handle = open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root)
    except FileNotFoundError as exc:
        raise ImageError(f"{path}: file not found") from exc
    except OSError as exc:
        raise ImageError(f"{path}: {exc.strerror or one_line(exc)}") from exc
    stream: Any = gzip.GzipFile(fileobj=handle) if _compressed(path) else handle
    try:
        for kind in (nib.Nifti1Image, nib.Nifti2Image):  # what nib.load would sniff, from the handle
            stream.seek(0)
            holder = nib.FileHolder(filename=str(path), fileobj=stream)
            try:
                return kind.from_file_map({"header": holder, "image": holder})
            except Exception:  # a NIfTI-2 header read as NIfTI-1 (sizeof_hdr 540), or damaged: the last one says
                if kind is nib.Nifti2Image:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
    except Exception as exc:  # HeaderDataError, EOFError, zlib/gzip errors…
        stream.close()
        handle.close()
        raise ImageError(f"{path}: damaged NIfTI header ({one_line(exc)})") from exc
