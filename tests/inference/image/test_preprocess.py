"""Preprocessing: normalisation values, padding, letterbox geometry, colour order, layout."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

from app.inference.image.preprocess import preprocess
from app.inference.model.spec import InputSpec

BASE = InputSpec(name="x", layout="NCHW", channels=3, dtype="float32", model_hw=(None, None), size=None,
                 resize="stretch", size_divisor=1, color="rgb", scale=1 / 255, mean=(0.0,) * 3, std=(1.0,) * 3)


def spec(**changes) -> InputSpec:
    return dataclasses.replace(BASE, **changes)


def test_normalisation_per_channel():
    image = np.full((4, 6, 3), (10, 100, 250), np.uint8)
    tensor, _ = preprocess(spec(scale=1.0, mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375)), image)
    assert tensor.shape == (1, 3, 4, 6) and tensor.dtype == np.float32
    expected = (np.array([10, 100, 250]) - [123.675, 116.28, 103.53]) / [58.395, 57.12, 57.375]
    np.testing.assert_allclose(tensor[0, :, 0, 0], expected, rtol=1e-6)


def test_divisor_padding_is_bottom_right_zero_pixels():
    image = np.full((37, 53, 3), 255, np.uint8)
    tensor, geometry = preprocess(spec(size_divisor=32, mean=(0.5,) * 3), image)
    assert tensor.shape == (1, 3, 64, 64)
    assert geometry.content_hw == (37, 53) and geometry.tensor_hw == (64, 64)
    assert tensor[0, 0, 36, 52] == pytest.approx(0.5) and tensor[0, 0, 37, 0] == pytest.approx(-0.5)


def test_letterbox_keeps_aspect():
    image = np.zeros((100, 400, 3), np.uint8)
    _, geometry = preprocess(spec(size=(128, 128), resize="letterbox"), image)
    assert geometry.content_hw == (32, 128) and geometry.tensor_hw == (128, 128)


def test_stretch_fills_the_size():
    _, geometry = preprocess(spec(size=(64, 96)), np.zeros((100, 400, 3), np.uint8))
    assert geometry.content_hw == (64, 96) == geometry.tensor_hw


def test_bgr_swaps_channels_and_nhwc_keeps_channels_last():
    image = np.zeros((2, 2, 3), np.uint8)
    image[..., 0] = 255
    tensor, _ = preprocess(spec(color="bgr", layout="NHWC"), image)
    assert tensor.shape == (1, 2, 2, 3)
    np.testing.assert_allclose(tensor[0, 0, 0], [0, 0, 1])


def test_gray_model_and_float16():
    image = np.zeros((8, 8, 3), np.uint8)
    image[..., 1] = 255
    tensor, _ = preprocess(spec(channels=1, color="gray", dtype="float16", mean=(0.0,), std=(1.0,)), image)
    assert tensor.shape == (1, 1, 8, 8) and tensor.dtype == np.float16
    assert float(tensor[0, 0, 0, 0]) == pytest.approx(150 / 255, abs=2e-3)  # BT.601 green weight


def test_uint8_model_gets_pixels_unchanged():
    image = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    tensor, _ = preprocess(spec(dtype="uint8"), image)
    np.testing.assert_array_equal(tensor[0].transpose(1, 2, 0), image)


@pytest.mark.parametrize("color, channels", [("rgb", 3), ("bgr", 3), ("gray", 1)])
def test_nchw_float_planes_equal_lookup_then_transpose(color, channels):
    """The plane-by-plane NCHW path gives exactly the values of normalising HWC then transposing."""
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (37, 53, 3), np.uint8)
    mean, std = (0.485, 0.456, 0.406)[:channels], (0.229, 0.224, 0.225)[:channels]
    s = spec(color=color, channels=channels, mean=mean, std=std, scale=1 / 255)
    tensor, _ = preprocess(s, image)
    pixels = {"rgb": image, "bgr": image[:, :, ::-1],
              "gray": cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)[:, :, None]}[color].astype(np.float64)
    expected = ((pixels / 255 - np.array(mean)) / np.array(std)).transpose(2, 0, 1)[None]
    assert tensor.shape == (1, channels, 37, 53) and tensor.dtype == np.float32 and tensor.flags.c_contiguous
    np.testing.assert_allclose(tensor, expected, rtol=0, atol=1e-5)
