"""DICOM files through pydicom: pixel values in real units (HU for CT), the file's window, patient/study fields.

Compressed transfer syntaxes decode where a handler is installed (Pillow covers JPEG baseline and JPEG 2000,
pydicom itself RLE); otherwise the error names the transfer syntax and what to install.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import ImageError, one_line
from app.guard.untrusted import INPUT_FILE_LIMIT, NotRegularFile, TooLarge, open_untrusted
from app.io.limits import check_decoded, check_slices, image_bytes_limit, megapixels

# No numpy at import (it and pydicom are imported where pixels are decoded): discovery asks `has_dicom_marker`
# of every file without an image extension on the viewer's GUI thread, which must not pay numpy's import.
if TYPE_CHECKING:
    import numpy as np
    from pydicom import Dataset

    # read_dicom's (pixels, raw real units, (center, width), invert, info, frames)
    DicomRead = tuple[np.ndarray, np.ndarray | None, tuple[float, float] | None, bool, dict[str, str], int]

INFO_FIELDS = {"PatientName": "Patient", "PatientID": "Patient ID", "StudyDate": "Study date",
               "StudyDescription": "Study", "SeriesDescription": "Series", "Modality": "Modality",
               "InstitutionName": "Institution", "BodyPartExamined": "Body part"}
_HANDLERS = {"JPEG-LS": "pylibjpeg pylibjpeg-libjpeg", "JPEG Lossless": "pylibjpeg pylibjpeg-libjpeg",
             "JPEG Extended": "pylibjpeg pylibjpeg-libjpeg", "JPEG 2000": "pylibjpeg pylibjpeg-openjpeg",
             "High-Throughput JPEG 2000": "pylibjpeg pylibjpeg-openjpeg", "Deflated": ""}  # "": a newer pydicom


def quiet_pydicom() -> None:
    """pydicom warns (and logs) about every odd value of a damaged file, on stderr: SegLens says what is wrong in
    the file's one error line instead. A filter, not `catch_warnings`: the decoding threads share it."""
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning, module=r"pydicom(\.|$)")
    logging.getLogger("pydicom").setLevel(logging.ERROR)


def is_dicom(path: Path, *, root: Path | None = None) -> bool:
    """DICOM by extension, or by the 'DICM' marker after the 128-byte preamble (`root`: opened under it only)."""
    return path.suffix.lower() in DICOM_EXTENSIONS or has_dicom_marker(path, root=root)


DICOM_EXTENSIONS = (".dcm", ".dicom")


def has_dicom_marker(path: Path, *, root: Path | None = None) -> bool:
    """'DICM' after the 128-byte preamble: a DICOM file whatever its name. A FIFO or device is never opened for
    reading (a FIFO in an input folder hung the folder walk): it is no DICOM."""
    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root) as handle:
            return handle.read(132)[128:132] == b"DICM"
    except OSError:
        return False


def read_dicom(path: Path, *, frame: int = 0, max_pixels: int, root: Path | None = None) -> DicomRead:
    """(pixels uint8 for the model by default, raw real-unit values, (center, width), invert, info, frames).
    `root`: the watched folder the file was found in (opened under it only: a link there is refused)."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    quiet_pydicom()
    try:  # pydicom reads the handle the untrusted gate opened: a regular file, within the input limit
        with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root) as handle:
            ds = pydicom.dcmread(handle, force=False)
    except (NotRegularFile, TooLarge) as exc:
        raise ImageError(f"{path}: {exc}") from None
    except InvalidDicomError as exc:
        raise ImageError(f"{path}: not a valid DICOM file ({one_line(exc)})") from exc
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ImageError(f"{path}: damaged or truncated DICOM file ({one_line(exc)})") from exc
    if "PixelData" not in ds:
        raise ImageError(f"{path}: DICOM file without an image (no Pixel Data), e.g. a structured report")
    rows, columns, frames = _geometry(ds, path)
    if not 0 <= frame < frames:
        raise ImageError(f"{path}: frame {frame} does not exist (the file has {frames})")
    # pydicom decodes every frame to give one, so the whole volume counts against the limit
    if frames * rows * columns > max_pixels:
        raise ImageError(f"{path}: image too large ({frames} frames of {columns}×{rows} = "
                         f"{megapixels(frames * rows * columns, beside=max_pixels)} megapixels; the limit is "
                         f"{megapixels(max_pixels)})")
    check_slices(path, frames)
    samples, bits = _int_tag(ds, "SamplesPerPixel", 1), _int_tag(ds, "BitsAllocated", 8)
    check_decoded(path, (frames, rows, columns, samples), max(1, (bits + 7) // 8), image_bytes_limit(max_pixels),
                  dtype=f"{bits}-bit")  # samples per pixel and wide pixels count too
    values = _pixel_array(ds, path)
    if frames > 1:
        values = values[frame]
    photometric = str(ds.get("PhotometricInterpretation", "MONOCHROME2"))
    info = {label: header_text(ds.get(key)) for key, label in INFO_FIELDS.items() if ds.get(key) not in (None, "")}
    info["Frames"] = str(frames)
    if values.ndim == 3:  # colour DICOM (ultrasound, secondary capture): RGB as it is
        rgb = _to_rgb(ds, values, photometric)
        return rgb, None, None, False, info, frames
    from app.io.window import apply_window, auto_window

    real = _rescale(ds, values, path)
    window = file_window(ds) or auto_window(real)
    invert = photometric == "MONOCHROME1"
    info["Window"] = f"C {window[0]:g} / W {window[1]:g}" + (" (from the file)" if file_window(ds) else " (auto)")
    return apply_window(real, *window, invert=invert), real, window, invert, info, frames


def _geometry(ds: Dataset, path: Path) -> tuple[int, int, int]:
    """(rows, columns, frames) as the header declares them, before any pixel is decoded."""
    try:
        rows, columns = int(ds.get("Rows", 0) or 0), int(ds.get("Columns", 0) or 0)
        frames = int(ds.get("NumberOfFrames", 1) or 1)
    except (TypeError, ValueError) as exc:
        raise ImageError(f"{path}: damaged DICOM header (Rows, Columns or Number of Frames: "
                         f"{one_line(exc)})") from exc
    if rows < 1 or columns < 1 or frames < 1:
        raise ImageError(f"{path}: damaged DICOM header ({frames} frames of {columns}×{rows} pixels)")
    return rows, columns, frames


def _int_tag(ds: Dataset, keyword: str, default: int) -> int:
    try:
        return max(1, int(ds.get(keyword, default) or default))
    except (TypeError, ValueError):
        return default


def _decoder_fix(packages: str) -> str:
    """What installs `packages` (pylibjpeg plugins) here: the dicom-codecs extra in a clone, pip elsewhere."""
    from app.paths import install_kind

    if not packages:
        return "a newer pydicom: pip install -U pydicom"
    kind = install_kind()
    if kind == "checkout":
        return f"uv sync --extra dicom-codecs, which brings {packages.replace(' ', ', ')}"
    return f"pip install {packages}" if kind == "installed" else f"{packages}, not in this build"


def _pixel_array(ds: Dataset, path: Path) -> np.ndarray:
    try:
        pixels: np.ndarray = ds.pixel_array
        return pixels
    except (NotImplementedError, RuntimeError) as exc:
        syntax = ds.file_meta.get("TransferSyntaxUID")
        name = getattr(syntax, "name", str(syntax))
        packages = next((v for k, v in _HANDLERS.items() if k.lower() in name.lower()), "pylibjpeg")
        raise ImageError(f"{path}: compressed DICOM ({name}) needs a decoder that is not installed "
                         f"({_decoder_fix(packages)})") from exc
    except Exception as exc:  # truncated pixel data and friends
        raise ImageError(f"{path}: cannot decode the DICOM pixel data ({one_line(exc)})") from exc


_MAX_SLOPE = 1e6  # stored values × this still fit float32 many times over; no modality scales by more
_MAX_INTERCEPT = 1e9


def _rescale(ds: Dataset, values: np.ndarray, path: Path) -> np.ndarray:
    """Stored values → real units: value × RescaleSlope + RescaleIntercept (HU for CT). A slope or intercept that is
    not finite or of an absurd size is refused naming the tag: every pixel would be NaN or inf."""
    import numpy as np

    slope = _value(ds, "RescaleSlope", 1.0, path) or 1.0  # 0 read as 1, as it always was here (and by nibabel)
    intercept = _value(ds, "RescaleIntercept", 0.0, path)
    if not (math.isfinite(slope) and abs(slope) <= _MAX_SLOPE):
        raise ImageError(f"{path}: RescaleSlope {slope:g} is not a usable scale: the pixel values cannot be read "
                         "from it")
    if not (math.isfinite(intercept) and abs(intercept) <= _MAX_INTERCEPT):
        raise ImageError(f"{path}: RescaleIntercept {intercept:g} is not a usable offset: the pixel values cannot "
                         "be read from it")
    real: np.ndarray = values.astype(np.float32) * np.float32(slope) + np.float32(intercept)
    return real


def _value(ds: Dataset, keyword: str, default: float, path: Path) -> float:
    """A number tag (absent or empty: `default`); ImageError naming it when it is not a number."""
    raw = ds.get(keyword)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except (TypeError, ValueError, OverflowError):
        raise ImageError(f"{path}: {keyword} is not a number: the pixel values cannot be read from it") from None


def file_window(ds: Dataset) -> tuple[float, float] | None:
    """The file's own (center, width), None where it has none or a damaged one."""
    center, width = ds.get("WindowCenter"), ds.get("WindowWidth")
    if center is None or width is None:
        return None
    try:
        window = _first(center), max(_first(width), 1.0)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return window if all(math.isfinite(v) for v in window) else None  # a NaN or inf window: the automatic one


def _first(value: Any) -> float:
    """A window value may be multi-valued (several windows): the first is the default."""
    return float(value[0]) if hasattr(value, "__len__") and not isinstance(value, str) else float(value)


def _to_rgb(ds: Dataset, values: np.ndarray, photometric: str) -> np.ndarray:
    import numpy as np

    if photometric.startswith("YBR") and ds.file_meta.TransferSyntaxUID.is_compressed is False:
        from pydicom.pixels.processing import convert_color_space  # where pydicom.pixels re-exports it from

        values = convert_color_space(values, photometric, "RGB")
    if values.dtype != np.uint8:
        values = np.clip(values.astype(np.float32) * (255.0 / max(float(values.max()), 1.0)), 0, 255)
    return np.ascontiguousarray(values.astype(np.uint8)[..., :3])


def header_text(value: Any, *, most: int = 200) -> str:
    """A header field as one line for the info panel and reports: the standard caps these at 64 characters, a
    file may hold any length (or raw bytes, when pydicom could not decode it)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most - 3] + "..."

