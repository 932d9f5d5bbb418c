"""Decode the images people drop into arrays the pipeline understands: uint8 gray (H×W) or RGB (H×W×3).

EXIF orientation is applied; palette, RGBA/LA (composited over black), CMYK, 1-bit, 16-bit and float
images are converted. 16-bit images are mapped from their full range (value / 257), never truncated.
Every failure becomes an ImageError naming the file and the problem in one line.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from app.errors import ImageError, one_line
from app.guard.untrusted import INPUT_FILE_LIMIT, NotRegularFile, OutsideRoot, kind_of, open_untrusted
from app.io.decoded import DEFAULT_MAX_PIXELS as DEFAULT_MAX_PIXELS  # re-exported: a caller reads a picture here
from app.io.decoded import DecodedImage as DecodedImage
from app.io.decoded import pixel_limit as pixel_limit
from app.io.limits import check_decoded, image_bytes_limit, megapixels
from app.io.png import decode_png, metadata_after_pixels
from app.io.tiff import is_tiff, open_tiff
from app.io.window import auto_window

if TYPE_CHECKING:
    from app.io.volumes import Volume

_WIDE_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")  # decoded with their values kept (`raw`)


_guard_lock = threading.Lock()
# Pillow warns (on stderr) above MAX_IMAGE_PIXELS, refusing only above twice it; every caller here checks the size
# itself right after opening and refuses in one line, so the warning would only come before that line.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


def pillow_guard(max_pixels: int) -> None:
    """Keep Pillow's decompression-bomb guard for the whole process (it was switched off with None, which left
    every other Pillow caller without a limit), raised only as far as this call's `max_pixels` needs: Pillow
    then refuses above twice it while opening, and the caller checks the size from the header against its own
    limit (`check_size`) before decoding."""
    with _guard_lock:
        current = Image.MAX_IMAGE_PIXELS
        if current is None or current < max_pixels:
            Image.MAX_IMAGE_PIXELS = max_pixels


def check_size(path: Path, size: tuple[int, int], max_pixels: int) -> None:
    """Refuse an image of `size` (width, height), read from its header, over `max_pixels`: one line."""
    _check_size(path, size, max_pixels)


def read_slice(volume: Volume, index: int, *, max_pixels: int | None = None, root: Path | None = None) -> DecodedImage:
    """Slice `index` of a volume as a DecodedImage (pixels for the model, raw real units, the volume's shared
    window, info with "Slice" and "Position"). Raises ImageError in one line naming the file and the problem."""
    if not 0 <= index < volume.depth:
        raise ImageError(f"{volume.source}: slice {index + 1} does not exist (the volume has {volume.depth})")
    max_pixels = max_pixels or pixel_limit()
    if volume.kind == "nifti":
        from app.io.nifti import read_nifti_slice  # nibabel, only for a NIfTI

        image = read_nifti_slice(volume, index, max_pixels=max_pixels, root=root)
    else:
        from app.io.series import read_dicom_slice  # pydicom, only for DICOM

        image = read_dicom_slice(volume, index, max_pixels=max_pixels)
    position = volume.slice_position_mm(index)
    image.info["Slice"] = f"{index + 1} / {volume.depth}"
    if position is not None:
        image.info["Position"] = f"{position:.1f} mm"
    return image


def read_image(path: str | Path, *, max_pixels: int | None = None, frame: int = 0,
               root: str | Path | None = None) -> DecodedImage:
    """Decode the image at `path` (`frame` of a multi-frame file). Raises ImageError in one line on any problem.
    `root`: the watched folder the file was found in. Every open of the file then goes through the untrusted gate
    under it, so a part swapped for a link (out of the folder) after a check is refused, never decoded."""
    path = Path(path)
    under = Path(root) if root is not None else None
    max_pixels = max_pixels or pixel_limit()
    _check_file(path)
    from app.io.volumes import is_volume_file

    if is_volume_file(path):  # a NIfTI by its path (a listed file the viewer decodes, bench): slice `frame`, or
        from app.io.nifti import nifti_volume  # its header's own problem, not "not an image"

        return read_slice(nifti_volume(path, root=under), frame, max_pixels=max_pixels, root=under)
    from app.io.dicom import is_dicom, read_dicom

    if is_dicom(path, root=under):
        pixels, raw, window, invert, info, frames = read_dicom(path, frame=frame, max_pixels=max_pixels, root=under)
        return DecodedImage(path, pixels, "DICOM", raw, window, invert, info, frames)
    if is_tiff(path, root=under):
        decoded = _read_tiff(path, frame, max_pixels, root=under)
        if decoded is not None:
            return decoded
    pillow_guard(max_pixels)
    try:
        # the file opened once, by the untrusted gate (a FIFO swapped in after _check_file: refused), and Pillow,
        # the PNG chunk walk and the fast decoders all read that one handle
        with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=under) as handle, Image.open(handle) as img:
            _check_size(path, img.size, max_pixels)
            frames = int(getattr(img, "n_frames", 1) or 1)
            if frame:
                if not 0 <= frame < frames:
                    raise ImageError(f"{path}: frame {frame} does not exist (the file has {frames})")
                img.seek(frame)
                _check_size(path, img.size, max_pixels, frame=frame)  # a TIFF's pages each have their own size
            mode = img.mode
            data = _png_bytes(handle, img)
            oriented = _orientation(img, data) in (None, 1)
            fast = _decode_fast(handle, img, data) if oriented and not frame else None
            if fast is not None and fast.dtype == np.uint8:
                return DecodedImage(path, fast, mode, frame_count=frames)
            if fast is not None:  # 16-bit gray PNG: the values kept, as Pillow's path below keeps them
                raw, pixels = fast.astype(np.float32), _wide_to_uint8(fast, mode)
            else:
                upright: Image.Image = img if oriented else ImageOps.exif_transpose(img) or img
                raw = np.asarray(upright).astype(np.float32) if mode in _WIDE_MODES else None
                pixels = _to_array(upright)
    except ImageError:
        raise
    except UnidentifiedImageError as exc:
        raise ImageError(f"{path}: not an image, or a format that cannot be read") from exc
    except Image.DecompressionBombError as exc:
        raise ImageError(f"{path}: image too large (over twice the limit of {megapixels(max_pixels)} "
                         f"megapixels)") from exc
    except MemoryError as exc:
        raise ImageError(f"{path}: not enough memory to decode this image") from exc
    except (NotRegularFile, OutsideRoot) as exc:  # a part swapped for a link or a FIFO since it was looked at
        raise ImageError(f"{path}: {exc}") from exc
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ImageError(f"{path}: damaged or truncated image ({one_line(exc, first=True)})") from exc
    return _decoded(path, pixels, mode, raw, frames)


def _decoded(path: Path, pixels: np.ndarray, mode: str, raw: np.ndarray | None, frames: int) -> DecodedImage:
    if raw is not None:  # 16-bit / float: keep the values; display through an automatic window, never truncated
        window = auto_window(raw)
        info = {"Frames": str(frames), "Window": f"C {window[0]:g} / W {window[1]:g} (auto)", "Mode": mode}
        return DecodedImage(path, pixels, mode, raw, window, False, info, frames)
    return DecodedImage(path, pixels, mode, frame_count=frames)


def _read_tiff(path: Path, frame: int, max_pixels: int, *, root: Path | None = None) -> DecodedImage | None:
    """A TIFF through tifffile (app/io/tiff.py); None leaves it to Pillow. The size is checked from the header,
    for the whole full-resolution plane however it is tiled, before anything is decoded."""
    plane = open_tiff(path, root=root)
    if plane is None:
        return None
    if not 0 <= frame < plane.frames:
        raise ImageError(f"{path}: frame {frame} does not exist (the file has {plane.frames})")
    _check_size(path, plane.sizes[frame], max_pixels, frame=frame)
    if plane.shapes:  # every axis (a volumetric page's depth, samples per pixel) × the element's bytes
        check_decoded(path, plane.shapes[frame], plane.itemsizes[frame], image_bytes_limit(max_pixels),
                      dtype=f"{plane.itemsizes[frame] * 8}-bit")
    try:
        read = plane.read(frame)
    except MemoryError as exc:
        raise ImageError(f"{path}: not enough memory to decode this image") from exc
    if read is None:
        return None
    values, mode = read
    if values.ndim == 2 and mode in _WIDE_MODES:
        return _decoded(path, _wide_to_uint8(values, mode), mode, values.astype(np.float32), plane.frames)
    if mode.endswith(";16"):  # 16-bit RGB(A): mapped from the full range, as for PNGs
        values, mode = (values.astype(np.uint32) // 257).astype(np.uint8), mode[:-3]
    if mode in ("RGBA",):
        values = _to_array(Image.fromarray(np.ascontiguousarray(values), "RGBA"))  # composited over black
    return _decoded(path, np.ascontiguousarray(values), mode, None, plane.frames)


def from_array(pixels: np.ndarray, path: Path | None = None) -> DecodedImage:
    """Wrap an in-memory array (uint8 gray or RGB) as a DecodedImage."""
    if pixels.dtype != np.uint8 or pixels.ndim not in (2, 3) or (pixels.ndim == 3 and pixels.shape[2] != 3):
        raise ImageError(f"{path or 'array'}: expected uint8 H×W or H×W×3, got {pixels.dtype} {pixels.shape}")
    return DecodedImage(path, pixels, "L" if pixels.ndim == 2 else "RGB")


def _check_file(path: Path) -> None:
    try:
        stat = path.stat()
    except FileNotFoundError as exc:
        raise ImageError(f"{path}: file not found") from exc
    except OSError as exc:
        raise ImageError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    what = kind_of(stat.st_mode)
    if what is not None:  # a folder, FIFO or device: never opened (a FIFO would wait for a writer)
        raise ImageError(f"{path}: not a regular file: {what}")
    if stat.st_size == 0:
        raise ImageError(f"{path}: empty file (0 bytes)")
    if not os.access(path, os.R_OK):
        raise ImageError(f"{path}: permission denied")


def _check_size(path: Path, size: tuple[int, int], max_pixels: int, *, frame: int = 0) -> None:
    """Refuse the frame about to be decoded when it is over the limit (read from its header, nothing decoded)."""
    width, height = size
    if width * height > max_pixels:
        which = f"frame {frame} " if frame else ""
        raise ImageError(f"{path}: image too large ({which}{width}×{height} = "
                         f"{megapixels(width * height, beside=max_pixels)} megapixels; the limit is "
                         f"{megapixels(max_pixels)})")


def _orientation(img: Image.Image, png: bytes | None = None) -> int | None:
    """The EXIF orientation tag (1 = as stored), read without decoding the pixels. Pillow's `getexif` on a PNG
    decodes the whole image first, in case EXIF follows the pixels; when the chunk walk finds none there, what
    Pillow read on opening is all there is, and the base method reads it from that."""
    try:
        if png is not None and not metadata_after_pixels(png):
            tag: int | None = Image.Image.getexif(img).get(0x0112)
            return tag
        tag = img.getexif().get(0x0112)
        return tag
    except Exception:  # a damaged EXIF block: let exif_transpose decide (it ignores what it cannot read)
        return 0


def _png_bytes(handle: BinaryIO, img: Image.Image) -> bytes | None:
    """The file's bytes when it is a PNG (read once: the chunk walk and the decoder both use them)."""
    if img.format != "PNG":
        return None
    return _file_bytes(handle)


def _file_bytes(handle: BinaryIO) -> bytes | None:
    """The whole file behind `handle` (capped by the gate that opened it), its position kept for Pillow."""
    try:
        at = handle.tell()
        handle.seek(0)
        data = handle.read()
        handle.seek(at)
    except OSError:
        return None
    return data


def _decode_fast(handle: BinaryIO, img: ImageFile.ImageFile, png: bytes | None) -> np.ndarray | None:
    """Plain 8-bit RGB/gray JPEGs and PNGs, and 16-bit gray PNGs, decoded straight into an array (the same pixels
    as Pillow, in about half the time: Pillow's array export copies the image through `tobytes`). None when the
    file is anything else, or when the decoder declines it; Pillow then decodes it and reports what is wrong."""
    if img.format == "PNG" and png is not None:
        plain = all(tile[3] == {"I;16": "I;16B"}.get(img.mode, img.mode) for tile in img.tile)
        if img.mode in ("RGB", "L", "I;16") and plain:  # not 16-bit RGB, palette, 1/2/4-bit gray, ...
            return decode_png(png, mode=img.mode, size=img.size)
        return None
    if img.mode not in ("RGB", "L") or img.format != "JPEG":
        return None
    whole = _file_bytes(handle)
    if whole is None:
        return None
    data = np.frombuffer(whole, dtype=np.uint8)
    if bytes(data[-2:]) != b"\xff\xd9":
        return None  # truncated (libjpeg would pad it with grey without a word): Pillow reports it
    import cv2

    from app.io.native import quiet_native_stderr

    rgb_flag = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.10 decodes to RGB directly
    color = cv2.IMREAD_GRAYSCALE if img.mode == "L" else cv2.IMREAD_COLOR if rgb_flag is None else rgb_flag
    with quiet_native_stderr():  # libjpeg prints its warnings itself (app.io.native)
        pixels = cv2.imdecode(data, color | cv2.IMREAD_IGNORE_ORIENTATION)
    if pixels is None or pixels.shape != ((img.height, img.width) if img.mode == "L" else (img.height, img.width, 3)):
        return None
    if img.mode == "RGB" and rgb_flag is None:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)
    return pixels


def _to_array(img: Image.Image) -> np.ndarray:
    """Pillow image of any mode → uint8 gray or RGB array."""
    mode = img.mode
    if mode in _WIDE_MODES:
        return _wide_to_uint8(np.asarray(img), mode)
    if mode == "P":
        img = img.convert("RGBA") if "transparency" in img.info else img.convert("RGB")
        mode = img.mode
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        background = Image.new("RGBA", img.size, (0, 0, 0, 255))
        img = Image.alpha_composite(background, img.convert("RGBA")).convert("RGB")
        mode = "RGB"
    if mode in ("1", "L"):
        return np.asarray(img.convert("L"))
    if mode != "RGB":  # CMYK, YCbCr, LAB, HSV, ...
        img = img.convert("RGB")
    return np.asarray(img)


def _wide_to_uint8(values: np.ndarray, mode: str) -> np.ndarray:
    if mode.startswith("I;16") or (mode == "I" and values.min(initial=0) >= 0 and values.max(initial=0) <= 65535):
        return (values.astype(np.uint32) // 257).astype(np.uint8)
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if mode == "F" and lo >= 0.0 and hi <= 1.0:
        lo, hi = 0.0, 1.0  # a [0, 1] float image keeps its absolute brightness
    span = hi - lo or 1.0
    scaled = (np.nan_to_num(values.astype(np.float64), nan=lo, posinf=hi, neginf=lo) - lo) * (255.0 / span)
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)
