"""Write the bundled 3D CT samples: one synthetic chest phantom as a NIfTI file and as a DICOM series.

    .venv/bin/python -m models.training.sample3d     # -> resources/samples/ct3d/ct3d_sample.nii.gz, series/IM0001..

Phantom ``SAMPLE_INDEX`` of ``common.SAMPLE_SEED`` (never trained on), 60 axial slices of 172 x 172 pixels at
2.75 mm x 0.875 mm (anisotropic: the 3D model runs at 1.5 mm, so SegLens must resample), in HU. The NIfTI file
stores the same voxels as the series (int16, its affine the series' geometry in RAS+: voxel (i, j, k) =
(column, row, slice) as SegLens reads both); the series is RLE Lossless, unsigned 16-bit with RescaleIntercept
-1024, files IM0001.. with no extension. Deterministic: pixels and UIDs derive from the seed. The patient is fake
("Quenby^Thaddeus", QT-58213: no word of it in the model's name or the tags, where --anonymize's check would find
it). ``lesions.json`` next to them: the lesions' centres (voxel k, row, column) and radii, for checking a result by
eye or in a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from . import common, phantom3d

OUT = common.SAMPLES_DIR / "ct3d"
SAMPLE_INDEX = 2  # four lesions, 7.2-11.2 mm
SHAPE = (60, 172, 172)
SPACING = (2.75, 0.875, 0.875)  # mm: slice step, rows, columns
UID_ROOT = "1.2.826.0.1.3680043.8.498."  # pydicom's root for generated UIDs
INTERCEPT = -1024


def sample_phantom() -> phantom3d.Phantom:
    return phantom3d.phantom(common.SAMPLE_SEED, SAMPLE_INDEX, shape=SHAPE, spacing=SPACING)


def affine_ras(ph: phantom3d.Phantom) -> np.ndarray:
    """(column i, row j, slice k) -> RAS+ mm: columns to the patient's left, rows posterior, slices superior."""
    sz, sy, sx = ph.spacing
    ox, oy, oz = ph.origin  # LPS
    return np.array([[-sx, 0, 0, -ox], [0, -sy, 0, -oy], [0, 0, sz, oz], [0, 0, 0, 1]], np.float64)


def write_nifti(ph: phantom3d.Phantom, path: Path) -> Path:
    import nibabel as nib

    img = nib.Nifti1Image(np.ascontiguousarray(ph.hu.transpose(2, 1, 0)), affine_ras(ph))
    img.header.set_xyzt_units("mm", "sec")
    img.header.set_qform(affine_ras(ph), code=1)
    img.header.set_sform(affine_ras(ph), code=1)
    img.header["descrip"] = b"SegLens synthetic chest phantom (CT, HU)"
    path.parent.mkdir(parents=True, exist_ok=True)
    # gzip without a file name or time stamp in its header: a rerun writes the same bytes
    import gzip

    raw = img.to_bytes()
    with open(path, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz:
        gz.write(raw)
    return path


def _uid(*parts) -> str:
    from pydicom.uid import generate_uid

    return generate_uid(prefix=UID_ROOT, entropy_srcs=["seglens-ct3d-sample", str(common.SAMPLE_SEED),
                                                       *map(str, parts)])


def _slice_dataset(ph: phantom3d.Phantom, k: int, uids: dict):
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, RLELossless

    sz, sy, sx = ph.spacing
    ox, oy, oz = ph.origin
    _, rows, cols = ph.hu.shape
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = _uid("instance", k)
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SpecificCharacterSet = "ISO_IR 100"
    ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
    ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
    ds.StudyDate = ds.SeriesDate = ds.ContentDate = "20260101"
    ds.StudyTime = ds.SeriesTime = ds.ContentTime = "120000"
    ds.AccessionNumber, ds.ReferringPhysicianName = "", ""
    ds.Modality, ds.Manufacturer = "CT", "SegLens (synthetic phantom)"
    ds.StudyDescription, ds.SeriesDescription = "SegLens demo 3D", f"Synthetic chest phantom {sz:g} mm"
    ds.PatientName, ds.PatientID = "Quenby^Thaddeus", "QT-58213"
    ds.PatientBirthDate, ds.PatientSex = "", "O"
    ds.BodyPartExamined = "CHEST"
    ds.SliceThickness = sz
    ds.PatientPosition = "HFS"
    ds.StudyInstanceUID, ds.SeriesInstanceUID = uids["study"], uids["series"]
    ds.StudyID, ds.SeriesNumber, ds.InstanceNumber, ds.AcquisitionNumber = "1", 1, k + 1, 1
    z = round(oz + k * sz, 4)
    ds.ImagePositionPatient = [round(ox, 4), round(oy, 4), z]
    ds.ImageOrientationPatient = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    ds.FrameOfReferenceUID, ds.PositionReferenceIndicator = uids["frame"], ""
    ds.SliceLocation = z
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.Rows, ds.Columns = rows, cols
    ds.PixelSpacing = [sy, sx]
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
    ds.WindowCenter, ds.WindowWidth = [-300, 40], [1800, 400]
    ds.WindowCenterWidthExplanation = ["LUNG WIDE", "SOFT TISSUE"]
    ds.RescaleIntercept, ds.RescaleSlope, ds.RescaleType = INTERCEPT, 1, "HU"
    ds.compress(RLELossless, (ph.hu[k].astype(np.int32) - INTERCEPT).clip(0, 65535).astype(np.uint16),
                generate_instance_uid=False)
    return ds


def write_series(ph: phantom3d.Phantom, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("IM[0-9][0-9][0-9][0-9]"):
        old.unlink()
    uids = {"study": _uid("study"), "series": _uid("series"), "frame": _uid("frame")}
    paths = []
    for k in range(ph.hu.shape[0]):
        path = out / f"IM{k + 1:04d}"
        _slice_dataset(ph, k, uids).save_as(path, enforce_file_format=True)
        paths.append(path)
    return paths


def lesion_table(ph: phantom3d.Phantom) -> list[dict]:
    """Each lesion's centre in voxels (k, row, column), radius (mm) and analytic volume (mL)."""
    rows = []
    for les in ph.lesions:
        x, y, z = les.center
        at = [(z - ph.origin[2]) / ph.spacing[0], (y - ph.origin[1]) / ph.spacing[1],
              (x - ph.origin[0]) / ph.spacing[2]]
        rows.append({"center_voxel": [round(v, 2) for v in at], "radius_mm": round(les.radius, 3),
                     "volume_ml": round(les.volume_mm3 / 1000, 4)})
    return rows


def write_all(out: Path = OUT) -> list[Path]:
    ph = sample_phantom()
    paths = [write_nifti(ph, out / "ct3d_sample.nii.gz"), *write_series(ph, out / "series")]
    table = out / "lesions.json"
    table.write_text(json.dumps({"spacing_mm": list(ph.spacing), "shape": list(ph.hu.shape),
                                 "lesions": lesion_table(ph)}, indent=1) + "\n")
    return [*paths, table]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    paths = write_all(args.out)
    total = sum(p.stat().st_size for p in paths)
    print(f"{len(paths)} files in {args.out}, {total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
