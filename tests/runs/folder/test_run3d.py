"""A 3D model in the one folder-run seam (app.runs.folder.batch, app.runs.folder.volume3d): one unit per volume, its
label
volume assembled at once, so the report row, the NIfTI export and --save scores say what predict_volume says;
cancellation between patch batches leaves no output; a volume that cannot fit is refused before it is read."""

from __future__ import annotations

import csv
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from volume3d_models import box_sigmoid, pointwise, runner, session, smooth_volume

from app.inference.decide.lesions import lesions
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.inference.volume3d.predict import predict_volume
from app.runs.folder.plan import Callbacks
from app.runs.folder.run import LocalRunner, plan_run, run_folder

AFFINE = np.array([[-0.9, 0, 0, 10.0], [0, 1.1, 0, -20.0], [0, 0, 3.0, 5.0], [0, 0, 0, 1]])
SPACING = (3.0, 1.1, 0.9)  # along the native D (slice), H (row), W (column)


def nifti(path: Path, shape=(22, 18, 12), seed: int = 0) -> np.ndarray:
    """A NIfTI of smooth values in [0, 1) (i, j, k) = `shape`; returns the native [k, j, i] array."""
    native = smooth_volume((shape[2], shape[1], shape[0]), seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(native.transpose(2, 1, 0), AFFINE), str(path))
    return native


def model_3d(path: Path, sidecar: str = "input:\n  patch: [8, 16, 16]\n", kind: str = "binary") -> Path:
    (box_sigmoid if kind == "binary" else pointwise)(path)
    path.with_suffix(".yaml").write_text(sidecar)
    return path


def rows(report: Path) -> list[dict[str, str]]:
    with report.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def run(model: Path, inputs: list[Path], out: Path, **options):
    spec = load_spec(model)
    progress, should_stop = options.pop("progress", None), options.pop("should_stop", lambda: False)
    plan = plan_run(spec, inputs, out=out, **options)
    return spec, run_folder(plan, LocalRunner(open_session(spec, "cpu")), progress=progress, should_stop=should_stop)


def expected(spec, native: np.ndarray):
    return predict_volume(native, spacing=SPACING, affine=AFFINE, spec=spec, run_raw=runner(session(spec.path)))


@pytest.mark.parametrize("kind", ["binary", "scores"])
def test_the_row_and_the_nifti_are_predict_volumes_labels(tmp_path, kind):
    native = nifti(tmp_path / "in" / "ct.nii.gz")
    spec, done = run(model_3d(tmp_path / "m.onnx", kind=kind), [tmp_path / "in"], tmp_path / "out")
    assert (done.summary.ok, done.summary.failed) == (1, 0)
    truth = expected(spec, native)
    assert 0 < int((truth.labels > 0).sum()) < truth.labels.size  # something to count, not everything

    written = nib.load(str(tmp_path / "out" / "ct.nii.gz_mask.nii.gz"))
    np.testing.assert_array_equal(np.asarray(written.dataobj).transpose(2, 1, 0), truth.labels)
    np.testing.assert_allclose(written.affine, AFFINE)

    (row,) = rows(tmp_path / "out" / "seglens_report.csv")
    counts = np.bincount(truth.labels.ravel(), minlength=len(spec.class_names))
    voxel_ml = float(np.prod(SPACING)) / 1000
    found = lesions(truth.labels, voxel_ml=voxel_ml, connectivity=26)
    assert row["slices"] == str(native.shape[0])
    for value, name in enumerate(spec.class_names):
        assert row[f"pixels_{name}"] == str(counts[value])
        assert row[f"ml_{name}"] == f"{counts[value] * voxel_ml:.3f}"
        if value:
            mine = [x for x in found if x.label == value]
            assert row[f"components_{name}"] == str(len(mine)) != "0"
            assert row[f"largest_ml_{name}"] == f"{max(x.voxels for x in mine) * voxel_ml:.3f}"
    if kind == "binary":  # the highest foreground probability anywhere in the volume
        assert float(row["score"]) == pytest.approx(float(truth.probabilities.max()), abs=1e-6)


def test_per_slice_rows_come_from_the_label_volume(tmp_path):
    native = nifti(tmp_path / "in" / "ct.nii.gz")
    spec, _ = run(model_3d(tmp_path / "m.onnx"), [tmp_path / "in"], tmp_path / "out", per_slice=True)
    truth = expected(spec, native)
    slices = [r for r in rows(tmp_path / "out" / "seglens_report.csv") if r["slice"]]
    assert [r["slice"] for r in slices] == [str(k + 1) for k in range(native.shape[0])]
    name = spec.class_names[1]
    assert [int(r[f"pixels_{name}"]) for r in slices] == [int((truth.labels[k] == 1).sum())
                                                           for k in range(native.shape[0])]


def test_save_scores_round_trips_the_kept_probabilities(tmp_path):
    native = nifti(tmp_path / "in" / "ct.nii.gz")
    spec, _ = run(model_3d(tmp_path / "m.onnx", kind="scores"), [tmp_path / "in"], tmp_path / "out",
                  save=("scores",))
    truth = expected(spec, native)
    written = nib.load(str(tmp_path / "out" / "ct.nii.gz_scores.nii.gz"))
    np.testing.assert_allclose(written.affine, AFFINE)
    data = np.asarray(written.dataobj)
    assert data.shape == (*native.shape[::-1], truth.probabilities.shape[0])  # (i, j, k, class)
    np.testing.assert_array_equal(data.transpose(3, 2, 1, 0), truth.probabilities.astype(np.float32))


def test_threshold_decides_anew_on_the_kept_probabilities(tmp_path):
    nifti(tmp_path / "in" / "ct.nii.gz")
    spec, _ = run(model_3d(tmp_path / "m.onnx"), [tmp_path / "in"], tmp_path / "out", save=("scores",))
    probabilities = np.asarray(nib.load(str(tmp_path / "out" / "ct.nii.gz_scores.nii.gz")).dataobj)
    from app.inference.decide.tuning import with_threshold

    tuned, _ = with_threshold(spec, 0.8)
    plan = plan_run(tuned, [tmp_path / "in"], out=tmp_path / "high", threshold=0.8)
    run_folder(plan, LocalRunner(open_session(tuned, "cpu")))
    labels = np.asarray(nib.load(str(tmp_path / "high" / "ct.nii.gz_mask.nii.gz")).dataobj)
    np.testing.assert_array_equal(labels, (probabilities > 0.8).astype(np.uint8))
    assert 0 < labels.sum() < (probabilities > 0.5).sum()


def test_a_volume_stopped_between_patches_has_no_outputs(tmp_path):
    nifti(tmp_path / "in" / "a.nii.gz")
    nifti(tmp_path / "in" / "b.nii.gz", seed=1)
    seen: list[tuple[int, int]] = []
    _, done = run(model_3d(tmp_path / "m.onnx"), [tmp_path / "in"], tmp_path / "out", save=("scores",),
                  progress=Callbacks(patches=lambda k, n: seen.append((k, n))), should_stop=lambda: len(seen) >= 2)
    assert seen[:2] == [(1, seen[0][1]), (2, seen[0][1])] and seen[0][1] > 2  # stopped part-way through a
    assert done.summary.cancelled and done.summary.ok == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["seglens_report.csv",
                                                                    "seglens_report.csv.run.json"]
    report = rows(tmp_path / "out" / "seglens_report.csv")
    assert [(Path(r["path"]).name, r["status"], r["error"]) for r in report] == [
        (name, "skipped", "not processed: the run was cancelled") for name in ("a.nii.gz", "b.nii.gz")]


def test_a_volume_too_big_for_memory_is_refused_before_it_is_read(tmp_path):
    nifti(tmp_path / "in" / "ct.nii.gz")
    model = model_3d(tmp_path / "m.onnx", "input:\n  patch: [8, 16, 16]\n  spacing: [0.01, 0.01, 0.01]\n")
    run(model, [tmp_path / "in"], tmp_path / "out")
    report = {Path(r["path"]).name: r for r in rows(tmp_path / "out" / "seglens_report.csv")}
    error = report["ct.nii.gz"]["error"]
    assert report["ct.nii.gz"]["status"] == "error" and "\n" not in error
    assert error.startswith(f"{tmp_path / 'in' / 'ct.nii.gz'}: the 3D model needs about ")
    assert " GB for this volume (3600×1980×1980 voxels on the model's grid, 1 class), more than the " in error
    assert error.endswith(" available")
    assert not (tmp_path / "out" / "ct.nii.gz_mask.nii.gz").exists()


def test_tta_mirrors_every_patch_over_all_axes(tmp_path):
    native = nifti(tmp_path / "in" / "ct.nii.gz")
    totals: list[int] = []
    from app.cli.options import tiled

    spec = tiled(load_spec(model_3d(tmp_path / "m.onnx")), None, tta=True)
    assert spec.volume is not None and spec.volume.tta == (0, 1, 2)
    plan = plan_run(spec, [tmp_path / "in"], out=tmp_path / "out")
    run_folder(plan, LocalRunner(open_session(spec, "cpu")), progress=Callbacks(patches=lambda k, n: totals.append(n)))
    plain = expected(load_spec(tmp_path / "m.onnx"), native)
    assert set(totals) == {8 * plain.patches}
    labels = np.asarray(nib.load(str(tmp_path / "out" / "ct.nii.gz_mask.nii.gz")).dataobj).transpose(2, 1, 0)
    np.testing.assert_array_equal(labels, predict_volume(native, spacing=SPACING, affine=AFFINE, spec=spec,
                                                         run_raw=runner(session(spec.path))).labels)


def test_a_multi_class_threshold_is_a_minimum_confidence_on_the_kept_probabilities(tmp_path):
    nifti(tmp_path / "in" / "ct.nii.gz")
    spec, _ = run(model_3d(tmp_path / "m.onnx", kind="scores"), [tmp_path / "in"], tmp_path / "out",
                  save=("scores",))
    probabilities = np.asarray(nib.load(str(tmp_path / "out" / "ct.nii.gz_scores.nii.gz")).dataobj)
    plain = np.asarray(nib.load(str(tmp_path / "out" / "ct.nii.gz_mask.nii.gz")).dataobj)
    plan = plan_run(spec, [tmp_path / "in"], out=tmp_path / "sure", threshold=0.6, min_confidence=0.6)
    run_folder(plan, LocalRunner(open_session(spec, "cpu")))
    labels = np.asarray(nib.load(str(tmp_path / "sure" / "ct.nii.gz_mask.nii.gz")).dataobj)
    unsure = probabilities.max(axis=3) < 0.6
    assert 0 < unsure.sum() < unsure.size
    np.testing.assert_array_equal(labels, np.where(unsure, 0, plain))


def test_the_patch_count_and_the_model_grid_are_logged_before_the_run(tmp_path, caplog):
    """A small `input.spacing` makes a small volume a large grid (a sidecar's typo ran for minutes): the run's
    size is in the log before the first patch, without the file's name."""
    import logging

    nifti(tmp_path / "in" / "ct.nii.gz")
    model = model_3d(tmp_path / "m.onnx", "input:\n  patch: [8, 16, 16]\n  spacing: [0.5, 0.5, 0.5]\n")
    with caplog.at_level(logging.INFO, logger="app.runs.folder.volume3d"):
        run(model, [tmp_path / "in"], tmp_path / "out")
    [line] = [r.getMessage() for r in caplog.records if r.name == "app.runs.folder.volume3d"]
    # 12 × 3 / 0.5 = 72, 18 × 1.1 / 0.5 → 40, 22 × 0.9 / 0.5 → 40; windows 17 × 4 × 4 at half-patch steps
    assert line == ("3D model m.onnx: 272 patches of 8×16×16 voxels on its 72×40×40 grid at 0.5 × 0.5 × 0.5 mm "
                    "(the volume: 12×18×22 voxels at 3 × 1.1 × 0.9 mm)")
    assert "ct.nii" not in line
