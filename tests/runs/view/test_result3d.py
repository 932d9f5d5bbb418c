"""A 3D model's kept result for the viewer (app/runs/view/result3d.py): run once, then each slice's Result, the label
volume at another threshold, its mL and components from the kept probabilities — never a second run; a 4D NIfTI
and a volume too big for memory refused in one line before anything is read; a stop between chunks of slices."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from spec3d_models import sigmoid3d, with_sidecar

from app.errors import SegLensError
from app.inference.decide.tuning import with_threshold
from app.inference.image.pipeline import Stopped
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.discover import discover
from app.runs.view.result3d import needs_volume_line, predict_kept, read_volume_image


@pytest.fixture
def model(tmp_path):
    path = with_sidecar(sigmoid3d(tmp_path / "blob3d.onnx"), "input:\n  patch: [4, 16, 16]\n  scale: 0.01\n"
                                                           "classes: [lesion]\n")
    return open_session(load_spec(path), "cpu")


@pytest.fixture
def volume(tmp_path):
    import nibabel as nib

    k, j, i = np.meshgrid(np.arange(8), np.arange(24), np.arange(20), indexing="ij")
    data = 100 * np.exp(-((k - 4) ** 2 + (j - 12) ** 2 + (i - 10) ** 2) / 18.0)  # one blob, [k, j, i]
    nib.save(nib.Nifti1Image(np.round(data).astype(np.int16).transpose(2, 1, 0), np.diag([0.5, 0.6, 2.0, 1])),
             str(tmp_path / "blob.nii.gz"))
    (item,) = discover([tmp_path / "blob.nii.gz"])
    return item.volume


def test_slices_and_the_volume_come_from_the_one_run(model, volume, model_runs):
    kept = predict_kept(model, volume)
    runs = len(model_runs)
    labels = kept.prediction.labels
    assert labels.shape == (8, 24, 20) and labels.any()
    for k in range(8):
        result = kept.slice_result(k, spec=model.spec)
        np.testing.assert_array_equal(result.mask, labels[k])
        assert result.scores.dtype == np.float16 and result.image_score == pytest.approx(
            float(kept.prediction.probabilities[0, k].max()))
    figures = kept.figures(spec=model.spec)
    assert figures.labels is labels and int(figures.voxels[1]) == int(labels.sum())
    assert figures.millilitres[1] == pytest.approx(labels.sum() * 0.5 * 0.6 * 2.0 / 1000)
    (blob,) = figures.lesions
    assert blob.voxels == int(labels.sum()) and blob.ml == pytest.approx(figures.millilitres[1])
    strict, _ = with_threshold(model.spec, 0.9)
    tighter = kept.figures(spec=strict, tuned=True)
    np.testing.assert_array_equal(tighter.labels, kept.prediction.probabilities[0].astype(np.float32) > 0.9)
    np.testing.assert_array_equal(kept.slice_result(4, spec=strict, tuned=True).mask, tighter.labels[4])
    assert 0 < tighter.voxels[1] < figures.voxels[1]
    assert len(model_runs) == runs


def test_refusals_are_one_line_before_anything_is_read(model, volume):
    with pytest.raises(SegLensError, match="^a 4D NIfTI of 2 time points: a 3D model runs on one 3D volume"):
        predict_kept(model, dataclasses.replace(volume, time_points=2))
    refused = r"^the 3D model needs about .* \(8×24×20 voxels on the model's grid, 1 class\), more than the .*"
    with pytest.raises(SegLensError, match=refused):
        predict_kept(model, volume, memory_limit=1024)
    assert needs_volume_line(model.spec) == ("blob3d.onnx is a 3D model: open a volume — a DICOM series or a "
                                             "NIfTI file")


def test_reading_stops_between_chunks(volume):
    seen = []
    with pytest.raises(Stopped):
        read_volume_image(volume, progress=lambda stage, done, total: seen.append((stage, done, total)),
                          should_stop=lambda: len(seen) >= 1)
    assert seen == [("reading", 6, 8)]
