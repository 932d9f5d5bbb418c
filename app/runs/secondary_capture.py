"""Secondary Capture: the overlay burned into each slice's picture, with a "NOT FOR DIAGNOSIS" banner, as a new
series in the source's study (for a PACS that cannot show DICOM SEG). The folder appears whole or not at all."""

from __future__ import annotations

import contextlib
import secrets
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from app.errors import OutputError
from app.io.render import blend_overlay
from app.io.volumes import Volume
from app.runs.dicom_sources import save_dataset, source_datasets, source_series_number

if TYPE_CHECKING:
    from app.runs.volume_exports import Algorithm, Segment

SC_SERIES_OFFSET = 2000  # the SC series' SeriesNumber: the source's + 2000 (the SEG takes + 1000)


@dataclass(frozen=True)
class _Paint:
    color: tuple[int, int, int] | None


def banner_text(algorithm: Algorithm) -> str:
    """The burned-in warning. ASCII only: OpenCV's Hershey fonts have no em dash or accents."""
    name = algorithm.name.encode("ascii", "replace").decode("ascii")
    return f"NOT FOR DIAGNOSIS - SegLens {name}"


def burn_banner(rgb: np.ndarray, text: str) -> np.ndarray:
    """`rgb` with a dark strip across its top holding `text` in white, scaled to fit the width."""
    out = rgb.copy()
    rows, columns = out.shape[:2]
    font, thickness = cv2.FONT_HERSHEY_SIMPLEX, 1
    (width, height), _ = cv2.getTextSize(text, font, 1.0, thickness)
    scale = min(0.95 * columns / width, 2.0)
    strip = min(rows, max(4, int(height * scale * 1.8)))
    out[:strip] = (out[:strip] * 0.15).astype(np.uint8)
    baseline_y = int(strip / 2 + height * scale / 2)
    cv2.putText(out, text, (max(1, int(columns * 0.025)), baseline_y), font, scale, (255, 255, 255), thickness,
                cv2.LINE_AA)
    return out


def burned_slice(display: np.ndarray, mask: np.ndarray, segments: Sequence[Segment], *, opacity: float,
                 text: str) -> np.ndarray:
    """One slice's RGB picture: the class colours blended at `opacity` (app.io.render), then the banner."""
    paints = [_Paint(None)] * 256
    for segment in segments:
        if segment.value >= 1:
            paints[segment.value] = _Paint(tuple(segment.color))
    rgb = blend_overlay(np.ascontiguousarray(display, np.uint8), np.ascontiguousarray(mask, np.uint8), paints,
                        alpha=opacity)
    return burn_banner(rgb, text)


def write_series(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_dir: Path, *,
                 display: Callable[[int], np.ndarray], opacity: float, algorithm: Algorithm) -> list[Path]:
    """Write `<out_dir>/sc_<k+1:04d>.dcm` for every slice k into a partial folder, then swap it into place."""
    import highdicom as hd

    datasets = source_datasets(volume)
    series_uid, number = hd.UID(), source_series_number(datasets) + SC_SERIES_OFFSET
    partial = out_dir.with_name(f"{out_dir.name}.partial-{secrets.token_hex(4)}")
    try:
        partial.mkdir(parents=True)
        names = []
        for k, source in enumerate(datasets):
            rgb = burned_slice(display(k), labels[k], segments, opacity=opacity, text=banner_text(algorithm))
            image = _sc_image(source, volume.slices[k], rgb, series_uid=series_uid, series_number=number,
                              instance_number=k + 1, algorithm=algorithm)
            names.append(save_dataset(image, partial / f"sc_{k + 1:04d}.dcm").name)
        _swap_in(partial, out_dir)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write the Secondary Capture series ({exc.strerror or exc})") from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # gone after the swap; the leftovers of a failure otherwise
    return [out_dir / name for name in names]


def _swap_in(partial: Path, out_dir: Path) -> None:
    # An earlier export is moved aside, not deleted first: a failed rename leaves the old series where it was.
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f"{out_dir.name}.old-{secrets.token_hex(4)}")
        out_dir.rename(old)
    try:
        partial.rename(out_dir)
    except OSError:
        if old is not None:
            with contextlib.suppress(OSError):
                old.rename(out_dir)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _sc_image(source, ref, rgb: np.ndarray, *, series_uid: str, series_number: int, instance_number: int,
              algorithm: Algorithm):
    import highdicom as hd
    from pydicom.dataset import Dataset

    spacing = source.get("PixelSpacing")
    image = hd.sc.SCImage.from_ref_dataset(
        ref_dataset=source, pixel_array=rgb, photometric_interpretation=hd.PhotometricInterpretationValues.RGB,
        bits_allocated=8, coordinate_system=hd.CoordinateSystemNames.PATIENT, series_instance_uid=series_uid,
        series_number=series_number, sop_instance_uid=hd.UID(), instance_number=instance_number,
        manufacturer="SegLens", pixel_spacing=tuple(float(v) for v in spacing) if spacing else None,
        patient_orientation=patient_orientation(source.get("ImageOrientationPatient")),
        series_description=f"SegLens {algorithm.name} (NOT FOR DIAGNOSIS)"[:64],
    )
    # from_ref_dataset copies patient and study but references nothing: name the source instance (and frame).
    item = Dataset()
    item.ReferencedSOPClassUID, item.ReferencedSOPInstanceUID = source.SOPClassUID, source.SOPInstanceUID
    if "NumberOfFrames" in source:
        item.ReferencedFrameNumber = ref.frame + 1
    image.SourceImageSequence = [item]
    image.BurnedInAnnotation = "YES"
    image.ImageComments = f"{banner_text(algorithm)}; model sha256 {algorithm.sha256}"
    image.DerivationDescription = "Segmentation overlay burned in"
    image.SoftwareVersions = algorithm.software_version
    return image


_LETTERS = (("L", "R"), ("P", "A"), ("H", "F"))  # DICOM LPS: the letter of each axis' + and - direction


def patient_orientation(orientation) -> tuple[str, str]:
    """PatientOrientation (row direction, column direction) from ImageOrientationPatient: each direction's
    strongest axis. One letter each: highdicom accepts no combined letters ("LP") for an oblique slice."""
    if orientation is None or len(orientation) != 6:
        return ("L", "P")  # SC in the PATIENT coordinate system needs one; an axial slice's is the likeliest
    return tuple(_direction(np.asarray(orientation[i:i + 3], float)) for i in (0, 3))


def _direction(vector: np.ndarray) -> str:
    axis = int(np.argmax(np.abs(vector)))
    return _LETTERS[axis][0 if vector[axis] > 0 else 1]
