"""Decisions fail closed as pure functions too: a non-finite score that reaches a rule (a Result not made by the
pipeline, which refuses such outputs) is NG or uncertain — never OK; the finiteness check itself."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.errors import InferenceError
from app.inference.decide.tuning import judge, score_rule
from app.inference.decide.verdict import decide, uncertainty
from app.inference.image.pipeline import STAGES, Result
from app.inference.image.postprocess import Prediction
from app.inference.model.builder import load_spec
from app.inference.runtime.finite import check_finite, non_finite

NAN, INF = float("nan"), float("inf")


def spec_with(models, kind: str, sidecar: str):
    path = models(kind)
    path.with_suffix(".yaml").write_text(sidecar)
    return load_spec(path)


def cls_result(*scores: float) -> Result:
    return Result(Path("x.png"), "classification", (8, 8), None,
                  tuple(Prediction(i, ("good", "scratch", "pit")[i], s) for i, s in enumerate(scores)),
                  dict.fromkeys(STAGES, 1.0), "CPU")


def seg_result(score: float | None) -> Result:
    return Result(Path("x.png"), "segmentation", (4, 4), np.zeros((4, 4), np.uint8), (), dict.fromkeys(STAGES, 1.0),
                  "CPU", image_score=score)


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
@pytest.mark.parametrize("rules", ["    - {top1_in: [scratch, pit]}\n", "    - {score_above: 0.5}\n"])
def test_a_non_finite_classifier_score_is_never_ok(models, bad, rules):
    spec = spec_with(models, "classifier", "classes: [good, scratch, pit]\noutput:\n  min_confidence: 0.6\n"
                                           f"verdict:\n  fail_if:\n{rules}")
    verdict = decide(spec.verdict, cls_result(bad, 0.1, 0.2), spec)
    assert not verdict.ok and "not finite" in verdict.reason


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_a_non_finite_image_score_is_never_ok_even_under_area_rules_only(models, bad):
    spec = spec_with(models, "binary_logits", "classes: [background, defect]\n"
                                              "verdict:\n  fail_if:\n    - {class: defect, min_area_px: 1}\n")
    verdict = decide(spec.verdict, seg_result(bad), spec)
    assert not verdict.ok and "not finite" in verdict.reason
    assert decide(spec.verdict, seg_result(0.3), spec).ok  # a finite score and an empty mask: OK as before


def test_the_anomaly_default_rule_and_a_moved_limit_reject_nan(models):
    spec = spec_with(models, "anomaly_named", "")
    rule = score_rule(spec)
    assert rule is not None and rule.inclusive
    judgement = judge(spec, seg_result(NAN))
    assert not judgement.verdict.ok
    moved = judgement.at_limit(rule, 0.99)  # the folder histogram's line dragged: still NG
    assert not moved.ok and "not finite" in moved.reason
    assert judge(spec, seg_result(0.2)).at_limit(rule, 0.99).ok


@pytest.mark.parametrize(("scores", "says"), [
    ((NAN, 0.1, 0.2), "uncertain: top-1 nan < min_confidence"),
    ((0.9, NAN, 0.0), "uncertain: margin nan < min_margin"),
])
def test_nan_confidence_or_margin_is_uncertain(models, scores, says):
    spec = spec_with(models, "classifier", "classes: [good, scratch, pit]\noutput:\n  min_margin: 0.1\n")
    doubt = uncertainty(cls_result(*scores).predictions, spec)
    assert doubt is not None and doubt.reason.startswith(says)
    assert uncertainty(cls_result(0.9, 0.05, 0.05).predictions, spec) is None


@pytest.mark.parametrize(("array", "says"), [
    (np.array([0.5, NAN, NAN], np.float32), "2 NaN of 3 values"),
    (np.array([[INF, -INF]], np.float16), "1 +inf, 1 -inf of 2 values"),
    (np.array([1e38, 3e38], np.float32), ""),  # huge but finite: a sum would overflow, min/max do not
    (np.array([1, 2], np.int64), ""),
    (np.zeros((0, 3), np.float32), ""),
])
def test_non_finite_counts_what_is_wrong(array, says):
    assert non_finite(array) == says


def test_check_finite_names_the_output_of_an_anomaly_model():
    outputs = (np.zeros((1, 1, 4, 4), np.float32), np.array([NAN], np.float32), np.zeros((1, 1, 4, 4), bool))
    with pytest.raises(InferenceError) as caught:
        check_finite("m.onnx", ("anomaly_map", "pred_score", "pred_mask"), outputs)
    assert str(caught.value) == ("m.onnx: non-finite model output 'pred_score': 1 NaN of 1 values; the model is "
                                 "broken, so no decision is made from it")
    check_finite("m.onnx", ("a", "b", "c"), replace_score(outputs, 0.5))  # finite: nothing raised


def replace_score(outputs: tuple, value: float) -> tuple:
    return (outputs[0], np.array([value], np.float32), outputs[2])


def test_a_result_replaced_with_a_nan_score_is_still_caught(models):
    """`replace` (as the viewer's retune does) cannot smuggle a NaN past the verdict."""
    spec = spec_with(models, "binary_logits", "verdict:\n  fail_if:\n    - {score_above: 0.5}\n")
    assert not decide(spec.verdict, replace(seg_result(0.1), image_score=NAN), spec).ok
