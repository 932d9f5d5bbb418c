"""Factory-built DICOM series and NIfTI volumes with known geometry, for the volume tests.

`write_series` writes one CT-like series (16-bit, HU through RescaleSlope/Intercept) whose slice k holds a bright
disc whose radius grows with k, so a test can tell slices apart by their pixels and check that ordering, masks and
exports land on the right slice.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np

AXIAL = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
CORONAL = (1.0, 0.0, 0.0, 0.0, 0.0, -1.0)
SAGITTAL = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0)


def oblique(degrees: float = 20.0) -> tuple[float, ...]:
    """An axial plane tilted by `degrees` about the patient's left-right axis (gantry tilt)."""
    a = np.radians(degrees)
    return (1.0, 0.0, 0.0, 0.0, float(np.cos(a)), float(np.sin(a)))


def normal_of(orientation: Sequence[float]) -> np.ndarray:
    row, col = np.asarray(orientation[:3], float), np.asarray(orientation[3:], float)
    return np.cross(row, col)


def disc_slice(k: int, rows: int, columns: int) -> np.ndarray:
    """HU values: air (-1000) with a soft-tissue disc (+60 HU) of radius 4 + 2k pixels at the centre."""
    yy, xx = np.mgrid[:rows, :columns]
    inside = (yy - rows / 2) ** 2 + (xx - columns / 2) ** 2 <= (4 + 2 * k) ** 2
    return np.where(inside, 60.0, -1000.0).astype(np.float32)


def write_series(folder: Path, *, slices: int = 6, rows: int = 32, columns: int = 32,
                 orientation: Sequence[float] = AXIAL, spacing: float = 2.5, pixel_spacing=(0.7, 0.8),
                 origin=(-10.0, -20.0, 30.0), series_uid: str | None = None, study_uid: str | None = None,
                 frame_of_reference: str | None = None, suffix: str = ".dcm", shuffle: bool = False,
                 gap_after: int | None = None, name: str = "slice", positions: bool = True,
                 orientations: Sequence[Sequence[float]] | None = None, sizes: Sequence[tuple[int, int]] | None = None,
                 description: str = "Axial 2.5 mm", patient=("Doe^Jane", "PID-0042")) -> list[Path]:
    """Write `slices` single-frame CT files into `folder`; returns the paths in slice order (position along the
    normal). Files are named `<name><n><suffix>` with n in a shuffled order when `shuffle`; `suffix=""` writes files
    with no extension. `gap_after=k`: one missing slice position after slice k. `positions=False`: no
    ImagePositionPatient / ImageOrientationPatient (ordered by InstanceNumber only). `orientations` / `sizes`:
    per-slice values for inconsistent series."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    folder.mkdir(parents=True, exist_ok=True)
    series_uid = series_uid or generate_uid()
    study_uid = study_uid or generate_uid()
    frame_of_reference = frame_of_reference or generate_uid()
    numbers = list(range(1, slices + 1))
    if shuffle:
        random.Random(7).shuffle(numbers)
    paths = []
    for k in range(slices):
        orient = tuple(orientations[k]) if orientations else tuple(orientation)
        r, c = sizes[k] if sizes else (rows, columns)
        step = k + (1 if gap_after is not None and k > gap_after else 0)
        position = np.asarray(origin, float) + step * spacing * normal_of(orient)
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = CTImageStorage
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = Dataset()
        ds.file_meta = meta
        ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
        ds.PatientName, ds.PatientID = patient
        ds.PatientBirthDate, ds.PatientSex = "19700101", "F"
        ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
        ds.FrameOfReferenceUID = frame_of_reference
        ds.StudyID, ds.StudyDate, ds.StudyTime = "1", "20260101", "120000"
        ds.AccessionNumber, ds.ReferringPhysicianName = "A1", ""
        ds.Modality, ds.SeriesNumber, ds.InstanceNumber = "CT", 3, numbers[k]
        ds.StudyDescription, ds.SeriesDescription = "CHEST", description
        ds.Manufacturer = "SegLens tests"
        ds.PositionReferenceIndicator = ""
        if positions:
            ds.ImagePositionPatient = [float(v) for v in position]
            ds.ImageOrientationPatient = [float(v) for v in orient]
            ds.SliceLocation = float(position @ normal_of(orient))
        ds.PixelSpacing = [float(v) for v in pixel_spacing]
        ds.SliceThickness = spacing
        ds.Rows, ds.Columns = r, c
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleSlope, ds.RescaleIntercept, ds.RescaleType = 1, -1024, "HU"
        ds.WindowCenter, ds.WindowWidth = 40, 400
        ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
        ds.PixelData = (disc_slice(k, r, c) + 1024).astype(np.int16).tobytes()
        path = folder / f"{name}{numbers[k]}{suffix}"
        ds.save_as(path, enforce_file_format=True)
        paths.append(path)
    return paths


def write_nifti(path: Path, *, shape=(24, 20, 5), affine: np.ndarray | None = None, dtype=np.int16) -> np.ndarray:
    """A NIfTI volume whose slice k (along the third axis) holds a disc of radius 3 + 2k (value 100, background 0)
    in (i, j) space; returns the data as written."""
    import nibabel as nib

    data = np.zeros(shape, dtype)
    ii, jj = np.mgrid[: shape[0], : shape[1]]
    for k in range(shape[2]):
        inside = (ii - shape[0] / 2) ** 2 + (jj - shape[1] / 2) ** 2 <= (3 + 2 * k) ** 2
        data[..., k][inside] = 100
    if affine is None:
        affine = np.array([[-0.9, 0, 0, 10.0], [0, 1.1, 0, -20.0], [0, 0, 3.0, 5.0], [0, 0, 0, 1]])
    nib.save(nib.Nifti1Image(data, affine), str(path))
    return data
