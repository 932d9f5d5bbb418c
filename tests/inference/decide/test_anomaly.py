"""Anomaly-detection models (anomalib-style exports): detected by output names, else by shapes; the map is the
heatmap and, at `output.threshold`, the mask; the score output is the image score, NG at `output.image_threshold`
by default."""

from __future__ import annotations

import numpy as np
import pytest

from app.errors import SidecarError
from app.inference.decide.verdict import verdict_of
from app.inference.describe.info import spec_dict, spec_text
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session

# 1/256: a pixel of 128 is exactly 0.5 on the map, 127 just below
EXACT = "input:\n  scale: 0.00390625\n"


def _model(models, kind: str, sidecar: str = EXACT, **kwargs):
    path = models(kind, **kwargs)
    path.with_suffix(".yaml").write_text(sidecar)
    return path


def _run(path, image):
    spec = load_spec(path)
    return spec, run_image(open_session(spec, "cpu"), image)


def test_detected_by_anomalib_names(models):
    spec = load_spec(_model(models, "anomaly_named", with_mask=True))
    out = spec.output
    assert (out.kind, out.name, out.score_name, out.mask_name) == ("anomaly", "anomaly_map", "pred_score", "pred_mask")
    assert (out.threshold, out.image_threshold, out.activation) == (0.5, 0.5, "none")
    assert spec.task == "segmentation" and spec.class_names == ("background", "anomaly")
    assert spec.sources["verdict"] == "default" and spec.verdict[0].as_dict() == {"score_at_least": 0.5}


def test_detected_by_shape(models):
    spec = load_spec(_model(models, "anomaly_by_shape"))
    assert (spec.output.kind, spec.output.name, spec.output.score_name, spec.output.mask_name) == (
        "anomaly", "heat", "score", None)


def test_single_output_model_is_unaffected(models):
    spec = load_spec(models("binary_logits"))
    out = spec.output
    assert (out.kind, out.score_name, out.mask_name, out.image_threshold) == ("binary", None, None, None)
    assert out.fetched == ("logits",) and spec.verdict is None


@pytest.mark.parametrize("kind", ["anomaly_named", "anomaly_by_shape"])
def test_mask_and_heatmap_at_the_pixel_threshold(models, kind):
    image = np.zeros((6, 8), np.uint8)
    image[:, 4] = 127  # 0.496: below
    image[:, 5] = 128  # 0.5: at the threshold, anomalous
    image[:, 6] = 255  # ~1.0
    _, result = _run(_model(models, kind), image)
    expected = np.zeros((6, 8), np.uint8)
    expected[:, 5:7] = 1
    np.testing.assert_array_equal(result.mask, expected)
    assert result.scores.dtype == np.float16 and result.scores.shape == (1, 6, 8)
    assert float(result.scores[0, 0, 5]) == 0.5 and float(result.scores.max()) <= 1.0


def test_exported_pred_mask_is_used(models):
    image = np.zeros((4, 4), np.uint8)
    image[0, 0], image[1, 1] = 128, 250  # map 0.5 and 0.98: the model's own mask (> 0.75) keeps only the second
    _, result = _run(_model(models, "anomaly_named", with_mask=True), image)
    assert result.mask.sum() == 1 and result.mask[1, 1] == 1


@pytest.mark.parametrize(("peak", "ng"), [(127, False), (128, True)])
def test_image_score_and_default_verdict_at_the_image_threshold(models, peak, ng):
    image = np.zeros((5, 5), np.uint8)
    image[2, 2] = peak
    spec, result = _run(_model(models, "anomaly_named"), image)
    assert result.image_score == pytest.approx(peak / 256)
    verdict = verdict_of(spec, result)
    assert verdict.ok is not ng
    assert verdict.reason == ("score 0.5 >= 0.5" if ng else "")


def test_sidecar_thresholds(models):
    sidecar = EXACT + "output:\n  threshold: 0.75\n  image_threshold: 0.9\n"
    spec = load_spec(_model(models, "anomaly_named", sidecar=sidecar))
    assert (spec.output.threshold, spec.output.image_threshold) == (0.75, 0.9)
    assert spec.sources["output.image_threshold"] == "sidecar"
    image = np.full((3, 3), 200, np.uint8)  # 0.78: anomalous pixels, but the score is under 0.9
    spec, result = _run(_model(models, "anomaly_named", name="again", sidecar=sidecar), image)
    assert result.mask.all() and verdict_of(spec, result).ok


@pytest.mark.parametrize("value", ["1.5", "-0.1", "high"])
def test_bad_image_threshold_is_refused_naming_the_key(models, value):
    with pytest.raises(SidecarError, match="image_threshold"):
        load_spec(_model(models, "anomaly_named", sidecar=f"output:\n  image_threshold: {value}\n"))


def test_sidecar_verdict_replaces_the_default(models):
    sidecar = EXACT + "verdict:\n  fail_if:\n    - score_above: 0.9\n"
    spec = load_spec(_model(models, "anomaly_named", sidecar=sidecar))
    assert spec.sources["verdict"] == "sidecar" and spec.verdict[0].as_dict() == {"score_above": 0.9}


def test_info_shows_the_anomaly_outputs_and_thresholds(models):
    spec = load_spec(_model(models, "anomaly_named", with_mask=True))
    text = spec_text(spec, None)
    assert "anomaly map" in text and "pred_score" in text and "pred_mask" in text
    assert "image_thresh" in text and "fail if image score >= 0.5" in text
    data = spec_dict(spec, None)["output"]
    assert (data["kind"], data["score"], data["mask"], data["image_threshold"]) == (
        "anomaly", "pred_score", "pred_mask", 0.5)


def test_cli_threshold_replaces_the_pixel_threshold(models):
    from app.inference.decide.tuning import with_threshold

    spec, min_confidence = with_threshold(load_spec(_model(models, "anomaly_named")), 0.8)
    assert spec.output.threshold == 0.8 and spec.output.kind == "anomaly" and min_confidence is None
