"""A 3D model's session: it warms up on one patch-sized 5-D tensor, runs 5-D tensors (IO binding too), refuses a
tensor of another rank in one line, and keeps its scores for the patches to blend (no fused ArgMax)."""

from __future__ import annotations

import numpy as np
import pytest
from spec3d_models import DYNAMIC, FIXED, labels3d, scores3d, with_sidecar

from app.errors import InferenceError
from app.inference.model.builder import load_spec
from app.inference.model.runtime_options import RuntimeOptions
from app.inference.runtime.session import open_session


@pytest.mark.parametrize("fixed", [True, False])
def test_a_3d_session_warms_up_on_one_patch_and_runs_5d_tensors(tmp_path, fixed):
    path = scores3d(tmp_path / "run.onnx", shape=FIXED if fixed else DYNAMIC)
    if not fixed:
        with_sidecar(path, "input:\n  patch: [8, 16, 24]\n")
    model = open_session(load_spec(path), "cpu")
    patch = (16, 32, 32) if fixed else (8, 16, 24)
    assert model.warmup_tensor().shape == (1, 1, *patch) and model.info.first_run_ms > 0
    volume = np.random.default_rng(0).random((1, 1, *patch), dtype=np.float32)
    scores = model.run(volume)
    assert isinstance(scores, np.ndarray) and scores.shape == (1, 2, *patch)
    np.testing.assert_allclose(scores[0, 0], 0.5)
    np.testing.assert_allclose(scores[0, 1], volume[0, 0], rtol=1e-6)


def test_a_3d_session_refuses_a_4d_tensor_in_one_line(tmp_path):
    model = open_session(load_spec(scores3d(tmp_path / "r.onnx", shape=FIXED)), "cpu")
    with pytest.raises(InferenceError) as caught:
        model.run(np.zeros((1, 1, 32, 32), np.float32))
    assert str(caught.value) == "r.onnx: a 3D model (volumes, in patches) takes 5-D tensors, got 4-D [1, 1, 32, 32]"


def test_device_argmax_and_io_binding_leave_a_3d_models_scores_to_blend(tmp_path):
    path = scores3d(tmp_path / "io.onnx", shape=FIXED)
    model = open_session(load_spec(path), "cpu", runtime=RuntimeOptions(device_argmax="on", io_binding="on"))
    assert model.spec.output.kind == "scores" and model.uses_io_binding  # patches blend scores: no fused ArgMax
    volume = np.full((1, 1, 16, 32, 32), 0.75, np.float32)
    scores = model.run(volume)
    assert isinstance(scores, np.ndarray) and scores.shape == (1, 2, 16, 32, 32)
    np.testing.assert_allclose(scores[0, 1], 0.75)


def test_a_label_volume_model_runs(tmp_path):
    model = open_session(load_spec(labels3d(tmp_path / "l.onnx", shape=FIXED, classes=3)), "cpu")
    volume = np.zeros((1, 1, 16, 32, 32), np.float32)
    volume[0, 0, :8] = 1.0  # class 2 scores 2·x = 2 > class 1's x = 1 > 0.5
    labels = model.run(volume)
    assert isinstance(labels, np.ndarray) and labels.shape == (1, 16, 32, 32)
    assert (labels[0, :8] == 2).all() and (labels[0, 8:] == 0).all()
