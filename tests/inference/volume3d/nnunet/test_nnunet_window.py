"""nnU-Net's window over logits with mirroring: the passes of a window batched by the patch's size (all at once for
a small patch, one by one for a full-size network's) give the same blend, each pass flipped back."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.volume3d.nnunet import window
from app.inference.volume3d.nnunet.window import mirror_combinations, pass_batch, window_logits


class PositionNet:
    """A fake network that is not flip-equivariant: logits = the input and the input plus a ramp along each axis,
    so a pass not flipped back would change the blend. Counts its runs and their batch sizes."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.batches.append(batch.shape[0])
        d, h, w = batch.shape[2:]
        ramp = (np.arange(d)[:, None, None] * 100 + np.arange(h)[None, :, None] * 10
                + np.arange(w)[None, None, :]).astype(np.float32)
        return np.concatenate([batch[:, :1], batch[:, :1] + ramp], axis=1)


def test_a_small_patch_runs_all_passes_at_once_and_a_full_size_one_pass_at_a_time():
    assert pass_batch((28, 64, 64), 8) == 8
    assert pass_batch((80, 160, 160), 8) == 1
    assert pass_batch((64, 128, 128), 8) == 1
    assert pass_batch((1, 512, 512), 4) == 4


@pytest.mark.parametrize("limit", [1, 3, 1 << 20])
def test_batching_the_passes_does_not_change_the_blend(monkeypatch, limit):
    image = np.random.default_rng(0).normal(size=(1, 11, 14, 12)).astype(np.float32)
    patch, axes = (8, 8, 8), (0, 1, 2)
    expected_net = PositionNet()
    monkeypatch.setattr(window, "BATCH_VOXELS", 1 << 20)
    expected = window_logits(image, expected_net, patch=patch, step=0.5, mirror_axes=axes)
    monkeypatch.setattr(window, "BATCH_VOXELS", limit * 512)
    net = PositionNet()
    got = window_logits(image, net, patch=patch, step=0.5, mirror_axes=axes)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)
    passes = len(mirror_combinations(axes))
    assert sum(net.batches) == sum(expected_net.batches) == 12 * passes  # 2 × 3 × 2 windows
    assert max(net.batches) == min(limit, passes)
    # each pass flipped back: the ramp averaged with its mirror images is its mean along every axis, in every window
    np.testing.assert_allclose(got[1] - got[0], 3.5 * (100 + 10 + 1), atol=1e-3)
