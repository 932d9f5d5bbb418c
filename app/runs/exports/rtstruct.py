"""DICOM RT Structure Set (RTSTRUCT) for a DICOM volume: one ROI per class, the label volume's outlines on every
slice as CLOSED_PLANAR contours in patient coordinates (LPS mm), each contour referencing the source instance it
lies on, the structure set referencing the source series and frame of reference. Radiotherapy planning systems
read RT Structure Sets, not SEG. Built with pydicom and OpenCV's contours (no further dependency).

Outlines: each slice's mask is traced by cv2.findContours (RETR_CCOMP: outer boundaries and the holes inside
them) on the mask upsampled by UPSAMPLE, so every vertex lies a fraction of a pixel inside the voxels' edge,
never on a pixel centre: a reader testing pixel centres against the polygons (matplotlib's contains_points,
dicompyler, most planning systems) gets back exactly the voxels, with no boundary pixel left to chance. A hole is
its own contour on the same slice (the convention most planning systems read: the contours of a slice are
combined by parity, "even-odd", so a contour inside another cuts it out), not a keyhole cut into the outer one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from app.errors import OutputError
from app.io.volumes import Volume, source_datasets
from app.runs.exports.sources import require_dicom, save_dataset, source_series_number

if TYPE_CHECKING:
    from pydicom import Dataset

    from app.runs.outputs.segments import Algorithm, Segment
    from app.runs.privacy.deidentify import VolumePrivacy

RTSTRUCT_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.481.3"
STUDY_COMPONENT_CLASS = "1.2.840.10008.3.1.2.3.1"  # what RTReferencedStudySequence names its study by (PS3.3)
RTSTRUCT_SERIES_OFFSET = 3000  # the source's SeriesNumber + 3000 (SEG + 1000, Secondary Capture + 2000)
UPSAMPLE = 4  # vertices 1/8 pixel inside the voxels' edge (see the module docstring)
# Patient and study attributes carried from the source (the Patient and General Study modules)
CARRIED = ("PatientName", "PatientID", "PatientBirthDate", "PatientSex", "PatientAge", "PatientSize",
           "PatientWeight", "PatientIdentityRemoved", "StudyInstanceUID", "StudyDate", "StudyTime",
           "ReferringPhysicianName", "StudyID", "AccessionNumber", "StudyDescription")
TYPE_2 = ("PatientName", "PatientID", "PatientBirthDate", "PatientSex", "StudyDate", "StudyTime",
          "ReferringPhysicianName", "StudyID", "AccessionNumber")


@dataclass(frozen=True)
class Contour:
    """One closed outline on slice `k`: its vertices as (column, row) pixel coordinates, float."""

    k: int
    points: np.ndarray  # (n, 2) float64, n >= 3


def slice_outlines(mask: np.ndarray) -> list[np.ndarray]:
    """The outer boundaries and holes of a 2D boolean mask as (column, row) vertex arrays, in pixel coordinates
    (pixel centres at integers), each vertex 3/8 of a pixel from its voxel's centre towards the edge."""
    rows, columns = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if not rows.size:
        return []
    # only the class's bounding box is upsampled (UPSAMPLE² bytes per pixel of it, not of the whole slice)
    box = mask[rows[0]:rows[-1] + 1, columns[0]:columns[-1] + 1].astype(np.uint8)
    up = cv2.resize(box, None, fx=UPSAMPLE, fy=UPSAMPLE, interpolation=cv2.INTER_NEAREST)
    found, _hierarchy = cv2.findContours(up, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    # upsampled pixel u lies at original coordinate (u - (UPSAMPLE - 1) / 2) / UPSAMPLE, then the box's offset
    offset = np.array([columns[0], rows[0]], np.float64)
    return [(c.reshape(-1, 2).astype(np.float64) - (UPSAMPLE - 1) / 2) / UPSAMPLE + offset
            for c in found if len(c) >= 3]


def class_contours(labels: np.ndarray, value: int) -> Iterator[Contour]:
    """Every outline of label `value` in `labels` (depth, rows, columns), slice by slice."""
    for k in range(labels.shape[0]):
        plane = labels[k] == value
        for points in slice_outlines(plane):
            yield Contour(k, points)


def build_rtstruct(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], *, algorithm: Algorithm,
                   privacy: VolumePrivacy | None = None) -> Dataset:
    """The RT Structure Set of `labels` (uint8, the volume's slice order) for `segments` (value >= 1), every one
    listed as an ROI (an empty class too, with no contours); under --anonymize (`privacy`) made from source
    headers with no identifying value (writer_sources). Raises OutputError without geometry or classes."""
    require_dicom(volume, "An RTSTRUCT")
    kept = [segment for segment in segments if segment.value >= 1]
    if not kept:
        raise OutputError(f"{volume.source}: no class to write as an RTSTRUCT ROI")
    if volume.affine is None or any(ref.position is None for ref in volume.slices):
        raise OutputError(f"{volume.source}: no geometry in the source, so no RTSTRUCT can be written")
    datasets = source_datasets(volume)
    datasets = privacy.writer_sources(datasets) if privacy is not None else datasets
    frame_of_reference = str(datasets[0].get("FrameOfReferenceUID") or "")
    if not frame_of_reference:
        raise OutputError(f"{volume.source}: the source has no FrameOfReferenceUID, so no RTSTRUCT can be written")
    ds = _header(datasets, algorithm)
    # the Frame of Reference module (dciodvfy requires it of an RT Structure Set): the source's
    ds.FrameOfReferenceUID = frame_of_reference
    ds.PositionReferenceIndicator = str(datasets[0].get("PositionReferenceIndicator") or "")
    ds.ReferencedFrameOfReferenceSequence = [_frame_of_reference(volume, datasets, frame_of_reference)]
    ds.StructureSetROISequence = [_roi(number, s, frame_of_reference, algorithm) for number, s in _numbered(kept)]
    ds.ROIContourSequence = [_roi_contours(volume, datasets, labels, number, s) for number, s in _numbered(kept)]
    ds.RTROIObservationsSequence = [_observation(number) for number, _s in _numbered(kept)]
    return ds


def write_rtstruct(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_path: Path, *,
                   algorithm: Algorithm, privacy: VolumePrivacy | None = None) -> Path:
    """`build_rtstruct`, de-identified or given the source's status (VolumePrivacy.finish_derived), written
    atomically to `out_path`."""
    ds = build_rtstruct(volume, labels, segments, algorithm=algorithm, privacy=privacy)
    if privacy is not None:  # --anonymize: de-identified right before it is saved (app.runs.privacy.deidentify)
        privacy.finish_derived(ds)
    # The profile removes OperatorsName (ps315.REMOVE: a source's names a person); the RT Series module needs it
    # present (Type 2), and SegLens's is empty, so it is put back empty.
    ds.OperatorsName = ""
    return save_dataset(ds, out_path)


def _numbered(kept: Sequence[Segment]) -> list[tuple[int, Segment]]:
    return list(enumerate(kept, start=1))


def _header(datasets: list[Dataset], algorithm: Algorithm) -> Dataset:
    """SOP Common, Patient, General Study, RT Series, General Equipment and the Structure Set's own attributes."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ImplicitVRLittleEndian, generate_uid

    source = datasets[0]
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    # Implicit VR: its 32-bit lengths hold a long contour's ContourData (explicit VR's DS length is 16-bit: 64 KB)
    ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian
    ds.SpecificCharacterSet = source.get("SpecificCharacterSet") or "ISO_IR 192"
    ds.SOPClassUID, ds.SOPInstanceUID = RTSTRUCT_SOP_CLASS, generate_uid()
    ds.file_meta.MediaStorageSOPClassUID, ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPClassUID, ds.SOPInstanceUID
    now = dt.datetime.now()
    date, time = now.strftime("%Y%m%d"), now.strftime("%H%M%S")
    ds.InstanceCreationDate, ds.InstanceCreationTime = date, time
    for keyword in CARRIED:
        if keyword in source:
            setattr(ds, keyword, source.data_element(keyword).value)  # type: ignore[union-attr]  # tested above
        elif keyword in TYPE_2:
            setattr(ds, keyword, "")
    ds.Modality, ds.SeriesInstanceUID = "RTSTRUCT", generate_uid()
    ds.SeriesNumber, ds.InstanceNumber = source_series_number(datasets) + RTSTRUCT_SERIES_OFFSET, 1
    ds.SeriesDescription = f"SegLens {algorithm.name}"[:64]
    ds.OperatorsName = ""
    ds.Manufacturer, ds.ManufacturerModelName = "SegLens", "SegLens"
    ds.SoftwareVersions, ds.DeviceSerialNumber = algorithm.software_version, algorithm.version
    ds.StructureSetLabel = "SEGLENS"
    ds.StructureSetName = f"SegLens {algorithm.name}"[:64]
    ds.StructureSetDescription = f"Contours by {algorithm.name}, model sha256 {algorithm.sha256}"[:1024]
    ds.StructureSetDate, ds.StructureSetTime = date, time
    return ds


def _frame_of_reference(volume: Volume, datasets: list[Dataset], uid: str) -> Dataset:
    """The source's frame of reference, study and series, with every source instance (ContourImageSequence)."""
    from pydicom.dataset import Dataset

    series = Dataset()
    series.SeriesInstanceUID = str(datasets[0].SeriesInstanceUID)
    series.ContourImageSequence = [_image_reference(volume, datasets, k) for k in range(volume.depth)]
    study = Dataset()
    study.ReferencedSOPClassUID, study.ReferencedSOPInstanceUID = STUDY_COMPONENT_CLASS, datasets[0].StudyInstanceUID
    study.RTReferencedSeriesSequence = [series]
    item = Dataset()
    item.FrameOfReferenceUID = uid
    item.RTReferencedStudySequence = [study]
    return item


def _image_reference(volume: Volume, datasets: list[Dataset], k: int) -> Dataset:
    from pydicom.dataset import Dataset

    item = Dataset()
    item.ReferencedSOPClassUID = datasets[k].SOPClassUID
    item.ReferencedSOPInstanceUID = datasets[k].SOPInstanceUID
    if volume.kind == "dicom-multiframe":
        item.ReferencedFrameNumber = volume.slices[k].frame + 1
    return item


def _roi(number: int, segment: Segment, frame_of_reference: str, algorithm: Algorithm) -> Dataset:
    import highdicom as hd
    from pydicom.dataset import Dataset
    from pydicom.sr.codedict import codes

    item = Dataset()
    item.ROINumber, item.ReferencedFrameOfReferenceUID = number, frame_of_reference
    item.ROIName = segment.name[:64] or f"class {segment.value}"
    item.ROIGenerationAlgorithm = "AUTOMATIC"
    item.ROIGenerationDescription = f"SegLens {algorithm.name}"[:64]
    # the algorithm as the SEG names it (name, version, family, the model's SHA-256)
    item.ROIDerivationAlgorithmIdentificationSequence = hd.AlgorithmIdentificationSequence(
        name=algorithm.name, version=algorithm.version, family=codes.cid7162.ArtificialIntelligence,
        parameters={"model_sha256": algorithm.sha256})
    return item


def _roi_contours(volume: Volume, datasets: list[Dataset], labels: np.ndarray, number: int,
                  segment: Segment) -> Dataset:
    """The ROI's colour and its contours; an empty class has no ContourSequence (Type 3)."""
    from pydicom.dataset import Dataset

    item = Dataset()
    item.ReferencedROINumber = number
    item.ROIDisplayColor = list(segment.color)
    contours = []
    for index, contour in enumerate(class_contours(labels, segment.value), start=1):
        entry = Dataset()
        entry.ContourImageSequence = [_image_reference(volume, datasets, contour.k)]
        entry.ContourGeometricType = "CLOSED_PLANAR"
        entry.NumberOfContourPoints = len(contour.points)
        entry.ContourNumber = index
        entry.ContourData = _patient_points(volume, datasets[contour.k], contour)
        contours.append(entry)
    if contours:
        item.ContourSequence = contours
    return item


def _observation(number: int) -> Dataset:
    """What the ROI is: SegLens cannot tell an organ from a target, so RTROIInterpretedType is empty (Type 2:
    unknown) and the planner says; no interpreter (Type 2, empty: no person drew it)."""
    from pydicom.dataset import Dataset

    item = Dataset()
    item.ObservationNumber, item.ReferencedROINumber = number, number
    item.RTROIInterpretedType, item.ROIInterpreter = "", ""
    return item


def _patient_points(volume: Volume, source: Dataset, contour: Contour) -> list[str]:
    """(column, row) pixel coordinates → x\\y\\z LPS mm on slice k: its ImagePositionPatient plus the column and
    row steps (ImageOrientationPatient × PixelSpacing), as DS text of at most 16 characters."""
    origin = np.asarray(volume.slices[contour.k].position, np.float64)
    orientation = source.get("ImageOrientationPatient")
    spacing = source.get("PixelSpacing")
    if orientation is not None and spacing is not None and len(orientation) == 6 and len(spacing) == 2:
        along_row = np.asarray(orientation[:3], np.float64) * float(spacing[1])  # one column to the right
        along_column = np.asarray(orientation[3:], np.float64) * float(spacing[0])  # one row down
    else:  # a multi-frame file keeps them in its functional groups: the volume's affine has them (RAS → LPS)
        lps = np.diag([-1.0, -1.0, 1.0]) @ np.asarray(volume.affine)[:3, :3]
        along_row, along_column = lps[:, 0], lps[:, 1]
    xyz = origin + contour.points[:, :1] * along_row + contour.points[:, 1:2] * along_column
    return [f"{v:.4f}" for v in xyz.ravel()]
