"""The bundled 3D CT demo model (models/ct3d_demo.onnx, a 3D UNet trained on synthetic chest phantoms) and its
samples (resources/samples/ct3d/: the same phantom as a NIfTI file and as an RLE DICOM series, at 2.75 x 0.875 x
0.875 mm, so the model's 1.5 mm grid needs resampling): the committed sidecar loads as a 3D model with the keys
the recipe wrote; both samples decode with app.io to exactly the phantom's HU and the same geometry; one patch
through the model labels each lesion's centre as lesion. No torch: the phantom is regenerated with
models/training (numpy + OpenCV). The held-out accuracy is models.training.evaluate3d's job (minutes), not a test's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml

from app.inference.model.builder import load_spec
from app.io.nifti import nifti_volume, read_nifti_slice
from app.io.series import read_dicom_slice, scan_dicom
from app.io.volumes import Volume

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "models" / "ct3d_demo.onnx"
SAMPLES = REPO / "resources" / "samples" / "ct3d"
NIFTI = SAMPLES / "ct3d_sample.nii.gz"
SERIES = SAMPLES / "series"
SHAPE, SPACING = (60, 172, 172), (2.75, 0.875, 0.875)
LIMIT = 10_000_000
CLASSES = ("background", "lung", "bone", "lesion")


@pytest.fixture(scope="module")
def phantom():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from models.training import sample3d

    return sample3d.sample_phantom()


def _stack(volume: Volume, read) -> np.ndarray:
    return np.stack([read(volume, k, max_pixels=LIMIT).raw for k in range(volume.depth)])


def test_the_sidecar_loads_as_a_3d_model_at_its_own_spacing():
    spec = load_spec(MODEL)
    side = yaml.safe_load(MODEL.with_suffix(".yaml").read_text())
    assert spec.is_3d and spec.task == "segmentation" and spec.class_names == CLASSES
    vol = spec.volume
    assert vol is not None
    assert (vol.patch, vol.spacing, vol.axes) == ((64, 64, 64), (1.5, 1.5, 1.5), "SPL")
    assert (vol.normalize.kind, vol.normalize.clip) == ("ct", (-1000.0, 1000.0))
    norm = side["input"]["normalize"]
    assert (vol.normalize.mean, vol.normalize.std) == (norm["mean"], norm["std"])
    assert -1000 < vol.normalize.mean < 0 and vol.normalize.std > 100  # the training set's, mostly air
    assert (vol.tile.overlap, vol.tile.blend) == (0.5, "gaussian")
    assert (spec.output.kind, spec.output.activation) == ("scores", "softmax")
    assert spec.sources["input.spacing"] == spec.sources["input.normalize"] == "sidecar"
    assert MODEL.stat().st_size <= 5 * 2**20
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    dims = [d if isinstance(d, int) else "dyn" for d in sess.get_inputs()[0].shape]
    assert dims == ["dyn", 1, "dyn", "dyn", "dyn"]  # dynamic batch, D, H, W
    meta = {p.key: p.value for p in onnx.load(str(MODEL)).metadata_props}
    assert json.loads(meta["classes"]) == list(CLASSES)


def test_the_nifti_sample_decodes_to_the_phantom(phantom):
    volume = nifti_volume(NIFTI)
    assert (volume.depth, volume.rows, volume.columns) == SHAPE
    assert np.allclose(volume.spacing, SPACING)
    assert np.array_equal(_stack(volume, read_nifti_slice), phantom.hu.astype(np.float32))
    assert NIFTI.stat().st_size <= 2 * 2**20


def test_the_dicom_series_decodes_to_the_same_voxels_and_geometry(phantom):
    files = sorted(SERIES.iterdir())
    assert [p.name for p in files] == [f"IM{k:04d}" for k in range(1, SHAPE[0] + 1)]
    assert sum(p.stat().st_size for p in files) <= 2 * 2**20
    found = [item for _, item in scan_dicom(files)]
    assert len(found) == 1 and isinstance(found[0], Volume)
    series = found[0]
    assert (series.depth, series.rows, series.columns) == SHAPE
    assert np.allclose(series.spacing, SPACING)
    assert np.array_equal(_stack(series, read_dicom_slice), phantom.hu.astype(np.float32))
    assert np.allclose(series.affine, nifti_volume(NIFTI).affine, atol=1e-3)  # the NIfTI is the series in RAS


def test_one_patch_through_the_model_finds_each_lesion(phantom):
    """A 64³ patch of the 1.5 mm grid around each lesion (the app's resampling and normalisation done here with
    the recipe's own numpy functions): the lesion's centre is argmax lesion, the patch's corner is not."""
    from models.training import common3d

    norm = yaml.safe_load(MODEL.with_suffix(".yaml").read_text())["input"]["normalize"]
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    shape = tuple(max(1, round(n * s / 1.5)) for n, s in zip(SHAPE, SPACING, strict=True))
    x = common3d.normalize(common3d.resample_linear(phantom.hu.astype(np.float32), shape), norm["mean"], norm["std"])
    for lesion in json.loads((SAMPLES / "lesions.json").read_text())["lesions"]:
        centre = [int((c + 0.5) * m / n) for c, m, n in zip(lesion["center_voxel"], shape, SHAPE, strict=True)]
        start = [min(max(0, c - 32), m - 64) for c, m in zip(centre, shape, strict=True)]
        patch = x[tuple(slice(s, s + 64) for s in start)]
        labels = sess.run(None, {"input": patch[None, None]})[0][0].argmax(0)
        assert labels[tuple(c - s for c, s in zip(centre, start, strict=True))] == 3
        assert labels[0, 0, 0] != 3


def test_the_whole_sample_through_predict_volume_measures_each_lesion(phantom):
    """SegLens's own 3D path on the NIfTI sample (resampled to 1.5 mm, 64³ Gaussian-blended patches, back to
    2.75 × 0.875 × 0.875 mm): exactly the four lesions, each 26-connected component's mL within 5 % of its
    4/3·π·r³ and holding the lesion's centre; lung and bone where the phantom has them (Dice > 0.9)."""
    from app.inference.decide.lesions import lesions
    from app.inference.runtime.session import open_session
    from app.inference.volume3d.predict import predict_volume

    volume = nifti_volume(NIFTI)
    image = _stack(volume, read_nifti_slice)
    session = open_session(load_spec(MODEL), "cpu")
    pred = predict_volume(image, spacing=volume.spacing, affine=volume.affine, spec=session.spec,
                          run_raw=session.run)
    assert pred.labels.shape == SHAPE and pred.probabilities.shape == (4, *SHAPE)
    assert pred.model_shape == (110, 100, 100)
    for c in (1, 2):
        a, b = pred.labels == c, phantom.labels == c
        assert 2 * (a & b).sum() / (a.sum() + b.sum()) > 0.9
    found = lesions(pred.labels, voxel_ml=volume.voxel_ml, classes=[3])
    truth = json.loads((SAMPLES / "lesions.json").read_text())["lesions"]
    assert len(found) == len(truth) == 4
    for lesion in truth:
        k, r, c = (round(v) for v in lesion["center_voxel"])
        match = [f for f in found if all(lo <= v < hi for v, (lo, hi) in zip((k, r, c), f.bbox, strict=True))]
        assert len(match) == 1
        assert match[0].ml == pytest.approx(lesion["volume_ml"], rel=0.05)


def test_a_sample_stored_in_another_axis_order_gets_the_same_labels():
    """The model was trained on [S, P, L] arrays (the samples' own order), so its sidecar says `input.axes: SPL`
    and SegLens reorients any volume to that. With `axes: native` the same patient stored sagittally (slices
    along L-R, as some NIfTI writers do) ran as is: 9 lesion components of 19.1 mL instead of 4 of 16.0."""
    from app.inference.runtime.session import open_session
    from app.inference.volume3d.predict import predict_volume

    volume = nifti_volume(NIFTI)
    image = _stack(volume, read_nifti_slice)
    session = open_session(load_spec(MODEL), "cpu")
    # native [k, j, i] → [i, k, j]: new voxel (i', j', k') = old (j, k, i), so old = P @ new
    permute = np.zeros((4, 4))
    permute[0, 2] = permute[1, 0] = permute[2, 1] = permute[3, 3] = 1
    stored = np.ascontiguousarray(image.transpose(2, 0, 1))
    spacing = (volume.spacing[2], volume.spacing[0], volume.spacing[1])
    run = {"spec": session.spec, "run_raw": session.run}
    ours = predict_volume(image, spacing=volume.spacing, affine=volume.affine, **run).labels
    sagittal = predict_volume(stored, spacing=spacing, affine=volume.affine @ permute, **run).labels
    assert np.array_equal(sagittal.transpose(1, 2, 0), ours)


def test_a_volume_smaller_than_the_patch_gets_the_labels_of_the_whole_one():
    """A 30×70×70 crop (55×41×41 on the 1.5 mm grid, below the 64³ patch) is padded: with zeros (the CT
    normalisation's mean, -655 HU, a frame the model was never shown) it got 30,417 lesion voxels where the whole
    volume has 4,416 there; the sidecar's `input.tile.pad: edge` repeats the border instead."""
    from app.inference.runtime.session import open_session
    from app.inference.volume3d.predict import predict_volume

    volume = nifti_volume(NIFTI)
    image = _stack(volume, read_nifti_slice)
    session = open_session(load_spec(MODEL), "cpu")
    assert session.spec.volume is not None and session.spec.volume.tile.pad == "edge"
    run = {"spacing": volume.spacing, "affine": volume.affine, "spec": session.spec, "run_raw": session.run}
    whole = predict_volume(image, **run).labels
    crop = (slice(10, 40), slice(40, 110), slice(30, 100))
    small = predict_volume(np.ascontiguousarray(image[crop]), **run)
    assert small.model_shape == (55, 41, 41)
    assert (small.labels == whole[crop]).mean() > 0.98
    lesion = [np.count_nonzero(found == 3) for found in (small.labels, whole[crop])]
    assert lesion[0] == pytest.approx(lesion[1], rel=0.05)
