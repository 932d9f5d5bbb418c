"""The whole pipeline on each output pattern: exact masks and labels at the image's own size."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import expected_stripes, stripes
from onnx_factory import class_metadata

from app.errors import InferenceError
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session


def run(path, image, sidecar_text: str | None = None):
    if sidecar_text is not None:
        path.with_suffix(".yaml").write_text(sidecar_text)
    return run_image(open_session(load_spec(path), "cpu"), image)


def test_multiclass_argmax_mask(models):
    result = run(models("rgb_classes"), stripes())
    assert result.mask.dtype == np.uint8 and result.mask.shape == (37, 53)
    np.testing.assert_array_equal(result.mask, expected_stripes())
    assert result.provider == "CPUExecutionProvider"
    assert set(result.timings) == {"decode", "preprocess", "inference", "postprocess"}


def test_class_pixel_counts(models):
    counts = run(models("rgb_classes"), stripes()).class_pixels()
    assert list(counts[:3]) == [37 * 17, 37 * 18, 37 * 18]


def gradient(height: int = 20, width: int = 50) -> np.ndarray:
    """Gray ramp: column x has value round(255 * x / (width - 1))."""
    return np.tile(np.rint(np.linspace(0, 255, width)).astype(np.uint8), (height, 1))


def test_binary_logits_get_sigmoid_and_threshold(models):
    image = gradient()
    result = run(models("binary_logits"), image)
    # logit = 20 (x/255 - 0.5) > logit(0.5) = 0  <=>  x > 127.5
    np.testing.assert_array_equal(result.mask, (image > 127.5).astype(np.uint8))


def test_binary_threshold_applies_to_probabilities(models):
    image = gradient()
    result = run(models("binary_logits"), image, "output:\n  threshold: 0.9\n")
    probability = 1 / (1 + np.exp(-20 * (image / 255 - 0.5)))
    np.testing.assert_array_equal(result.mask, (probability > 0.9).astype(np.uint8))


def test_binary_already_sigmoid_is_not_squashed_twice(models):
    image = gradient()
    result = run(models("binary_logits", end_with_sigmoid=True), image, "output:\n  threshold: 0.9\n")
    probability = 1 / (1 + np.exp(-20 * (image / 255 - 0.5)))
    # were sigmoid applied again, every pixel would be > 0.5 and none > 0.9 → all 0
    np.testing.assert_array_equal(result.mask, (probability > 0.9).astype(np.uint8))
    assert 0 < result.mask.sum() < result.mask.size


def test_embedded_argmax_labels(models):
    np.testing.assert_array_equal(run(models("embedded_argmax"), stripes()).mask, expected_stripes())


def test_classification_top_k_with_names(models):
    path = models("classifier", metadata=class_metadata(["red", "green", "blue"]))
    image = np.zeros((300, 200, 3), np.uint8)
    image[..., 1] = 180
    image[..., 0] = 60
    result = run(path, image)
    assert result.mask is None
    assert [p.name for p in result.predictions] == ["green", "red", "blue"]
    logits = np.array([60, 180, 0]) / 255 * 10
    expected = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose([p.score for p in result.predictions], np.sort(expected)[::-1], atol=1e-3)


def test_classification_already_softmax(models):
    image = np.zeros((64, 64, 3), np.uint8)
    image[..., 2] = 255
    result = run(models("classifier", end_with_softmax=True), image, "postprocess:\n  top_k: 2\n")
    assert [p.index for p in result.predictions] == [2, 0]
    assert result.predictions[0].score == pytest.approx(np.exp(10) / (np.exp(10) + 2), abs=1e-4)


def test_nhwc_input(models):
    np.testing.assert_array_equal(run(models("nhwc_classes"), stripes()).mask, expected_stripes())


def test_float16_input_and_output(models):
    np.testing.assert_array_equal(run(models("float16_classes"), stripes()).mask, expected_stripes())


def test_uint8_input_receives_raw_pixels(models):
    image = gradient()
    np.testing.assert_array_equal(run(models("uint8_binary"), image).mask, (image > 128).astype(np.uint8))


def test_fixed_size_model_mask_returns_to_image_size(models):
    image = stripes(120, 150)  # resized to 64×64 for the model, mask back at 120×150
    result = run(models("fixed_size_classes", size=64), image)
    assert result.mask.shape == (120, 150)
    expected = expected_stripes(120, 150)
    interior = np.ones_like(expected, bool)
    for edge in (50, 100):
        interior[:, edge - 3: edge + 3] = False  # the resize blurs a few pixels at each stripe edge
    np.testing.assert_array_equal(result.mask[interior], expected[interior])


def test_letterbox_geometry_is_undone(models):
    image = stripes(30, 90)  # wide image in a square 64×64 model: content 21×64, padded below
    result = run(models("fixed_size_classes", size=64), image, "input:\n  resize: letterbox\n")
    assert result.mask.shape == (30, 90)
    interior = np.ones((30, 90), bool)
    interior[:, 27:33] = interior[:, 57:63] = False
    np.testing.assert_array_equal(result.mask[interior], expected_stripes(30, 90)[interior])


def test_dynamic_model_needing_divisor_padding(models):
    path = models("needs_divisor")
    result = run(path, stripes(37, 53))  # 37×53 is not a multiple of 8: padded to 64×64, cut back
    np.testing.assert_array_equal(result.mask, expected_stripes(37, 53))


def test_without_divisor_padding_the_model_fails_with_a_clear_error(models):
    with pytest.raises(InferenceError, match="needs_divisor.onnx: inference failed"):
        run(models("needs_divisor"), stripes(37, 53), "input:\n  size_divisor: 1\n")


def test_strided_output_is_upsampled_to_image_size(models):
    result = run(models("half_resolution_classes"), stripes(40, 60))
    assert result.mask.shape == (40, 60)
    interior = np.ones((40, 60), bool)
    interior[:, 18:22] = interior[:, 38:42] = False
    np.testing.assert_array_equal(result.mask[interior], expected_stripes(40, 60)[interior])


def test_gray_image_into_rgb_model_and_rgb_into_gray_model(models):
    gray = gradient()
    assert run(models("rgb_classes"), gray).mask.shape == gray.shape
    rgb = np.dstack([gradient()] * 3)
    np.testing.assert_array_equal(run(models("binary_logits"), rgb).mask, (gray > 127.5).astype(np.uint8))
