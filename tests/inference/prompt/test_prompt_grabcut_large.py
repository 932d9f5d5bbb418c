"""grabCut on a big box works on its surroundings shrunk to WORK_SIDE pixels a side (a 1300² box took ~10 s at
full size, the Smart tool's fallback froze the proposal that long); the mask still follows the object at full
resolution, and nothing outside the box is ever foreground."""

from __future__ import annotations

import numpy as np

from app.inference.prompt.grabcut import WORK_SIDE, GrabCutSession
from app.inference.prompt.request import Box, Point


def scene(side: int = 1600) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[:side, :side]
    disc = (xx - 800) ** 2 + (yy - 780) ** 2 <= 520**2
    noise = np.random.default_rng(3).normal(0, 8, (side, side))
    image = np.clip(np.where(disc, 170, 60) + noise, 0, 255).astype(np.uint8)
    return np.repeat(image[:, :, None], 3, axis=2), disc


def test_a_big_box_follows_the_object_at_full_resolution():
    image, disc = scene()
    session = GrabCutSession()
    box = Box(230, 210, 1370, 1350)
    assert max(box.x1 - box.x0, box.y1 - box.y0) > 2 * WORK_SIDE  # worked on shrunk
    proposal = session.decode(session.embed(image), box=box)
    mask = proposal.mask
    assert mask.shape == disc.shape
    assert (mask & disc).sum() / (mask | disc).sum() > 0.97
    inside = np.zeros_like(disc)
    inside[210:1350, 230:1370] = True
    assert not mask[~inside].any()


def test_seeds_still_count_when_shrunk():
    image, _ = scene()
    session = GrabCutSession()
    embedding = session.embed(image)
    box = Box(230, 210, 1370, 1350)
    cut = session.decode(embedding, [Point(800, 780, 0)], box=box).mask  # sure background in the middle
    assert not cut[775:786, 795:806].any() and cut[600, 800]
