"""The viewer's 3D result with a model of two input channels: the volume shown (`CASE_0000.nii.gz`, or `CASE_0001`)
runs as its case (app.io.channels, the other channel found beside it), with the labels `seglens-cli run` writes for
that case; a case missing a channel is one line naming it, before anything is read."""

from __future__ import annotations

import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from app.cli import main
from app.errors import SegLensError
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.nifti import nifti_volume
from app.runs.view.result3d import predict_kept

DATA = Path(__file__).resolve().parents[2] / "data" / "nnunet" / "Dataset902_MRTwo"
HELDOUT = DATA / "heldout"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mr") / "mr.onnx"
    folder = DATA / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"
    assert main(["import", "nnunet", str(folder), "--folds", "0", "--out", str(out)]) == 0
    return out


def test_the_volume_shown_runs_as_its_case_with_the_cli_s_labels(model, tmp_path, capsys):
    session = open_session(load_spec(model), "cpu")
    kept = predict_kept(session, nifti_volume(HELDOUT / "heldout_001_0001.nii.gz"))
    assert [ch.name for ch in kept.volume.channels] == ["T1", "T2"] and kept.volume.key == "heldout_001"
    assert main(["run", str(model), str(HELDOUT / "heldout_001_0000.nii.gz"), "--out", str(tmp_path / "out"),
                 "--device", "cpu", "--no-progress"]) == 0
    written = np.asarray(nib.load(str(tmp_path / "out" / "heldout_001_mask.nii.gz")).dataobj).transpose(2, 1, 0)
    assert kept.prediction.labels.any() and np.array_equal(kept.prediction.labels, written)


def test_a_case_missing_a_channel_is_one_line(model, tmp_path):
    shutil.copy(HELDOUT / "heldout_000_0000.nii.gz", tmp_path / "solo_0000.nii.gz")
    session = open_session(load_spec(model), "cpu")
    with pytest.raises(SegLensError, match=r"solo: channel 1 \(T2\) missing: no file solo_0001.nii.gz beside it$"):
        predict_kept(session, nifti_volume(tmp_path / "solo_0000.nii.gz"))
