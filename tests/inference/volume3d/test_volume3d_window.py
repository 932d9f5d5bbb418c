"""The 3D sliding window (app.inference.volume3d.window): MONAI's window positions and weights, the blend equal to a
whole-volume run where the model's answer does not depend on the patches, padding, batches, mirroring TTA,
progress and cancellation."""

from __future__ import annotations

import numpy as np
import pytest
from volume3d_models import box_sigmoid, pointwise, runner, session, shift_w, smooth_volume

from app.errors import InferenceError
from app.inference.image.pipeline import Stopped
from app.inference.model.spec import Tile3D
from app.inference.volume3d.window import (
    gaussian_importance,
    mirror_passes,
    patch_count,
    sliding_window,
    window_grid,
    window_starts,
)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models3d")
    return {"pointwise": session(pointwise(folder / "pointwise.onnx")),
            "box": session(box_sigmoid(folder / "box.onnx", classes=2)),
            "shift": session(shift_w(folder / "shift.onnx"))}


def whole(sess, image: np.ndarray) -> np.ndarray:
    return runner(sess)(image[None])[0]


def test_window_starts_follow_monai():
    # step int(patch × (1 − overlap)), the last window shifted back inside
    assert window_starts(100, 32, 0.5) == [0, 16, 32, 48, 64, 68]
    assert window_starts(64, 32, 0.5) == [0, 16, 32]
    assert window_starts(40, 32, 0.25) == [0, 8]  # int(32 × 0.75) = 24 > 40 − 32: shifted to 8
    assert window_starts(32, 32, 0.5) == [0]  # the patch equals the volume: one window
    assert window_starts(10, 32, 0.5) == [0]  # smaller: one window over the padded volume
    assert window_starts(5, 3, 0.9) == [0, 1, 2]  # int(0.3) = 0 → a step of 1
    assert window_starts(7, 3, 0.0) == [0, 3, 4]
    with pytest.raises(ValueError, match="overlap"):
        window_starts(10, 4, 1.0)


def test_window_grid_is_d_major():
    grid = window_grid((6, 4, 6), (4, 4, 4), 0.5)
    assert grid == [(0, 0, 0), (0, 0, 2), (2, 0, 0), (2, 0, 2)]


def test_gaussian_importance_is_monais_formula():
    patch = (5, 8, 12)
    weights = gaussian_importance(patch, 0.125)
    assert weights.dtype == np.float32 and weights.shape == patch
    lines = []
    for n in patch:
        x = np.arange(n) - (n - 1) / 2
        lines.append(np.exp(-(x**2) / (2 * (0.125 * n) ** 2)))
    expected = np.maximum(np.einsum("i,j,k->ijk", *lines), 1e-3)  # clamped at max(min, 1e-3)
    np.testing.assert_allclose(weights, expected, rtol=1e-5, atol=1e-7)
    assert weights.min() == pytest.approx(1e-3)
    assert weights.max() == pytest.approx(np.prod([line.max() for line in lines]), rel=1e-6)


def test_mirror_passes_are_every_combination():
    assert mirror_passes(()) == [()]
    assert mirror_passes((2, 0)) == [(), (0,), (2,), (0, 2)]
    assert len(mirror_passes((0, 1, 2))) == 8
    with pytest.raises(ValueError, match="mirror axes"):
        mirror_passes((3,))


@pytest.mark.parametrize("blend", ["gaussian", "constant"])
def test_blend_equals_whole_volume_run_for_a_pointwise_model(models, blend):
    image = smooth_volume((19, 30, 27))[None]
    tile = Tile3D(overlap=0.5, blend=blend, batch=2)
    blended = sliding_window(image, runner(models["pointwise"]), patch=(8, 16, 12), tile=tile)
    assert blended.shape == (3, 19, 30, 27) and blended.dtype == np.float32
    np.testing.assert_allclose(blended, whole(models["pointwise"], image), atol=1e-6)


def test_blend_equals_whole_volume_run_away_from_window_borders(models):
    """A 3×3×3 filter sees zero padding at a patch's edge: where no window has a voxel on its edge (other than
    the volume's own), the blend must equal the whole-volume run exactly."""
    shape, patch = (20, 26, 22), (10, 12, 12)
    image = smooth_volume(shape, seed=3)[None]
    tile = Tile3D(overlap=0.5)
    blended = sliding_window(image, runner(models["box"]), patch=patch, tile=tile)
    reference = whole(models["box"], image)
    clean = np.ones(shape, bool)
    for start in window_grid(shape, patch, tile.overlap):
        for axis in range(3):
            for edge in (start[axis], start[axis] + patch[axis] - 1):
                if 0 < edge < shape[axis] - 1:  # a window's edge inside the volume
                    region = [slice(s, s + p) for s, p in zip(start, patch, strict=True)]
                    region[axis] = slice(edge, edge + 1)
                    clean[tuple(region)] = False
    assert clean.mean() > 0.2
    np.testing.assert_allclose(blended[:, clean], reference[:, clean], atol=1e-6)
    assert np.abs(blended - reference).max() > 1e-4  # the edges do differ: the mask above is needed


def test_volume_smaller_than_a_patch_is_padded_and_cropped(models):
    image = smooth_volume((5, 7, 9), seed=1)[None]
    seen = []

    def run(batch):
        seen.append(batch.shape)
        return runner(models["pointwise"])(batch)

    blended = sliding_window(image, run, patch=(8, 16, 16), tile=Tile3D())
    assert seen == [(1, 1, 8, 16, 16)]
    assert blended.shape == (3, 5, 7, 9)
    np.testing.assert_allclose(blended, whole(models["pointwise"], image), atol=1e-6)


def test_batches_give_the_same_blend(models):
    image = smooth_volume((18, 20, 20), seed=2)[None]
    run = runner(models["box"])
    one = sliding_window(image, run, patch=(8, 8, 8), tile=Tile3D(batch=1))
    five = sliding_window(image, run, patch=(8, 8, 8), tile=Tile3D(batch=5))
    np.testing.assert_allclose(one, five, atol=1e-6)


def test_tta_on_a_symmetric_kernel_equals_no_tta(models):
    image = smooth_volume((16, 18, 20), seed=4)[None]
    run = runner(models["box"])
    calls = []
    plain = sliding_window(image, run, patch=(8, 12, 12), tile=Tile3D())
    mirrored = sliding_window(image, run, patch=(8, 12, 12), tile=Tile3D(), mirror_axes=(0, 1, 2),
                              progress=lambda done, total: calls.append((done, total)))
    np.testing.assert_allclose(mirrored, plain, atol=1e-6)
    windows = len(window_grid((16, 18, 20), (8, 12, 12), 0.5))
    assert calls[-1] == (8 * windows, 8 * windows)
    assert len(calls) == 8 * windows


def test_tta_flips_each_prediction_back(models):
    """The shift model reads the next column; its W-mirrored pass, flipped back, reads the previous one: the
    average of both is what TTA over W must give."""
    image = smooth_volume((6, 7, 12), seed=5)[None]
    mirrored = sliding_window(image, runner(models["shift"]), patch=(6, 7, 12), tile=Tile3D(), mirror_axes=(2,))
    x = image[0]
    expected = np.zeros_like(x)
    expected[:, :, 1:-1] = (x[:, :, 2:] + x[:, :, :-2]) / 2
    expected[:, :, 0], expected[:, :, -1] = x[:, :, 1] / 2, x[:, :, -2] / 2
    np.testing.assert_allclose(mirrored[0], expected, atol=1e-6)


def test_progress_counts_patches_and_stop_ends_between_batches(models):
    image = smooth_volume((16, 16, 16), seed=6)[None]
    tile = Tile3D(batch=2)
    total = patch_count((16, 16, 16), (8, 8, 8), tile)
    assert total == 27
    calls, runs = [], []

    def run(batch):
        runs.append(len(batch))
        return runner(models["pointwise"])(batch)

    with pytest.raises(Stopped, match="stopped after 4 of 27 patches"):
        sliding_window(image, run, patch=(8, 8, 8), tile=tile, progress=lambda d, t: calls.append((d, t)),
                       should_stop=lambda: len(runs) >= 2)
    assert runs == [2, 2] and calls == [(2, 27), (4, 27)]


def test_an_output_of_another_size_is_refused_in_one_line():
    image = np.zeros((1, 8, 8, 8), np.float32)
    with pytest.raises(InferenceError, match=r"expected \[1, K, 4, 4, 4\]") as caught:
        sliding_window(image, lambda batch: np.zeros((1, 1, 2, 2, 2), np.float32), patch=(4, 4, 4), tile=Tile3D())
    assert "\n" not in str(caught.value)
