"""Postprocessing maths on tiny arrays: argmax, exact smooth upsampling, cleaning, top-k."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from app.inference.image.postprocess import (
    _scores_to_mask,
    argmax_planes,
    close_classes,
    drop_small_components,
)


def test_argmax_planes_matches_numpy_including_ties():
    rng = np.random.default_rng(1)
    planes = rng.integers(0, 4, size=(5, 40, 30)).astype(np.float32)  # many ties
    np.testing.assert_array_equal(argmax_planes(planes), planes.argmax(axis=0))


def test_smooth_upsampling_equals_full_bilinear_argmax():
    rng = np.random.default_rng(2)
    small = cv2.GaussianBlur(rng.standard_normal((4, 30, 40)).astype(np.float32).transpose(1, 2, 0), (7, 7), 2)
    planes = np.ascontiguousarray(small.transpose(2, 0, 1))
    image_hw = (97, 131)
    full = np.stack([cv2.resize(p, image_hw[::-1], interpolation=cv2.INTER_LINEAR) for p in planes])
    mask = _scores_to_mask(planes, image_hw)
    assert mask.shape == image_hw
    agreement = (mask == full.argmax(axis=0)).mean()
    assert agreement > 0.999  # exact up to float rounding at perfect ties
    nearest = cv2.resize(planes.argmax(0).astype(np.uint8), image_hw[::-1], interpolation=cv2.INTER_NEAREST)
    assert (nearest != full.argmax(axis=0)).sum() > 50  # and nearest alone would have been visibly worse


def test_drop_small_components_removes_only_small_ones():
    mask = np.zeros((40, 40), np.uint8)
    mask[2:4, 2:4] = 1  # 4 px
    mask[10:20, 10:20] = 1  # 100 px
    mask[30:33, 30:33] = 2  # 9 px of another class
    cleaned = drop_small_components(mask, 10)
    assert cleaned[2:4, 2:4].max() == 0 and cleaned[30:33, 30:33].max() == 0
    assert (cleaned[10:20, 10:20] == 1).all()


@pytest.mark.parametrize("seed", range(6))
def test_drop_small_components_matches_labelling_the_whole_plane(seed):
    """Labelling inside each class's bounding box removes exactly what whole-image labelling removes."""
    rng = np.random.default_rng(seed)
    h, w = rng.integers(20, 300, 2)
    mask = np.zeros((h, w), np.uint8)
    for _ in range(int(rng.integers(1, 25))):  # blobs and specks of 1-3 classes, some touching
        y, x = rng.integers(0, h), rng.integers(0, w)
        size = int(rng.choice([1, 2, 3, 8, 15]))
        mask[y : y + size, x : x + int(rng.integers(1, 2 * size + 1))] = rng.integers(1, 4)
    min_area = int(rng.choice([2, 5, 20, 60]))
    expected = mask.copy()
    for label in range(1, 4):
        _, comps, stats, _ = cv2.connectedComponentsWithStats((mask == label).astype(np.uint8), 8)
        expected[np.isin(comps, np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] < min_area) + 1)] = 0
    np.testing.assert_array_equal(drop_small_components(mask, min_area), expected)


def test_close_fills_gaps_but_never_overwrites_another_class():
    mask = np.zeros((30, 30), np.uint8)
    mask[10:20, 5:14] = 1
    mask[10:20, 15:25] = 1  # a 1-px gap at column 14
    mask[5, 5] = 2
    closed = close_classes(mask, 5)
    assert (closed[12:18, 14] == 1).all()
    assert closed[5, 5] == 2


def test_speckled_scores_take_the_dense_path_with_the_same_answer():
    rng = np.random.default_rng(3)
    planes = rng.standard_normal((3, 20, 30)).astype(np.float32)  # noise: edges everywhere
    image_hw = (50, 70)
    full = np.stack([cv2.resize(p, image_hw[::-1], interpolation=cv2.INTER_LINEAR) for p in planes])
    assert (_scores_to_mask(planes, image_hw) == full.argmax(axis=0)).mean() > 0.999


def test_argmax_of_a_single_pixel_is_uint8():  # OpenCV reads a Python scalar as a 1×1 matrix
    planes = np.array([[[0.1]], [[0.9]], [[0.5]]], np.float32)
    labels = argmax_planes(planes)
    assert labels.dtype == np.uint8 and labels.tolist() == [[1]]
