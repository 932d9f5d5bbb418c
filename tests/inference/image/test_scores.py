"""Kept scores: float16 probabilities next to the mask, and masks decided anew from them without a model run."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import expected_stripes, stripes

from app.inference.image.pipeline import probability_at_image_size, relabel, run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session


def gradient(height: int = 4, width: int = 256) -> np.ndarray:
    """Gray ramp: column x has value x (every 8-bit value once per row)."""
    return np.tile(np.arange(width, dtype=np.uint8), (height, 1))


def sigmoid_of_ramp(image: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-20 * (image / 255 - 0.5)))  # binary_logits: logit = 20 (x/255 − 0.5)


def session(path):
    return open_session(load_spec(path), "cpu")


def test_binary_scores_are_float16_probabilities_at_the_working_size(models):
    image = gradient()
    result = run_image(session(models("binary_logits")), image)
    assert result.scores.dtype == np.float16 and result.scores.shape == (1, 4, 256)
    np.testing.assert_allclose(result.scores[0], sigmoid_of_ramp(image), atol=1e-3)
    assert result.image_score == pytest.approx(sigmoid_of_ramp(np.uint8(255)), abs=1e-3)
    assert probability_at_image_size(result).dtype == np.float32


def test_relabel_changes_the_threshold_exactly_without_running_the_model(models, model_runs):
    model = session(models("binary_logits"))
    image = gradient()
    result = run_image(model, image)
    runs_before = len(model_runs)
    np.testing.assert_array_equal(relabel(result, spec=model.spec).mask, result.mask)  # 0.5: x ≥ 128 both ways
    stricter = relabel(result, spec=model.spec, threshold=0.9).mask
    # sigmoid(20 (x/255 − 0.5)) ≥ 0.9  ⇔  x ≥ 155.6: columns 156.. (p(155) = 0.896, p(156) = 0.903)
    np.testing.assert_array_equal(stricter, (image >= 156).astype(np.uint8))
    looser = relabel(result, spec=model.spec, threshold=0.1).mask
    np.testing.assert_array_equal(looser, (image >= 100).astype(np.uint8))  # p(99) = 0.097, p(100) = 0.104
    assert len(model_runs) == runs_before  # no model call for any of them
    assert result.mask.sum() == 4 * 128  # the original result is untouched


def test_relabel_keeps_clean_mask_settings(models):
    path = models("binary_logits")
    path.with_suffix(".yaml").write_text("postprocess:\n  min_area: 1000\n")
    model = session(path)
    result = run_image(model, gradient())
    assert not relabel(result, spec=model.spec, threshold=0.9).mask.any()  # 4 × 100 pixels < min_area


def test_multiclass_min_confidence_sends_unsure_pixels_to_background(models, model_runs):
    model = session(models("rgb_classes"))
    image = np.zeros((6, 8, 3), np.uint8)
    image[:, :4, 1] = 200  # sure green
    image[:, 4:, 1], image[:, 4:, 2] = 100, 90  # green, but only just
    result = run_image(model, image)
    np.testing.assert_allclose(result.scores.astype(np.float32).sum(axis=0), 1.0, atol=2e-3)
    winning = probability_at_image_size(result)
    sure, unsure = float(winning[0, 0]), float(winning[0, 7])
    assert unsure < sure
    runs_before = len(model_runs)
    np.testing.assert_array_equal(relabel(result, spec=model.spec).mask, result.mask)
    decided = relabel(result, spec=model.spec, min_confidence=(sure + unsure) / 2).mask
    expected = np.zeros((6, 8), np.uint8)
    expected[:, :4] = 1
    np.testing.assert_array_equal(decided, expected)
    assert len(model_runs) == runs_before


def test_multiclass_relabel_matches_the_pipeline_mask(models):
    model = session(models("rgb_classes"))
    result = run_image(model, stripes())
    assert result.scores.shape == (3, 37, 53) and result.image_score is None
    np.testing.assert_array_equal(relabel(result, spec=model.spec).mask, expected_stripes())
    green = np.exp(200 / 255) / (np.exp(200 / 255) + 2)  # softmax of the scores (0, 200/255, 0)
    np.testing.assert_allclose(probability_at_image_size(result, class_index=1)[:, 20], green, atol=1e-3)


def test_strided_scores_come_back_at_the_image_size(models):
    model = session(models("half_resolution_classes"))
    result = run_image(model, stripes(40, 60))
    assert result.scores.shape == (3, 32, 32)  # the whole stride-2 grid of the 64×64 tensor
    assert probability_at_image_size(result).shape == (40, 60)
    agree = (relabel(result, spec=model.spec).mask == result.mask).mean()
    assert agree > 0.95  # probabilities interpolated rather than scores: an edge pixel may differ


def test_label_outputs_and_classifiers_have_no_scores(models):
    labels = run_image(session(models("embedded_argmax")), stripes())
    assert labels.scores is None and labels.image_score is None
    assert probability_at_image_size(labels) is None
    assert relabel(labels, spec=session(models("embedded_argmax")).spec, threshold=0.3) is labels
    classified = run_image(session(models("classifier")), stripes())
    assert classified.scores is None and classified.image_score == classified.predictions[0].score
