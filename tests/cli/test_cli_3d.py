"""seglens-cli run with a 3D model (factory ONNX models, tests/volume3d_models.py): a DICOM series, a NIfTI
and a PNG in one run (the PNG refused in one line, the rest written), the DICOM SEG of a 3D result through dciodvfy,
--no-tile, --tta and --ray refusals in one line, and the terminal's patch progress."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import cv2
import dciodvfy
import nibabel as nib
import numpy as np
import pydicom
import pytest
from spec3d_models import FIXED, scores3d
from volume3d_models import box_sigmoid, pointwise, runner, session

from app.cli import main
from app.cli.console import Progress
from app.inference.model.builder import load_spec
from app.inference.volume3d.predict import predict_volume
from tests.dicom_factory import disc_slice, write_series

CT = ("input:\n  patch: [4, 16, 16]\n  normalize: {kind: ct, clip: [-1000, 200], mean: -470, std: 265}\n"
      "classes:\n  - background\n  - {name: disc, color: '#ff0000'}\n")


def ct3d(path: Path) -> Path:
    """A binary 3D model: the +60 HU disc of tests/dicom_factory.py's series is foreground, air is not."""
    box_sigmoid(path)
    path.with_suffix(".yaml").write_text(CT)
    return path


def rows(report: Path) -> list[dict[str, str]]:
    with report.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_a_series_a_nifti_and_a_png_in_one_run(tmp_path, capsys):
    inputs = tmp_path / "in"
    write_series(inputs / "ct", slices=6)
    affine = np.diag([0.8, 0.7, 2.5, 1.0])
    hu = np.stack([disc_slice(k, 32, 32) for k in range(6)])  # native [k, row, col]
    nib.save(nib.Nifti1Image(hu.transpose(2, 1, 0), affine), str(inputs / "ct.nii.gz"))
    cv2.imwrite(str(inputs / "plain.png"), np.full((16, 16), 200, np.uint8))
    out = tmp_path / "out"
    model = ct3d(tmp_path / "m.onnx")
    code = main(["run", str(model), str(inputs), "--out", str(out), "--export", "nifti,dicom-seg",
                 "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 1  # the PNG failed, the volumes were written
    assert f"error: {inputs / 'plain.png'}: a 3D model needs a volume: a DICOM series or NIfTI\n" in err
    assert "Traceback" not in err
    report = {Path(r["path"]).name: r for r in rows(out / "seglens_report.csv")}
    assert report["plain.png"]["status"] == "error"
    truth = predict_volume(hu, spacing=(2.5, 0.7, 0.8), affine=affine, spec=load_spec(model),
                           run_raw=runner(session(model))).labels
    nifti = report["ct.nii.gz"]
    assert (nifti["status"], nifti["slices"], nifti["components_disc"]) == ("ok", "6", "1")
    assert nifti["pixels_disc"] == str(int(truth.sum())) != "0"
    labels = np.asarray(nib.load(str(out / "ct.nii.gz_mask.nii.gz")).dataobj).transpose(2, 1, 0)
    np.testing.assert_array_equal(labels, truth)
    series = next(r for r in report.values() if r["slices"] == "6" and r is not nifti)
    assert series["pixels_disc"] == nifti["pixels_disc"]  # the same HU, the same model: the same voxels
    assert [p.name for p in out.rglob("*_seg.dcm")] == [f"{Path(series['path']).name}_seg.dcm"]


def test_the_dicom_seg_of_a_3d_result_passes_dciodvfy(tmp_path, capsys):
    dciodvfy.require()
    write_series(tmp_path / "in" / "ct", slices=6)
    out = tmp_path / "out"
    assert main(["run", str(ct3d(tmp_path / "m.onnx")), str(tmp_path / "in"), "--out", str(out), "--export",
                 "dicom-seg", "--device", "cpu"]) == 0
    (seg,) = out.rglob("*_seg.dcm")
    assert dciodvfy.verify(seg).errors == ()
    import pydicom

    dataset = pydicom.dcmread(seg)
    assert dataset.Modality == "SEG" and int(dataset.NumberOfFrames) == 6  # the disc is on every slice


def test_no_tile_runs_the_whole_volume_at_once(tmp_path, capsys):
    model = pointwise(tmp_path / "p.onnx")  # voxel by voxel: the sliding window and one run agree exactly
    model.with_suffix(".yaml").write_text("input:\n  patch: [4, 8, 8]\n")
    inputs = tmp_path / "in"
    inputs.mkdir()
    rng = np.random.default_rng(0)
    nib.save(nib.Nifti1Image(rng.random((20, 12, 9), np.float32), np.diag([1.0, 1.0, 2.0, 1.0])),
             str(inputs / "v.nii.gz"))
    masks = []
    for flag in ("--tile", "--no-tile"):
        out = tmp_path / flag.strip("-")
        assert main(["run", str(model), str(inputs), "--out", str(out), flag, "--device", "cpu"]) == 0
        masks.append(np.asarray(nib.load(str(out / "v.nii.gz_mask.nii.gz")).dataobj))
    np.testing.assert_array_equal(masks[0], masks[1])
    assert len(np.unique(masks[0])) == 3


@pytest.mark.parametrize(("make", "flags", "line"), [
    (lambda p: scores3d(p, shape=FIXED), ["--no-tile"],
     "error: m.onnx: --no-tile runs the whole volume at once, which needs a model whose input is dynamic along "
     "D×H×W; this one is fixed at 16×32×32: run it with the sliding window (without --no-tile)\n"),
    (ct3d, ["--ray"], "error: --ray with a 3D model is not supported yet (its unit is a whole volume, the cluster "
                      "runs slices and images); run it without --ray\n"),
], ids=["no-tile-fixed", "ray"])
def test_what_a_3d_model_cannot_do_is_one_line(tmp_path, capsys, make, flags, line):
    write_series(tmp_path / "in" / "ct", slices=3)
    assert main(["run", str(make(tmp_path / "m.onnx")), str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                 *flags, "--device", "cpu"]) == 2
    assert capsys.readouterr().err == line
    assert not (tmp_path / "out" / "seglens_report.csv").exists()


def test_tta_on_a_2d_model_is_one_line(ct_model, tmp_path, capsys):
    write_series(tmp_path / "in" / "ct", slices=3)
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--tta"]) == 2
    assert capsys.readouterr().err == f"error: --tta mirrors a 3D model's patches; {ct_model.name} is a 2D model\n"


def test_the_terminal_shows_patch_k_of_n(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    Progress(1, enabled=True).patches(3, 27)
    assert err.getvalue() == "\r\x1b[K  patch 3 of 27"


def test_anonymize_and_resume_with_a_3d_model(tmp_path, capsys):
    write_series(tmp_path / "in" / "ct", slices=6)  # the patient is Doe^Jane, PID-0042
    model, out = ct3d(tmp_path / "m.onnx"), tmp_path / "out"
    args = ["run", str(model), str(tmp_path / "in"), "--out", str(out), "--export", "dicom-seg,nifti", "--save",
            "scores", "--anonymize", "--device", "cpu"]
    assert main(args) == 0
    files = [p for p in out.rglob("*") if p.is_file()]
    assert sorted(p.name.split("_", 1)[-1] for p in files if p.suffix != ".csv" and not p.name.endswith(".json")) \
        == ["mask.nii.gz", "scores.nii.gz", "seg.dcm"]
    import gzip

    for path in files:
        data = path.read_bytes()
        data = gzip.decompress(data) if path.name.endswith(".gz") else data
        assert b"Doe" not in data and b"PID-0042" not in data, path.name
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    assert "1 input: 1 ok (1 done by an earlier run), 0 failed" in capsys.readouterr().out


def test_resume_runs_a_volume_again_whose_scores_nifti_is_gone(tmp_path, capsys):
    nifti = tmp_path / "in" / "ct.nii.gz"
    nifti.parent.mkdir()
    hu = np.full((6, 24, 20), -1000.0, np.float32)
    hu[:, 6:18, 5:15] = 60.0
    nib.save(nib.Nifti1Image(hu.transpose(2, 1, 0), np.diag([0.8, 0.8, 2.5, 1.0])), str(nifti))
    model, out = ct3d(tmp_path / "m.onnx"), tmp_path / "out"
    args = ["run", str(model), str(nifti), "--out", str(out), "--export", "nifti", "--save", "scores",
            "--device", "cpu"]
    assert main(args) == 0
    scores = out / "ct.nii.gz_scores.nii.gz"
    kept = scores.read_bytes()
    scores.unlink()
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    assert "1 input: 1 ok, 0 failed" in capsys.readouterr().out  # was: 1 done by an earlier run, no scores
    assert scores.read_bytes() == kept


def test_compare_with_a_3d_model_is_one_line(ct_model, tmp_path, capsys):
    write_series(tmp_path / "in" / "ct", slices=3)
    model = ct3d(tmp_path / "m.onnx")
    assert main(["compare", str(ct_model), str(model), str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                 "--device", "cpu"]) == 2
    assert capsys.readouterr().err == (  # was one error row per volume: 'takes 5-D tensors, got 4-D'
        "error: compare runs two models image by image and slice by slice; m.onnx is a 3D model (it runs on whole "
        "volumes): run each with `seglens-cli run` and compare their label volumes\n")
    assert not (tmp_path / "out" / "seglens_compare.csv").exists()


def test_the_bundled_3d_model_on_its_dicom_sample_under_anonymize(tmp_path, capsys):
    """The sample's fake patient must not share a word with the model's name or the sample's own tags: it was
    "Phantom^Demo3D" beside Manufacturer "SegLens (synthetic phantom)" and model ct3d_demo, so the de-identified
    SEG failed its check ('a patient name in the DICOM tags') and the bundled pipeline could not run anonymised."""
    repo = Path(__file__).resolve().parents[2]
    out, series = tmp_path / "out", repo / "resources" / "samples" / "ct3d" / "series"
    assert main(["run", str(repo / "models" / "ct3d_demo.onnx"), str(series),
                 "--out", str(out), "--export", "dicom-seg,nifti", "--anonymize", "--device", "cpu"]) == 0
    assert "1 input: 1 ok, 0 failed" in capsys.readouterr().out
    [seg] = out.rglob("*_seg.dcm")
    assert "ct3d_demo" in pydicom.dcmread(seg, stop_before_pixels=True).SeriesDescription
