"""seglens-cli run on volumes, end to end: a DICOM series (shuffled, no extensions) and a NIfTI file through a 2D
model, exported as DICOM SEG, NIfTI and Secondary Capture, read back with highdicom, pydicom and nibabel."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from tests.dicom_factory import disc_slice, write_nifti, write_series

pytest.importorskip("highdicom")


def _rows(report: Path) -> list[dict]:
    with open(report, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _discs(slices: int, rows: int = 32, columns: int = 32) -> np.ndarray:
    return np.stack([disc_slice(k, rows, columns) > 0 for k in range(slices)]).astype(np.uint8)


def test_a_series_and_a_nifti_volume_are_exported_and_read_back(ct_model, tmp_path, capsys):
    import highdicom as hd
    import nibabel as nib
    import pydicom

    paths = write_series(tmp_path / "in" / "ct", slices=6, shuffle=True, suffix="")  # files as PACS exports them
    data = write_nifti(tmp_path / "in" / "brain.nii.gz")
    out = tmp_path / "out"
    code = main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--export", "dicom-seg,nifti,sc",
                 "--per-slice"])
    assert code == 0
    uid = str(pydicom.dcmread(paths[0]).SeriesInstanceUID)
    expected = _discs(6)

    rows = _rows(out / "seglens_report.csv")
    series_row = next(r for r in rows if r["path"].endswith(uid))
    assert series_row["status"] == "ok" and series_row["slices"] == "6" and series_row["series"] == uid
    assert int(series_row["pixels_disc"]) == int(expected.sum())
    assert float(series_row["ml_disc"]) == pytest.approx(expected.sum() * 2.5 * 0.7 * 0.8 / 1000, abs=1e-3)
    slice_rows = [r for r in rows if r["slice"]]
    assert [r["path"] for r in slice_rows if r["series"] == uid] == [str(p) for p in paths]  # in position order
    assert [int(r["pixels_disc"]) for r in slice_rows if r["series"] == uid] == [int(m.sum()) for m in expected]

    nifti = nib.load(out / "ct" / f"{uid}_mask.nii.gz")
    assert nifti.get_data_dtype() == np.uint8 and nifti.shape == (32, 32, 6)
    first = np.array(pydicom.dcmread(paths[0]).ImagePositionPatient, float)
    np.testing.assert_allclose(nifti.affine @ [0, 0, 0, 1], [-first[0], -first[1], first[2], 1], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(nifti.dataobj).transpose(2, 1, 0), expected)

    seg = hd.seg.segread(out / "ct" / f"{uid}_seg.dcm")
    sources = [str(pydicom.dcmread(p).SOPInstanceUID) for p in paths]
    planes = seg.get_pixels_by_source_instance(source_sop_instance_uids=sources, segment_numbers=[1])
    np.testing.assert_array_equal(planes[..., 0].astype(np.uint8), expected)
    assert seg.FrameOfReferenceUID == pydicom.dcmread(paths[0]).FrameOfReferenceUID
    assert seg.SegmentSequence[0].SegmentLabel == "disc"

    sc = sorted((out / "ct" / f"{uid}_sc").glob("*.dcm"))
    assert len(sc) == 6 and pydicom.dcmread(sc[0]).SourceImageSequence[0].ReferencedSOPInstanceUID == sources[0]

    brain = nib.load(out / "brain.nii.gz_mask.nii.gz")
    source = nib.load(tmp_path / "in" / "brain.nii.gz")
    assert brain.shape == source.shape and np.array_equal(brain.affine, source.affine)
    assert np.array_equal(np.asarray(brain.dataobj) > 0, data > 50)  # 100 windowed automatically: foreground
    err = capsys.readouterr().err
    assert "brain.nii.gz: no dicom-seg export" in err and "Doe^Jane" not in err and "PID-0042" not in err


def test_anonymize_puts_a_stable_pseudonym_in_the_report(ct_model, tmp_path, monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "site-key-0123456789")
    write_series(tmp_path / "a", slices=3)
    write_series(tmp_path / "b", slices=3, patient=("Roe^Rick", "PID-7"))
    for out in ("o1", "o2"):
        assert main(["run", str(ct_model), str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / out),
                     "--anonymize", "--per-slice"]) == 0
    text = (tmp_path / "o1" / "seglens_report.csv").read_text()
    assert "Doe" not in text and "PID-0042" not in text and "Roe" not in text
    first, second = (sorted({r["patient"] for r in _rows(tmp_path / o / "seglens_report.csv")}) for o in ("o1", "o2"))
    assert first == second and len(first) == 2 and all(p.startswith("anon-") for p in first)
    assert main(["run", str(ct_model), str(tmp_path / "a"), "--out", str(tmp_path / "o3")]) == 0
    assert {r["patient"] for r in _rows(tmp_path / "o3" / "seglens_report.csv")} == {"Doe^Jane (PID-0042)"}


def test_a_damaged_slice_fails_its_volume_only_and_nothing_is_half_written(ct_model, tmp_path, capsys):
    paths = write_series(tmp_path / "in" / "bad", slices=5)
    write_series(tmp_path / "in" / "good", slices=4)
    data = paths[2].read_bytes()
    paths[2].write_bytes(data[: len(data) - 600])  # pixel data cut short after the folder was exported
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--export", "nifti,dicom-seg"]) == 1
    rows = _rows(out / "seglens_report.csv")
    bad = next(r for r in rows if "/bad/" in r["path"])
    assert bad["status"] == "error" and paths[2].name in bad["error"]
    assert next(r for r in rows if "/good/" in r["path"])["status"] == "ok"
    assert not list((out / "bad").glob("*")) and len(list((out / "good").glob("*"))) == 2
    assert paths[2].name in capsys.readouterr().err


def test_resume_carries_a_finished_volume_and_redoes_one_whose_export_is_missing(ct_model, tmp_path, model_runs):
    write_series(tmp_path / "in" / "a", slices=3)
    write_series(tmp_path / "in" / "b", slices=4)
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out)]) == 0
    slices = [shape for shape in model_runs if shape[-2:] == (32, 32)]  # not the warm-up run
    assert len(slices) == 7
    next((out / "b").glob("*_mask.nii.gz")).unlink()
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--resume"]) == 0
    assert len([shape for shape in model_runs if shape[-2:] == (32, 32)]) == 7 + 4  # only b again
    rows = _rows(out / "seglens_report.csv")
    assert [r["status"] for r in rows] == ["ok", "ok"] and len(list(out.rglob("*_mask.nii.gz"))) == 2


def test_a_classifier_gets_a_row_per_slice_and_no_exports(models, tmp_path):
    model = models("classifier")
    write_series(tmp_path / "in", slices=3)
    assert main(["run", str(model), str(tmp_path / "in"), "--out", str(tmp_path / "out")]) == 0
    rows = _rows(tmp_path / "out" / "seglens_report.csv")
    assert len(rows) == 4 and rows[0]["slices"] == "3" and [r["slice"] for r in rows[1:]] == ["1", "2", "3"]
    assert all(r["top1"] for r in rows[1:]) and not list((tmp_path / "out").rglob("*.nii.gz"))


def test_volume_options_without_a_volume_are_said_not_ignored(models, tmp_path, capsys):
    from PIL import Image

    (tmp_path / "in").mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "in" / "a.png")
    assert main(["run", str(models("binary_logits")), str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                 "--export", "dicom-seg", "--per-slice"]) == 0
    assert "note: --export, --per-slice apply to volumes" in capsys.readouterr().err
    assert (tmp_path / "out" / "a.png_mask.png").is_file()


def test_damaged_volumes_get_one_clean_line_each(models, tmp_path, capsys):
    """A 5D NIfTI, a truncated .nii.gz and a file with the DICM marker but no image each get an error row whose
    message names the file once; a NaN voxel is black, not an invalid cast; pydicom's own warnings stay quiet."""
    import warnings

    import nibabel as nib

    folder = tmp_path / "in"
    folder.mkdir()
    nib.save(nib.Nifti1Image(np.zeros((8, 8, 3, 2, 2), np.float32), np.eye(4)), str(folder / "five.nii.gz"))
    values = np.random.default_rng(1).random((16, 16, 4)).astype(np.float32)
    values[0, 0, :] = np.nan
    nib.save(nib.Nifti1Image(values, np.eye(4)), str(folder / "nan.nii.gz"))
    (folder / "trunc.nii.gz").write_bytes((folder / "nan.nii.gz").read_bytes()[:200])
    (folder / "IM0001").write_bytes(b"\0" * 128 + b"DICM" + b"\x02\x00" * 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the NaN cast used to warn
        code = main(["run", str(models("binary_logits")), str(folder), "--out", str(tmp_path / "out")])
    assert code == 1
    rows = {Path(r["path"]).name: r for r in _rows(tmp_path / "out" / "seglens_report.csv")}
    assert {name: r["status"] for name, r in rows.items()} == {"five.nii.gz": "error", "IM0001": "error",
                                                               "nan.nii.gz": "ok", "trunc.nii.gz": "error"}
    for name in ("five.nii.gz", "IM0001", "trunc.nii.gz"):
        # once: nibabel reads the untrusted gate's handle now, so its own message no longer repeats the path
        assert rows[name]["error"].count(name) == 1, rows[name]["error"]
    err = capsys.readouterr().err
    assert "UserWarning" not in err and "Invalid value for VR" not in err
