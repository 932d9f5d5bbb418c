"""grabCut on a picture smaller than the box and its 16 px margin (issue 28): when the margin reached every edge,
the crop grabCut worked on was the mask itself (np.ascontiguousarray of a whole contiguous array is no copy), so
clearing the mask before pasting the crop back cleared the answer: every such box gave an empty mask."""

from __future__ import annotations

import numpy as np

from app.inference.prompt.grabcut import GrabCutSession
from app.inference.prompt.model import Box


def test_a_box_whose_margin_covers_the_whole_picture() -> None:
    yy, xx = np.mgrid[:48, :48]
    disc = (yy - 24) ** 2 + (xx - 24) ** 2 <= 7.5**2
    image = np.clip(np.where(disc, 200, 40) + np.random.default_rng(0).normal(0, 8, disc.shape), 0, 255)
    grabcut = GrabCutSession()
    mask = grabcut.decode(grabcut.embed(image.astype(np.uint8)), box=Box(14, 14, 35, 35)).mask
    assert (mask & disc).sum() / (mask | disc).sum() >= 0.9
