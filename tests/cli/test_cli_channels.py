"""seglens-cli run with a 3D model of two input channels (T1, T2): the nnU-Net MR fixture imported, then its held-out
case given as `CASE_0000.nii.gz` (the other channel found beside it), a folder of two cases (one report line each,
named CASE), a 4D NIfTI of the two channels (the same labels), and a missing or mismatched channel (one line each,
the other case still written). `info` names the channels."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from app.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "nnunet" / "Dataset902_MRTwo"
FOLDER = DATA / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"
HELDOUT = DATA / "heldout"
REFERENCE = DATA / "predictions" / "3d_fullres" / "folds0_mirror"  # nnUNetPredictor's, fold 0, mirroring on


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mr") / "mr.onnx"
    assert main(["import", "nnunet", str(FOLDER), "--folds", "0", "--out", str(out)]) == 0
    return out


def _rows(report: Path) -> list[dict[str, str]]:
    with report.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _labels(path: Path) -> np.ndarray:
    return np.asarray(nib.load(str(path)).dataobj)


def _copy_case(source: str, folder: Path, case: str, channels: tuple[int, ...] = (0, 1)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for channel in channels:
        shutil.copy(HELDOUT / f"{source}_{channel:04d}.nii.gz", folder / f"{case}_{channel:04d}.nii.gz")


def _dice(labels: np.ndarray, reference: np.ndarray, label: int) -> float:
    both = int(((labels == label) & (reference == label)).sum())
    return 2 * both / max(1, int((labels == label).sum() + (reference == label).sum()))


def _run(model: Path, given: Path, out: Path) -> int:
    return main(["run", str(model), str(given), "--out", str(out), "--device", "cpu", "--no-progress"])


def test_info_names_the_channels(model, capsys):
    assert main(["info", str(model), "--no-session"]) == 0
    assert "  channels      0 T1, 1 T2 (files CASE_0000 … CASE_0001" in capsys.readouterr().out
    assert main(["info", str(model), "--no-session", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["input"]["channel_names"] == ["T1", "T2"]


def test_the_held_out_case_given_by_its_first_channel_writes_a_mask(model, tmp_path, capsys):
    assert _run(model, HELDOUT / "heldout_000_0000.nii.gz", tmp_path / "out") == 0
    (row,) = _rows(tmp_path / "out" / "seglens_report.csv")
    assert row["path"] == str(HELDOUT / "heldout_000") and row["status"] == "ok"
    labels = _labels(tmp_path / "out" / "heldout_000_mask.nii.gz")
    assert labels.shape == (44, 52, 28) and set(np.unique(labels)) <= {0, 1, 2} and labels.any()
    assert np.array_equal(nib.load(str(tmp_path / "out" / "heldout_000_mask.nii.gz")).affine,
                          nib.load(str(HELDOUT / "heldout_000_0000.nii.gz")).affine)
    # nnUNetPredictor's own labels (the import runs nnU-Net's recipe): the channels swapped give 0.69 here
    assert _dice(labels, _labels(REFERENCE / "heldout_000.nii.gz"), 2) >= 0.99


def test_a_folder_of_two_cases_and_a_4d_nifti_give_the_same_labels(model, tmp_path, capsys):
    _copy_case("heldout_000", tmp_path / "in", "p000")
    _copy_case("heldout_001", tmp_path / "in", "p001")
    assert _run(model, tmp_path / "in", tmp_path / "out") == 0
    rows = _rows(tmp_path / "out" / "seglens_report.csv")
    assert [(Path(row["path"]).name, row["status"]) for row in rows] == [("p000", "ok"), ("p001", "ok")]
    t1, t2 = (nib.load(str(tmp_path / "in" / f"p001_{c:04d}.nii.gz")) for c in (0, 1))
    four = np.stack([np.asarray(t1.dataobj), np.asarray(t2.dataobj)], axis=3)
    (tmp_path / "four").mkdir()
    nib.save(nib.Nifti1Image(four, t1.affine, t1.header), str(tmp_path / "four" / "p001.nii.gz"))
    assert _run(model, tmp_path / "four" / "p001.nii.gz", tmp_path / "out4") == 0
    files = _labels(tmp_path / "out" / "p001_mask.nii.gz")
    assert _dice(files, _labels(REFERENCE / "heldout_001.nii.gz"), 2) >= 0.99
    assert files.any() and np.array_equal(_labels(tmp_path / "out4" / "p001.nii.gz_mask.nii.gz"), files)


def test_a_missing_and_a_mismatched_channel_are_one_line_each_and_the_other_case_runs(model, tmp_path, capsys):
    _copy_case("heldout_000", tmp_path / "in", "a")
    _copy_case("heldout_001", tmp_path / "in", "b", channels=(0,))
    _copy_case("heldout_001", tmp_path / "in", "c", channels=(0,))
    t2 = nib.load(str(HELDOUT / "heldout_001_0001.nii.gz"))
    shifted = t2.affine.copy()
    shifted[0, 3] += 5.0
    nib.save(nib.Nifti1Image(np.asarray(t2.dataobj), shifted), str(tmp_path / "in" / "c_0001.nii.gz"))
    assert _run(model, tmp_path / "in", tmp_path / "out") == 1
    err = capsys.readouterr().err
    rows = {Path(row["path"]).name: row for row in _rows(tmp_path / "out" / "seglens_report.csv")}
    assert [rows[name]["status"] for name in "abc"] == ["ok", "error", "error"]
    missing = "channel 1 (T2) missing: no file b_0001.nii.gz beside it"
    mismatched = ("channel 1 (T2), c_0001.nii.gz: its voxel-to-mm affine differs from c_0000.nii.gz's (by up to "
                  "5 mm); the channels of a case must share shape and geometry")
    lines = err.splitlines()
    assert [line for line in lines if missing in line] == [f"error: {tmp_path / 'in' / 'b'}: {missing}"]
    assert [line for line in lines if mismatched in line] == [f"error: {tmp_path / 'in' / 'c'}: {mismatched}"]
    assert (tmp_path / "out" / "a_mask.nii.gz").is_file()
    assert not list((tmp_path / "out").glob("[bc]_*"))
