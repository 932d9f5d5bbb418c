"""The bundled CT demo model (models/ct_demo.onnx, trained on a synthetic chest phantom) on its sample series
(resources/samples/ct/, 32 RLE-compressed DICOM slices with no file extension): the slices decode to HU with a
consistent geometry, the sidecar's window is what the model gets, and the masks are anatomically plausible on the
middle slice (the ground truth is not shipped: two lungs left and right of the centre, bone on the posterior
midline). No torch."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pydicom
import pytest

from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.images import read_image

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "models" / "ct_demo.onnx"
SAMPLES = REPO / "resources" / "samples" / "ct"
FILES = [SAMPLES / f"IM{k:04d}" for k in range(1, 33)]
LUNG, BONE = 1, 2


@pytest.fixture(scope="module")
def middle():
    session = open_session(load_spec(MODEL), "cpu")
    return run_image(session, read_image(FILES[15])).mask


def test_sidecar_windows_hu_for_the_model():
    spec = load_spec(MODEL)
    assert spec.class_names == ("background", "lung", "bone")
    assert spec.input.window == (-300.0, 1800.0) and spec.sources["input.window"] == "sidecar"
    assert MODEL.stat().st_size <= 1.5 * 2**20


def test_the_sample_is_one_axial_ct_series_in_hu():
    assert sorted(p.name for p in SAMPLES.iterdir() if p.name.startswith("IM")) == [p.name for p in FILES]
    assert sum(p.stat().st_size for p in SAMPLES.iterdir()) <= 1.5 * 2**20
    z, uids = [], set()
    for k, path in enumerate(FILES):
        ds = pydicom.dcmread(path)
        assert ds.file_meta.TransferSyntaxUID == pydicom.uid.RLELossless
        assert (ds.Modality, ds.SOPClassUID, ds.InstanceNumber) == ("CT", pydicom.uid.CTImageStorage, k + 1)
        assert (ds.Rows, ds.Columns, [float(v) for v in ds.PixelSpacing]) == (256, 256, [1.2, 1.2])
        assert [float(v) for v in ds.ImageOrientationPatient] == [1, 0, 0, 0, 1, 0]
        assert (str(ds.PatientName), ds.PatientID) == ("Ostrander^Wilhelmina", "OW-40712")
        uids.add((ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID))
        z.append(float(ds.ImagePositionPatient[2]))
        if k in (0, 15):
            hu = ds.pixel_array.astype(np.float32) * float(ds.RescaleSlope) + float(ds.RescaleIntercept)
            assert float(ds.RescaleIntercept) == -1024 and hu.shape == (256, 256)
            assert hu[0, 0] == -1000 and hu.max() > 500  # air outside the body, bone inside
    assert len(uids) == 1
    assert np.allclose(np.diff(z), -5.0)


def test_middle_slice_has_two_lungs_and_a_posterior_spine(middle):
    h, w = middle.shape
    lung = (middle == LUNG).astype(np.uint8)
    assert 0.05 <= lung.mean() <= 0.40
    n, _, stats, centroids = cv2.connectedComponentsWithStats(lung, connectivity=8)
    big = [centroids[i] for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= 200]
    assert len(big) == 2
    xs = sorted(c[0] for c in big)
    assert xs[0] < w / 2 < xs[1]
    bone = middle == BONE
    posterior_midline = bone[h // 2 + 30 :, w // 2 - 25 : w // 2 + 25]
    assert posterior_midline.sum() >= 100
