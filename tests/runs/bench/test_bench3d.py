"""`seglens-cli bench` on a 3D model: the raw session.run time per patch and a synthetic volume through the 3D
pipeline, with the patch evaluations and session runs it made (app/runs/bench/volume3d.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx_factory import FLOAT, const, save, tensor

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.inference.volume3d.orient import orientation
from app.runs.bench.volume3d import bench3d, format_report3d, model_affine


def scores3d(path: Path, *, patch: str = "[8, 16, 16]", batch: int = 1) -> Path:
    """[N,1,D,H,W] → [N,2,D,H,W] scores (class 1 = x, class 0 = 0.5), with a sidecar giving the patch."""
    weight = np.array([0.0, 1.0], np.float32).reshape(2, 1, 1, 1, 1)
    save(path, [helper.make_node("Conv", ["volume", "w", "b"], ["scores"])],
         [tensor("volume", FLOAT, ["N", 1, "D", "H", "W"])], [tensor("scores", FLOAT, ["N", 2, "D", "H", "W"])],
         [const("w", weight), const("b", np.array([0.5, 0.0], np.float32))])
    path.with_suffix(".yaml").write_text(f"input:\n  patch: {patch}\n  tile: {{batch: {batch}}}\n")
    return path


def test_bench3d_times_patches_and_a_whole_volume(tmp_path):
    model = open_session(load_spec(scores3d(tmp_path / "m.onnx", batch=2)), "cpu")
    report = bench3d(model, runs=3)
    assert (report.patch, report.channels, report.batch, report.raw.runs) == ((8, 16, 16), 1, 2, 3)
    # twice the patch per axis at overlap 0.5: windows at 0, 4, 8 (D) and 0, 8, 16 (H, W) → 27, two per run
    assert (report.volume.shape, report.volume.patches, report.volume.runs) == ((16, 32, 32), 27, 14)
    text = format_report3d(report)
    assert "3D patches 8×16×16 (D×H×W) × 1 channel, batch 2; 3 runs" in text
    assert "whole volume 16×32×32:" in text and "for 27 patches in 14 runs" in text


def test_cli_bench_on_a_3d_model(tmp_path, capsys):
    path = scores3d(tmp_path / "m.onnx")
    assert main(["bench", str(path), "--runs", "2", "--device", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["patch"] == [8, 16, 16] and data["raw"]["runs"] == 2 and data["volume"]["patches"] == 27
    assert data["volume"]["runs"] == 27 and data["gpu_over_cpu"] is None
    assert main(["bench", str(path), "--images", str(tmp_path), "--device", "cpu"]) == 2
    assert capsys.readouterr().err == f"error: no volume (a DICOM series or NIfTI) in {tmp_path}: a 3D model is " \
                                      "benched on a volume\n"


def test_cli_bench_on_a_given_volume(tmp_path, capsys):
    import nibabel as nib

    path = scores3d(tmp_path / "m.onnx")
    (tmp_path / "in").mkdir()
    nib.save(nib.Nifti1Image(np.zeros((20, 18, 9), np.float32), np.diag([0.8, 0.8, 3.0, 1.0])),
             str(tmp_path / "in" / "v.nii.gz"))
    assert main(["bench", str(path), "--images", str(tmp_path / "in"), "--runs", "2", "--device", "cpu",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # the volume's own D × H × W (9 slices of 18 rows × 20 columns): windows at 0, 1 (D), 0, 2 (H), 0, 4 (W)
    assert data["volume"]["shape"] == [9, 18, 20] and data["volume"]["patches"] == 8 == data["volume"]["runs"]


@pytest.mark.parametrize("axes", ["RAS", "LPS", "SPL", "IRA"])
def test_the_synthetic_volume_is_stored_as_the_model_wants_it(axes):
    affine = model_affine(axes, (3.0, 0.8, 0.7))
    assert orientation(axes, affine).identity  # no reorientation: the bench times the blending, not a transpose
    np.testing.assert_allclose(np.linalg.norm(affine[:3, :3], axis=0), (0.7, 0.8, 3.0))  # i, j, k steps (W, H, D)


def test_bench3d_on_a_model_with_axes_and_spacing(tmp_path):
    path = scores3d(tmp_path / "ras.onnx")
    path.with_suffix(".yaml").write_text("input:\n  patch: [8, 16, 16]\n  axes: RAS\n  spacing: [3, 1, 1]\n")
    report = bench3d(open_session(load_spec(path), "cpu"), runs=2)
    assert (report.volume.shape, report.volume.patches) == ((16, 32, 32), 27)
