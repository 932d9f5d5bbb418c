"""A volume's result in the formats clinical and research systems read: DICOM SEG (the standard, via highdicom),
a NIfTI label volume (research pipelines), a Secondary Capture series with the overlay burned in (for a PACS that
cannot show SEG) and an RT Structure Set (radiotherapy planning systems). Each file is written whole or not at
all (a temporary name, then renamed).

`labels` is always uint8 (depth, rows, columns) in the volume's slice order (app.io.volumes conventions).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.errors import OutputError
from app.io.files import atomic_write
from app.io.volumes import Volume
from app.runs.exports import secondary_capture
from app.runs.exports import seg as dicom_seg
from app.runs.exports.sources import require_dicom, save_dataset
from app.runs.outputs.segments import Algorithm as Algorithm  # re-exported: what the exports take
from app.runs.outputs.segments import Segment as Segment
from app.runs.outputs.segments import segments_of as segments_of
from app.runs.privacy.deidentify import VolumePrivacy, scrub_nifti_header

# source: the de-identified source series (--anonymize only); rtstruct: app.runs.exports.rtstruct
EXPORTS = ("dicom-seg", "nifti", "sc", "source", "rtstruct")


def write_dicom_seg(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_path: Path, *,
                    algorithm: Algorithm, privacy: VolumePrivacy | None = None) -> Path:
    """One binary DICOM SEG for a DICOM volume, referencing its source instances per frame.

    Every segment (value >= 1) is described, an empty one too, so a reader sees every class; frames empty in
    every segment are omitted (highdicom's default). Raises OutputError for a NIfTI volume.
    """
    require_dicom(volume, "DICOM SEG")
    _check_labels(volume, labels)
    seg = dicom_seg.build_segmentation(volume, labels, segments, algorithm=algorithm, privacy=privacy)
    if privacy is not None:  # --anonymize: de-identified right before it is saved (app.runs.privacy.deidentify)
        privacy.finish_derived(seg)
    return save_dataset(seg, out_path)


def write_rtstruct(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_path: Path, *,
                   algorithm: Algorithm, privacy: VolumePrivacy | None = None) -> Path:
    """One RT Structure Set for a DICOM volume (app.runs.exports.rtstruct): an ROI per class, outer contours and holes
    per slice in patient coordinates, each referencing its source instance. Raises OutputError for a NIfTI volume."""
    from app.runs.exports import rtstruct

    _check_labels(volume, labels)
    return rtstruct.write_rtstruct(volume, labels, segments, out_path, algorithm=algorithm, privacy=privacy)


def write_nifti_labels(volume: Volume, labels: np.ndarray, out_path: Path, *, scrub: bool = False) -> Path:
    """A uint8 label volume with exactly the source's affine and shape (NIfTI input) or the DICOM geometry.

    `.nii.gz` is compressed, anything else is written as plain `.nii`. Raises OutputError without geometry.
    """
    if volume.affine is None:
        raise OutputError(f"{volume.source}: no geometry in the source, so no NIfTI label volume can be written")
    _check_labels(volume, labels)
    data = nifti_data(labels, time_points=volume.time_points)
    image = _like_source(volume, data) if volume.kind == "nifti" else _scanner_image(volume, data)
    image.set_data_dtype(np.uint8)
    image.header.set_slope_inter(1.0, 0.0)  # labels are stored as they are, never scaled
    image.header["cal_min"], image.header["cal_max"] = 0, 0
    if scrub:  # --anonymize: no free text or extension of a source NIfTI's header
        scrub_nifti_header(image.header)
    payload = image.to_bytes()
    if out_path.name.lower().endswith(".gz"):
        # level 1: a label volume compresses ~50:1 even so, three times faster than 6 (200×512²: 0.11 s, 1 MB)
        payload = gzip.compress(payload, compresslevel=1, mtime=0)
    atomic_write(out_path, payload)
    return out_path


def nifti_data(labels: np.ndarray, *, time_points: int = 1) -> np.ndarray:
    """`labels[k, row, col]` (k t-major for 4D) as NIfTI data `[col, row, k(, t)]` (app.io.volumes conventions).

    A view, not a copy: NIfTI stores column index fastest, which is the C order of `labels` itself, so the
    transposed view is Fortran-contiguous and nibabel writes it straight out (a contiguous copy here, which nibabel
    then transposed back, took ~1 s of the 1.1 s export of 200 × 512²)."""
    labels = np.asarray(labels, np.uint8)
    if time_points <= 1:
        return np.asarray(labels.transpose(2, 1, 0))
    depth, rows, columns = labels.shape
    return np.asarray(labels.reshape(time_points, depth // time_points, rows, columns).transpose(3, 2, 1, 0))


def _like_source(volume: Volume, data: np.ndarray) -> Any:  # a nibabel Nifti1Image
    import nibabel as nib

    from app.errors import ImageError
    from app.io.nifti import load_nifti_image

    # read again, from the one handle the untrusted gate opens: a source swapped since for a named pipe, a device
    # or a sparse giant is refused in one line, and nibabel never opens the path itself
    try:
        source: Any = load_nifti_image(Path(volume.source))
    except ImageError as exc:
        reason = str(exc).removeprefix(f"{volume.source}: ")
        raise OutputError(f"{volume.source}: cannot read the source NIfTI header ({reason})") from exc
    shape = tuple(int(n) for n in source.shape)
    if volume.channels and len(shape) == 4:  # a 4D NIfTI whose volumes are a case's channels: one label volume
        shape = shape[:3]
    if data.size != int(np.prod(shape)):
        raise OutputError(f"{volume.source}: the labels ({data.shape}) do not fit the source's shape {source.shape}")
    # No affine given: the header's qform and sform are kept as stored, so the affine is the source's bit for bit.
    header = source.header.copy()
    header.set_data_shape(shape)
    return nib.Nifti1Image(data.reshape(shape), None, header=header)


def _scanner_image(volume: Volume, data: np.ndarray) -> Any:  # a nibabel Nifti1Image
    import nibabel as nib

    image = nib.Nifti1Image(data, volume.affine)
    image.header.set_qform(volume.affine, code=1)  # 1 = scanner coordinates: DICOM's patient space, in RAS
    image.header.set_sform(volume.affine, code=1)
    image.header.set_xyzt_units(xyz="mm")
    return image


def write_secondary_capture(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_dir: Path, *,
                            display: Callable[[int], np.ndarray], opacity: float,
                            algorithm: Algorithm, privacy: VolumePrivacy | None = None) -> list[Path]:
    """One Secondary Capture image per slice, overlay burned in, "NOT FOR DIAGNOSIS" banner, in a new series.

    `display(k)` is slice k as shown (uint8 gray or RGB, windowed). The files are `<out_dir>/sc_0001.dcm` …;
    `out_dir` is replaced as a whole, or left as it was when writing fails.
    """
    require_dicom(volume, "Secondary Capture")
    _check_labels(volume, labels)
    return secondary_capture.write_series(volume, labels, segments, out_dir, display=display, opacity=opacity,
                                          algorithm=algorithm,
                                          prepare=privacy.finish_derived if privacy is not None else None,
                                          sources=privacy.writer_sources if privacy is not None else None)


def write_source_copy(volume: Volume, out_dir: Path, *, privacy: VolumePrivacy | None) -> list[Path]:
    """The source series de-identified (`--export source`, --anonymize only): `<out_dir>/source_0001.dcm` …"""
    from app.runs.exports import source_copy

    require_dicom(volume, "A de-identified copy of the source")
    if privacy is None or privacy.deidentifier is None:
        raise OutputError(f"{volume.source}: the source series is written only de-identified (--anonymize)")
    return source_copy.write_copy(volume, out_dir, privacy=privacy)


def _check_labels(volume: Volume, labels: np.ndarray) -> None:
    expected = (volume.depth, volume.rows, volume.columns)
    if labels.dtype != np.uint8 or labels.shape != expected:
        raise ValueError(f"labels must be uint8 {expected}, got {labels.dtype} {labels.shape}")
