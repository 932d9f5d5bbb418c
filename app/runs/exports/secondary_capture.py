"""Secondary Capture: the overlay burned into each slice's picture, with a "NOT FOR DIAGNOSIS" banner in a margin
added above it, as a new series in the source's study (for a PACS that cannot show DICOM SEG). The source's patient
and study modules and its laterality are carried over. The folder appears whole or not at all."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import cv2
import numpy as np

from app.errors import OutputError
from app.io.files import whole_folder
from app.io.render import blend_overlay
from app.io.volumes import Volume, source_datasets
from app.runs.exports.sources import save_dataset, source_series_number

if TYPE_CHECKING:
    import highdicom as hd
    from pydicom import DataElement, Dataset

    from app.io.volumes import SliceRef
    from app.runs.outputs.segments import Algorithm, Segment

SC_SERIES_OFFSET = 2000  # the SC series' SeriesNumber: the source's + 2000 (the SEG takes + 1000)
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_MIN_SCALE = 0.35  # Hershey simplex at 0.35: capitals ~8 px high, about the smallest that stays legible


@dataclass(frozen=True)
class _Paint:
    color: tuple[int, int, int] | None


def banner_text(algorithm: Algorithm) -> str:
    """The burned-in warning. ASCII only: OpenCV's Hershey fonts have no em dash or accents."""
    name = algorithm.name.encode("ascii", "replace").decode("ascii")
    return f"NOT FOR DIAGNOSIS - SegLens {name}"


@dataclass(frozen=True)
class _Banner:
    scale: float  # Hershey font scale
    lines: tuple[str, ...]
    line_rows: int  # rows per line of text


def banner_height(columns: int, text: str) -> int:
    """The rows of the banner margin above an image `columns` wide."""
    banner = _layout(columns, text)
    return banner.line_rows * len(banner.lines)


def burn_banner(rgb: np.ndarray, text: str) -> np.ndarray:
    """`rgb` below a dark margin holding `text` in white: the picture grows by the margin's rows, so every row of
    the image stays visible (the banner used to be painted over the top rows: a quarter of a small image)."""
    rows, columns = rgb.shape[:2]
    banner = _layout(columns, text)
    strip = banner.line_rows * len(banner.lines)
    out = np.empty((strip + rows, columns, 3), np.uint8)
    out[:strip] = 24  # near black: the white text stands out, and the margin is plainly not part of the image
    out[strip:] = rgb
    margin = out[:strip]  # drawn in a view of the margin alone: no glyph can reach the image rows
    (_, height), _ = cv2.getTextSize(text, _FONT, banner.scale, 1)
    for index, line in enumerate(banner.lines):
        baseline = int(banner.line_rows * (index + 0.5) + height / 2)
        cv2.putText(margin, line, (max(1, int(columns * 0.025)), baseline), _FONT, banner.scale, (255, 255, 255),
                    1, cv2.LINE_AA)
    return out


def _layout(columns: int, text: str) -> _Banner:
    """One line fitting 95 % of the width (at most twice the font's normal size); on a narrow image, where that
    line would be too small to read, the smallest legible size over as many lines as it takes."""
    room = 0.95 * columns
    (width, height), _ = cv2.getTextSize(text, _FONT, 1.0, 1)
    scale = min(room / width, 2.0)
    lines: tuple[str, ...] = (text,)
    if scale < _MIN_SCALE:
        scale, lines = _MIN_SCALE, _wrapped(text, room / _MIN_SCALE)
    return _Banner(scale=scale, lines=lines, line_rows=max(6, int(height * scale * 1.8)))


def _wrapped(text: str, room: float) -> tuple[str, ...]:
    """`text` in lines at most `room` wide at font scale 1, by words; a word wider than that by characters."""
    def fits(candidate: str) -> bool:
        return cv2.getTextSize(candidate, _FONT, 1.0, 1)[0][0] <= room

    lines: list[str] = []
    for word in text.split():
        if lines and fits(f"{lines[-1]} {word}"):
            lines[-1] = f"{lines[-1]} {word}"
            continue
        while len(word) > 1 and not fits(word):
            cut = next((n for n in range(len(word) - 1, 1, -1) if fits(word[:n])), 1)
            lines.append(word[:cut])
            word = word[cut:]
        lines.append(word)
    return tuple(lines) or ("",)


def burned_slice(display: np.ndarray, mask: np.ndarray, segments: Sequence[Segment], *, opacity: float,
                 text: str) -> np.ndarray:
    """One slice's RGB picture: the class colours blended at `opacity` (app.io.render), then the banner."""
    paints = [_Paint(None)] * 256
    for segment in segments:
        if segment.value >= 1:
            paints[segment.value] = _Paint(segment.color)
    rgb = blend_overlay(np.ascontiguousarray(display, np.uint8), np.ascontiguousarray(mask, np.uint8), paints,
                        alpha=opacity)
    return burn_banner(rgb, text)


def write_series(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_dir: Path, *,
                 display: Callable[[int], np.ndarray], opacity: float, algorithm: Algorithm,
                 prepare: Callable[[Dataset], None] | None = None,
                 sources: Callable[[list[Dataset]], list[Dataset]] | None = None) -> list[Path]:
    """Write `<out_dir>/sc_<k+1:04d>.dcm` for every slice k into a partial folder, then swap it into place.
    `prepare(image)` right before each is saved (app.runs.privacy.deidentify.VolumePrivacy.finish_derived);
    `sources(headers)`: the source headers highdicom is given (VolumePrivacy.writer_sources)."""
    import highdicom as hd

    datasets = source_datasets(volume) if sources is None else sources(source_datasets(volume))
    series_uid, number = hd.UID(), source_series_number(datasets) + SC_SERIES_OFFSET
    names = []
    try:
        with whole_folder(out_dir) as partial:
            for k, source in enumerate(datasets):
                rgb = burned_slice(display(k), labels[k], segments, opacity=opacity, text=banner_text(algorithm))
                image = _sc_image(source, volume.slices[k], rgb, series_uid=series_uid, series_number=number,
                                  instance_number=k + 1, algorithm=algorithm)
                if prepare is not None:
                    prepare(image)
                names.append(save_dataset(image, partial / f"sc_{k + 1:04d}.dcm").name)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write the Secondary Capture series ({exc.strerror or exc})") from exc
    return [out_dir / name for name in names]


def _sc_image(source: Dataset, ref: SliceRef, rgb: np.ndarray, *, series_uid: str, series_number: int,
              instance_number: int, algorithm: Algorithm) -> hd.sc.SCImage:
    import highdicom as hd
    from pydicom.dataset import Dataset

    spacing = source.get("PixelSpacing")
    image = hd.sc.SCImage.from_ref_dataset(
        ref_dataset=source, pixel_array=rgb, photometric_interpretation=hd.PhotometricInterpretationValues.RGB,
        bits_allocated=8, coordinate_system=hd.CoordinateSystemNames.PATIENT, series_instance_uid=series_uid,
        series_number=series_number, sop_instance_uid=hd.UID(), instance_number=instance_number,
        manufacturer="SegLens",
        pixel_spacing=tuple(float(v) for v in spacing) if spacing else None,  # type: ignore[arg-type]  # mm, not int
        patient_orientation=patient_orientation(source.get("ImageOrientationPatient")),
        series_description=f"SegLens {algorithm.name} (NOT FOR DIAGNOSIS)"[:64],
    )
    # from_ref_dataset copies only the attributes the SC constructor asks for (name, ID, birth date, sex, study
    # UID, date, time, accession, ID, referring physician): the rest of the source's Patient and Study modules
    # (StudyDescription, PatientAge, PatientWeight, PatientIdentityRemoved …) as highdicom's SEG copies them.
    with contextlib.suppress(KeyError):  # a SOP class highdicom's tables lack: what the constructor copied stays
        image.copy_patient_and_study_information(source)
    _carry_laterality(source, image)
    # It references nothing either: name the source instance (and frame). The banner margin moves every pixel down,
    # so the spatial locations are not preserved.
    item = Dataset()
    item.ReferencedSOPClassUID, item.ReferencedSOPInstanceUID = source.SOPClassUID, source.SOPInstanceUID
    if "NumberOfFrames" in source:
        item.ReferencedFrameNumber = ref.frame + 1
    item.SpatialLocationsPreserved = "NO"
    image.SourceImageSequence = [item]
    image.BurnedInAnnotation = "YES"
    image.ImageComments = f"{banner_text(algorithm)}; model sha256 {algorithm.sha256}"
    image.DerivationDescription = "Segmentation overlay burned in"
    image.SoftwareVersions = algorithm.software_version
    return image


# Body Part Examined defined terms of unpaired structures (PS3.16 Annex L; the terms dciodvfy also treats as
# unpaired): for these no laterality is needed. Any other term, or none, may be a paired structure.
UNPAIRED_BODY_PARTS = frozenset((
    "ABDOMEN", "ABDOMENPELVIS", "BACK", "BLADDER", "BRAIN", "CERVIX", "CHEST", "CHESTABDOMEN", "CHESTABDPELVIS",
    "COCCYX", "COLON", "CSPINE", "ESOPHAGUS", "FACE", "GALLBLADDER", "HEAD", "HEADNECK", "HEART", "JAW", "LARYNX",
    "LIVER", "LSPINE", "MAXILLA", "MEDIASTINUM", "MOUTH", "NECK", "NOSE", "PANCREAS", "PELVIS", "PENIS", "PHARYNX",
    "PROSTATE", "RECTUM", "SKULL", "SPINE", "SPLEEN", "SSPINE", "STERNUM", "STOMACH", "THYROID", "TSPINE", "URETER",
    "URETHRA", "UTERUS", "WHOLEBODY",
))


def _carry_laterality(source: Dataset, image: Dataset) -> None:
    """The General Series' Laterality (Type 2C: required for a paired body part unless Image Laterality is sent),
    and the source's Image Laterality and Body Part Examined, which say whether it is needed.

    The source's values when it has them; else, for a body part that may be paired, Laterality empty, which is
    the standard's "unknown" (dciodvfy: missing it is an error, an empty one a warning that it is unknown)."""
    for keyword in ("BodyPartExamined", "Laterality", "ImageLaterality"):
        if str(source.get(keyword) or "").strip():  # an empty one is the source's "unknown": decided below
            setattr(image, keyword, cast("DataElement", source.data_element(keyword)).value)  # there: tested above
    if "Laterality" in image or "ImageLaterality" in image:
        return
    if str(image.get("BodyPartExamined") or "").strip().upper() not in UNPAIRED_BODY_PARTS:
        image.Laterality = ""


_LETTERS = (("L", "R"), ("P", "A"), ("H", "F"))  # DICOM LPS: the letter of each axis' + and - direction


def patient_orientation(orientation: Any) -> tuple[str, str]:  # ImageOrientationPatient's six values, or None
    """PatientOrientation (row direction, column direction) from ImageOrientationPatient: each direction's
    strongest axis. One letter each: highdicom accepts no combined letters ("LP") for an oblique slice."""
    if orientation is None or len(orientation) != 6:
        return ("L", "P")  # SC in the PATIENT coordinate system needs one; an axial slice's is the likeliest
    return _direction(np.asarray(orientation[0:3], float)), _direction(np.asarray(orientation[3:6], float))


def _direction(vector: np.ndarray) -> str:
    axis = int(np.argmax(np.abs(vector)))
    return _LETTERS[axis][0 if vector[axis] > 0 else 1]
