"""The probability heatmap: a fixed 0–1 scale through the viridis table, never stretched per image."""

from __future__ import annotations

import numpy as np

from app.io.render import HEATMAP_LUT, heatmap


def test_the_table_is_viridis():
    assert HEATMAP_LUT.shape == (256, 3) and HEATMAP_LUT.dtype == np.uint8
    # matplotlib's published ends and midpoint (#440154, #21918c, #fde725) and two entries between anchors
    assert HEATMAP_LUT[0].tolist() == [68, 1, 84]
    assert HEATMAP_LUT[128].tolist() == [33, 145, 140]
    assert HEATMAP_LUT[255].tolist() == [253, 231, 37]
    np.testing.assert_allclose(HEATMAP_LUT[100], [0.166617 * 255, 0.463708 * 255, 0.558119 * 255], atol=2)
    np.testing.assert_allclose(HEATMAP_LUT[200], [0.440137 * 255, 0.811138 * 255, 0.340967 * 255], atol=2)
    assert (np.diff(HEATMAP_LUT.astype(int).sum(axis=1)) >= -2).all()  # brighter as p grows (near enough)


def test_known_probabilities_take_their_entry():
    probability = np.array([[0.0, 0.5, 1.0]], np.float32)
    picture = heatmap(probability)
    assert picture.shape == (1, 3, 3) and picture.dtype == np.uint8
    assert picture[0].tolist() == [HEATMAP_LUT[0].tolist(), HEATMAP_LUT[128].tolist(), HEATMAP_LUT[255].tolist()]


def test_a_gradient_is_never_stretched():
    ramp = np.tile(np.linspace(0.2, 0.6, 101, dtype=np.float32), (4, 1))  # not 0–1: must not be normalised
    picture = heatmap(ramp)
    np.testing.assert_array_equal(picture, HEATMAP_LUT[np.rint(ramp * 255).astype(int)])
    assert heatmap(ramp * 0.5)[0, -1].tolist() == HEATMAP_LUT[round(0.3 * 255)].tolist()


def test_uint8_levels_and_out_of_range_values():
    levels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    np.testing.assert_array_equal(heatmap(levels).reshape(256, 3), HEATMAP_LUT)
    assert heatmap(np.array([[-0.5, 1.5]])).reshape(2, 3).tolist() == [HEATMAP_LUT[0].tolist(),
                                                                        HEATMAP_LUT[255].tolist()]
