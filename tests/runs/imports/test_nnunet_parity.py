"""An imported nnU-Net folder equals nnU-Net's own `nnUNetPredictor` on held-out volumes of other sizes and spacings:
the committed tiny folders (tests/data/nnunet, trained by nnU-Net 2.8.1's planner and trainer) and the predictor's
saved predictions, for the 3d_fullres and 2d configurations, fold 0 and the 0+1 ensemble, mirroring on and off.

Dice ≥ 0.99 per label (a label neither side predicts is left out: some one-epoch fold-0 models never predict one),
through the app's own spec, session and 3D path; the CT volumes also end to end through `seglens-cli run`.
"""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from label_agreement import dice_per_label

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.inference.volume3d.predict import predict_volume, with_tta
from app.io.nifti import nifti_volume
from app.io.stack import VolumeStack

DATA = Path(__file__).resolve().parents[2] / "data" / "nnunet"
CASES = [(dataset, configuration, folds, mirror)
         for dataset in ("Dataset901_CTPhantom", "Dataset902_MRTwo")
         for configuration in ("3d_fullres", "2d")
         for folds in ("0", "01")
         for mirror in ("mirror", "nomirror")]


def trained(dataset: str, configuration: str) -> Path:
    return DATA / dataset / f"nnUNetTrainer_1epoch__nnUNetPlansTiny__{configuration}"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Path]:
    """Each folder imported once per fold set (the CLI, as a user does)."""
    root = tmp_path_factory.mktemp("imported")
    models = {}
    for dataset in ("Dataset901_CTPhantom", "Dataset902_MRTwo"):
        for configuration in ("3d_fullres", "2d"):
            for folds in ("0", "01"):
                out = root / f"{dataset}_{configuration}_{folds}.onnx"
                assert main(["import", "nnunet", str(trained(dataset, configuration)), "--folds",
                             ",".join(folds), "--out", str(out)]) == 0
                models[dataset, configuration, folds] = out
    return models


def read_case(heldout: Path, case: str) -> tuple[np.ndarray, tuple[float, float, float], np.ndarray]:
    """A held-out case's channels [C, D, H, W] (its files `<case>_0000`, `_0001`, … as nnU-Net names them)."""
    arrays, volume = [], None
    for path in sorted(heldout.glob(f"{case}_0*.nii.gz")):
        volume = nifti_volume(path)
        stack = VolumeStack(volume)
        while not stack.complete:
            stack.step()
        arrays.append(stack.array)
    assert volume is not None and volume.spacing is not None
    return np.stack(arrays), volume.spacing, volume.affine


def reference(path: Path) -> np.ndarray:
    """nnU-Net's saved segmentation in SegLens's [slice, row, column] order."""
    return np.transpose(np.asarray(nib.load(path).dataobj), (2, 1, 0))


@pytest.mark.parametrize(("dataset", "configuration", "folds", "mirror"), CASES,
                         ids=["-".join(case) for case in CASES])
def test_the_imported_model_equals_nnunet_predictor(imported, dataset, configuration, folds, mirror):
    spec = load_spec(imported[dataset, configuration, folds])
    if mirror == "nomirror":
        spec = with_tta(spec, ())
    assert spec.volume is not None and spec.volume.nnunet is not None
    session = open_session(spec, "cpu", warm_up=False)
    predictions = DATA / dataset / "predictions" / configuration / f"folds{folds}_{mirror}"
    references = sorted(predictions.glob("*.nii.gz"))
    assert references
    for path in references:
        image, spacing, affine = read_case(DATA / dataset / "heldout", path.name.removesuffix(".nii.gz"))
        prediction = predict_volume(image, spacing=spacing, affine=affine, spec=spec, run_raw=session.run)
        theirs = reference(path)
        assert prediction.labels.shape == theirs.shape
        scores = dice_per_label(prediction.labels, theirs)
        assert scores, f"{path.name}: neither side predicts a label"
        assert min(scores.values()) >= 0.99, f"{path.name}: Dice per label {scores}"


def test_a_ct_volume_run_through_the_cli_equals_nnunet(imported, tmp_path, capsys):
    model = imported["Dataset901_CTPhantom", "3d_fullres", "01"]
    heldout = DATA / "Dataset901_CTPhantom" / "heldout"
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "heldout_001_0000.nii.gz").symlink_to(heldout / "heldout_001_0000.nii.gz")
    out = tmp_path / "out"
    assert main(["run", str(model), str(inputs), "--out", str(out), "--export", "nifti", "--tta",
                 "--device", "cpu"]) == 0, capsys.readouterr().err
    (written,) = [p for p in out.rglob("*.nii.gz") if "score" not in p.name]
    ours = reference(written)
    theirs = reference(DATA / "Dataset901_CTPhantom" / "predictions" / "3d_fullres" / "folds01_mirror" /
                       "heldout_001.nii.gz")
    scores = dice_per_label(ours, theirs)
    assert set(scores) == {1, 2} and min(scores.values()) >= 0.99, scores


def test_no_tile_is_refused_in_one_line_for_an_imported_model(imported, tmp_path, capsys):
    model = imported["Dataset901_CTPhantom", "3d_fullres", "0"]
    volume = DATA / "Dataset901_CTPhantom" / "heldout" / "heldout_002_0000.nii.gz"
    assert main(["run", str(model), str(volume), "--out", str(tmp_path / "o"), "--no-tile", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--no-tile does not apply to a model imported from nnU-Net" in err[0]
