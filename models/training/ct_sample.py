"""Write the bundled CT sample: one synthetic chest phantom as a DICOM series (resources/samples/ct/).

    .venv/bin/python -m models.training.ct_sample            # -> resources/samples/ct/IM0001 .. IM0032

Phantom ``SAMPLE_INDEX`` of the data set ``common.SAMPLE_SEED`` (never trained on: training uses TRAIN_SEED,
evaluation EVAL_SEED): 32 axial slices of 256x256 pixels, 1.2 x 1.2 mm, 5 mm apart, stored as unsigned 16-bit
with RescaleIntercept -1024 / slope 1 (HU), RLE Lossless, files named IM0001.. with no extension as PACS exports
are. Deterministic: the pixels and all UIDs derive from the seed, so a rerun writes the same series (only the
file meta's implementation version may change with pydicom). The patient is fake ("Ostrander^Wilhelmina",
OW-40712; no part of it may appear in the model's name, the manufacturer or a description, or --anonymize's last
check would rightly find it there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from . import common, phantom

OUT = common.SAMPLES_DIR / "ct"
SAMPLE_INDEX = 0
N_SLICES = 32
SPACING_MM = 5.0
PIXEL_MM = 1.2
UID_ROOT = "1.2.826.0.1.3680043.8.498."  # pydicom's root for generated UIDs
INTERCEPT = -1024


def _uid(*parts) -> str:
    from pydicom.uid import generate_uid

    return generate_uid(prefix=UID_ROOT, entropy_srcs=["seglens-ct-sample", str(common.SAMPLE_SEED),
                                                       *map(str, parts)])


def sample_volume() -> tuple[np.ndarray, np.ndarray]:
    """(HU int16 [32,256,256], labels uint8) of the sample phantom, head first (slice 0 = IM0001, superior)."""
    return phantom.volume(common.SAMPLE_SEED, SAMPLE_INDEX, N_SLICES)


def write_series(out: Path = OUT) -> list[Path]:
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, RLELossless

    hu, _ = sample_volume()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("IM[0-9][0-9][0-9][0-9]"):
        old.unlink()
    study, series, frame = _uid("study"), _uid("series"), _uid("frame")
    n, rows, cols = hu.shape
    # patient coordinates (LPS): the image centre on the z axis; slice 0 the most superior (largest z)
    x0, y0 = -(cols - 1) / 2 * PIXEL_MM, -(rows - 1) / 2 * PIXEL_MM
    paths = []
    for k in range(n):
        z = (n - 1 - k) * SPACING_MM - (n - 1) * SPACING_MM / 2
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
        ds.StudyDescription, ds.SeriesDescription = "SegLens demo", "Synthetic chest phantom 5 mm"
        ds.PatientName, ds.PatientID = "Ostrander^Wilhelmina", "OW-40712"
        ds.PatientBirthDate, ds.PatientSex = "", "O"
        ds.BodyPartExamined = "CHEST"
        ds.SliceThickness = SPACING_MM
        ds.PatientPosition = "HFS"
        ds.StudyInstanceUID, ds.SeriesInstanceUID = study, series
        ds.StudyID, ds.SeriesNumber, ds.InstanceNumber, ds.AcquisitionNumber = "1", 1, k + 1, 1
        ds.ImagePositionPatient = [round(x0, 3), round(y0, 3), float(z)]
        ds.ImageOrientationPatient = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
        ds.FrameOfReferenceUID, ds.PositionReferenceIndicator = frame, ""
        ds.SliceLocation = float(z)
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.Rows, ds.Columns = rows, cols
        ds.PixelSpacing = [PIXEL_MM, PIXEL_MM]
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
        ds.WindowCenter, ds.WindowWidth = [-300, 40], [1800, 400]
        ds.WindowCenterWidthExplanation = ["LUNG WIDE", "SOFT TISSUE"]
        ds.RescaleIntercept, ds.RescaleSlope, ds.RescaleType = INTERCEPT, 1, "HU"
        ds.compress(RLELossless, (hu[k].astype(np.int32) - INTERCEPT).clip(0, 65535).astype(np.uint16),
                    generate_instance_uid=False)
        path = out / f"IM{k + 1:04d}"
        ds.save_as(path, enforce_file_format=True)
        paths.append(path)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    paths = write_series(args.out)
    total = sum(p.stat().st_size for p in paths)
    print(f"{len(paths)} files in {args.out}, {total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
