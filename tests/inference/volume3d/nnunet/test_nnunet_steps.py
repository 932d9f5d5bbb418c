"""nnU-Net's preprocessing and window steps, in numpy, against the libraries nnU-Net calls (scipy here; nnU-Net's
own functions in tests/runs/imports/test_nnunet_parity.py through its saved predictions): spline resizing equal to
scipy's zoom (skimage's resize), the holes filled as binary_fill_holes, the Gaussian as gaussian_filter of an impulse,
and its window steps."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.model.nnunet_recipe import Resampling
from app.inference.volume3d.nnunet.crop import fill_holes, nonzero_crop
from app.inference.volume3d.nnunet.resample import new_shape, resample_channels, separate_axis
from app.inference.volume3d.nnunet.spline import prefilter, resize
from app.inference.volume3d.nnunet.window import gaussian_map, window_steps

ndimage = pytest.importorskip("scipy.ndimage")


def skimage_resize(image: np.ndarray, shape: tuple[int, ...], order: int) -> np.ndarray:
    """scikit-image's resize(mode="edge", anti_aliasing=False): scipy's zoom on the grid, clipped to the input."""
    zoom = [n / o for n, o in zip(shape, image.shape, strict=True)]
    out = ndimage.zoom(image.astype(np.float64), zoom, order=order, mode="nearest", grid_mode=True)
    return np.clip(out, image.min(), image.max()) if order > 1 else out


@pytest.mark.parametrize("n", [2, 3, 7, 40, 200])
def test_the_prefilter_is_scipys_cubic_spline_filter(n):
    x = np.random.default_rng(n).normal(size=(n, 3))
    np.testing.assert_allclose(prefilter(x), ndimage.spline_filter1d(x, 3, axis=0, mode="mirror"), atol=1e-12)


@pytest.mark.parametrize("order", [0, 1, 3])
@pytest.mark.parametrize("shape", [(9, 20, 7), (3, 26, 22), (14, 5, 30), (7, 13, 11)])
def test_resize_equals_scipy_zoom_on_the_grid(order, shape):
    image = np.random.default_rng(1).normal(size=(7, 13, 11))
    np.testing.assert_allclose(resize(image, shape, order), skimage_resize(image, shape, order), atol=1e-10)


def test_an_anisotropic_volume_is_resampled_in_plane_then_nearest_along_its_thick_axis():
    spacing, target = (3.6, 0.7, 0.9), (2.99, 0.83, 0.81)
    rule = Resampling(order=3, order_z=0)
    assert separate_axis(rule, spacing, target) == 0
    assert separate_axis(Resampling(force_separate_z=False), spacing, target) is None
    assert separate_axis(rule, (1.0, 1.0, 1.0), (1.5, 1.5, 1.5)) is None
    data = np.random.default_rng(2).normal(size=(1, 20, 30, 28)).astype(np.float32)
    shape = new_shape(data.shape[1:], spacing, target)
    assert shape == (24, 25, 31)
    out = resample_channels(data, shape, spacing, target, rule)
    planes = np.stack([skimage_resize(data[0, k], shape[1:], 3) for k in range(20)])
    nearest = np.clip(np.floor((np.arange(24) + 0.5) * 20 / 24 - 0.5 + 0.5).astype(int), 0, 19)
    np.testing.assert_allclose(out[0], planes[nearest], atol=1e-5)


def test_holes_are_filled_as_binary_fill_holes():
    rng = np.random.default_rng(3)
    for _ in range(25):
        mask = rng.random((rng.integers(1, 10), rng.integers(1, 14), rng.integers(1, 14))) < rng.uniform(0.4, 0.9)
        assert np.array_equal(fill_holes(mask), ndimage.binary_fill_holes(mask))


def test_the_crop_is_the_box_of_the_nonzero_voxels_with_holes_inside_it():
    volume = np.zeros((2, 12, 20, 22), np.float32)
    volume[0, 3:9, 2:17, 5:20] = 5.0
    volume[1, 2, 10, 10] = 1.0  # another channel's voxel widens the box
    volume[0, 5, 6:8, 8:10] = 0.0  # a hole: inside the mask
    crop = nonzero_crop(volume)
    assert crop.box == (slice(2, 9), slice(2, 17), slice(5, 20))
    assert crop.mask[5 - 2, 6 - 2, 8 - 5] and not crop.mask[0, 0, 0]


def test_the_gaussian_is_an_impulse_blurred_with_a_sigma_of_an_eighth():
    for patch in [(28, 64, 64), (5, 7, 9)]:
        impulse = np.zeros(patch)
        impulse[tuple(side // 2 for side in patch)] = 1.0
        blurred = ndimage.gaussian_filter(impulse, [side / 8 for side in patch], 0, mode="constant", cval=0)
        blurred = blurred / (blurred.max() / 10)
        blurred[blurred == 0] = blurred[blurred > 0].min()
        np.testing.assert_allclose(gaussian_map(patch), blurred, rtol=1e-6)


def test_window_steps_spread_evenly_and_a_slice_patch_visits_every_slice():
    assert window_steps(110, 64, 0.5) == [0, 23, 46]
    assert window_steps(64, 64, 0.5) == [0]
    assert window_steps(100, 28, 0.5) == [0, 12, 24, 36, 48, 60, 72]
    assert window_steps(5, 1, 0.5) == [0, 1, 2, 3, 4]
