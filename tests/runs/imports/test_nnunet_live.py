"""The imported model against nnU-Net's own `nnUNetPredictor` run here, in the test, on a volume no one saved: a CT
phantom of a size and spacing none of the committed held-out volumes has (models/training/nnunet_fixtures.py's
ct_case, another seed), through the committed 3d_fullres folder (folds 0 and 1, mirroring on).

The predictor runs in this process (`predict_single_npy_array`: its preprocessing, sliding window and export with
no worker processes), on the array and spacing SegLens is given. Dice ≥ 0.99 per label. nnunetv2 is a test-only
dependency that `.ci/run` installs: without it the module is skipped here and fails in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from label_agreement import dice_per_label

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.inference.volume3d.predict import predict_volume
from models.training.nnunet_fixtures import ct_case

FOLDER = (Path(__file__).resolve().parents[2] / "data" / "nnunet" / "Dataset901_CTPhantom"
          / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres")
SHAPE, SPACING = (27, 78, 53), (2.7, 0.72, 0.95)  # the committed held-out volumes: 20-30 × 56-72 × 60-70 voxels
SEED = 4040


def require_nnunet() -> None:
    """Skips the module where nnunetv2 (and the torch it runs on) does not import; fails in CI, which installs it."""
    try:
        import nnunetv2.inference.predict_from_raw_data  # noqa: F401
        import torch  # noqa: F401
    except (ImportError, RuntimeError) as exc:  # RuntimeError: a torchvision whose extension did not load (timm)
        message = (f"nnunetv2 does not import ({type(exc).__name__}: {exc}): install it as .ci/run does "
                   "(--no-deps, with the CPU torch)")
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must compare SegLens with nnU-Net's predictor)", pytrace=False)
        pytest.skip(message, allow_module_level=True)


require_nnunet()


def nnunet_labels(image: np.ndarray, spacing: tuple[float, float, float]) -> np.ndarray:
    """nnUNetPredictor's segmentation of a [C, D, H, W] array at `spacing` (along D, H, W), in this process."""
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    predictor = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=True,
                                perform_everything_on_device=False, device=torch.device("cpu"), allow_tqdm=False)
    predictor.initialize_from_trained_model_folder(str(FOLDER), use_folds=(0, 1),
                                                   checkpoint_name="checkpoint_final.pth")
    labels: np.ndarray = predictor.predict_single_npy_array(image, {"spacing": list(spacing)})
    return labels


def test_the_imported_model_equals_nnunet_predictor_run_here(tmp_path):
    hu, truth = ct_case(np.random.default_rng(SEED), SHAPE, SPACING)
    image = hu.astype(np.float32)[None]
    model = tmp_path / "ct.onnx"
    assert main(["import", "nnunet", str(FOLDER), "--folds", "0,1", "--out", str(model)]) == 0
    spec = load_spec(model)
    assert spec.volume is not None and spec.volume.nnunet is not None and spec.volume.tta
    session = open_session(spec, "cpu", warm_up=False)
    affine = np.diag([*SPACING[::-1], 1.0])
    ours = predict_volume(image, spacing=SPACING, affine=affine, spec=spec, run_raw=session.run).labels
    theirs = nnunet_labels(image, SPACING)
    assert ours.shape == theirs.shape == SHAPE
    scores = dice_per_label(ours, theirs)
    assert set(scores) == {1, 2}, f"labels predicted: {scores} (the phantom has {np.unique(truth).tolist()})"
    assert min(scores.values()) >= 0.99, f"Dice per label {scores}"
