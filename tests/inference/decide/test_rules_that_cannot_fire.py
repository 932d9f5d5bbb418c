"""Decisions fail closed (issue 24, section 2): a verdict rule that could never fire is refused when the sidecar is
loaded, and a rule that meets a result without what it measures (no image score, no mask, no top-1) is NG, never
OK. Before, `score_above` on a multi-class or label-map model was inert: every image passed as OK."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from app.errors import SidecarError
from app.inference.decide.tuning import Judgement
from app.inference.decide.verdict import Verdict, decide
from app.inference.image.pipeline import STAGES, Result
from app.inference.image.postprocess import Prediction
from app.inference.model.builder import load_spec
from app.inference.model.rules import AreaRule, FractionRule, ScoreRule, Top1Rule

NAN = math.nan


def refused(models, kind: str, sidecar: str) -> tuple[str, Path]:
    path = models(kind)
    path.with_suffix(".yaml").write_text(sidecar)
    with pytest.raises(SidecarError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert "\n" not in message
    return message, path.with_suffix(".yaml")


# -- refused when the sidecar is loaded -----------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "what"), [("rgb_classes", "a scores output"),
                                            ("embedded_argmax", "a labels output"),
                                            ("argmax_keepdims", "a labels output")])
def test_score_above_on_a_model_without_an_image_score_is_refused(models, kind, what):
    message, sidecar = refused(models, kind, "verdict:\n  fail_if:\n    - {score_above: 0.5}\n")
    assert message == (f"{sidecar}: 'verdict.fail_if[0].score_above' applies to models with an image score "
                       f"(binary segmentation, anomaly, classification, instances), but this model's output is {what}, "
                       "which has none: the rule could never fire")


def test_score_above_later_in_the_list_is_named_by_its_index(models):
    message, _ = refused(models, "rgb_classes", "classes: [bg, scratch, stain]\nverdict:\n  fail_if:\n"
                                                "    - {class: scratch, min_area_px: 5}\n    - {score_above: 0.5}\n")
    assert "'verdict.fail_if[1].score_above' applies to models with an image score" in message


@pytest.mark.parametrize("kind", ["binary_logits", "classifier"])
@pytest.mark.parametrize(("limit", "says"), [
    ("1", "is 1, but this model's image score is a probability (0 to 1) and the rule fires only above the limit: "
          "it could never fire; give a limit from 0 to below 1"),
    ("1.5", "is 1.5, but this model's image score is a probability (0 to 1) and the rule fires only above the "
            "limit: it could never fire; give a limit from 0 to below 1"),
    ("-0.1", "is -0.1, but this model's image score is a probability (0 to 1): every image would be NG; give a "
             "limit from 0 to below 1"),
])
def test_a_probability_limit_outside_0_to_1_is_refused(models, kind, limit, says):
    message, sidecar = refused(models, kind, f"verdict:\n  fail_if:\n    - {{score_above: {limit}}}\n")
    assert message == f"{sidecar}: 'verdict.fail_if[0].score_above' {says}"


def test_an_anomaly_score_is_not_a_probability_so_any_finite_limit_is_taken(models):
    path = models("anomaly_named")
    path.with_suffix(".yaml").write_text("verdict:\n  fail_if:\n    - {score_above: 3.5}\n")
    assert load_spec(path).verdict == (ScoreRule(3.5),)


@pytest.mark.parametrize("kind", ["binary_logits", "classifier", "rgb_classes"])
def test_image_threshold_on_a_model_that_is_not_an_anomaly_model_is_refused(models, kind):
    message, sidecar = refused(models, kind, "output:\n  image_threshold: 0.3\n")
    assert message.startswith(f"{sidecar}: 'output.image_threshold' applies to anomaly models (their default "
                              "rule: NG when the image score is >= it), but this model's output is a ")
    assert message.endswith(" output: it would never be used")


def test_image_threshold_beside_a_verdict_section_is_refused(models):
    message, sidecar = refused(models, "anomaly_named",
                               "output:\n  image_threshold: 0.3\nverdict:\n  fail_if:\n    - {score_above: 0.9}\n")
    assert message == (f"{sidecar}: 'output.image_threshold' is not used when the sidecar has a verdict section "
                       "(its rules replace the default rule score >= image_threshold): remove it, or give the limit "
                       "in verdict.fail_if as {score_above: ...}")


@pytest.mark.parametrize(("kind", "sidecar", "key", "says"), [
    ("classifier", "classes: [red, green, blue]\nverdict:\n  fail_if:\n    - {top1_in: [green, pit]}\n",
     "verdict.fail_if[0].top1_in", "is 'pit', not a class of this model (classes: red, green, blue)"),
    ("rgb_classes", "classes: [bg, scratch, stain]\nverdict:\n  fail_if:\n    - {class: pit, min_area_px: 5}\n",
     "verdict.fail_if[0].class", "is 'pit', not a class of this model (classes: bg, scratch, stain)"),
    ("binary_logits", "verdict:\n  fail_if:\n    - {class: defect, min_total_fraction: 0.1}\n",
     "verdict.fail_if[0].class", "is 'defect', not a class of this model (classes: background, class 1)"),
    ("rgb_classes", "output:\n  min_confidence: 0.6\n", "output.min_confidence", "applies to classification models"),
    ("binary_logits", "output:\n  min_margin: 0.2\n", "output.min_margin", "applies to classification models"),
    ("classifier", "output:\n  min_confidence: 1.2\n", "output.min_confidence", "must be between 0 and 1"),
])
def test_other_rules_that_could_never_fire_are_refused_naming_the_key(models, kind, sidecar, key, says):
    message, path = refused(models, kind, sidecar)
    assert message.startswith(f"{path}: '{key}' ") and says in message


# -- judged: what a rule measures is missing → NG, never OK ---------------------------------------------------

def seg(mask: np.ndarray | None, score: float | None = None) -> Result:
    return Result(Path("x.png"), "segmentation", (4, 4), mask, (), dict.fromkeys(STAGES, 1.0), "CPU",
                  image_score=score)


def cls(*scores: float) -> Result:
    return Result(Path("x.png"), "classification", (8, 8), None,
                  tuple(Prediction(i, ("ok", "scratch", "pit")[i], s) for i, s in enumerate(scores)),
                  dict.fromkeys(STAGES, 1.0), "CPU")


def test_a_score_rule_on_a_result_without_a_score_is_ng():
    verdict = decide((ScoreRule(0.7),), seg(np.zeros((4, 4), np.uint8)), None)
    assert verdict == Verdict(False, "no image score to judge image score > 0.7 by")


def test_a_top1_rule_on_a_result_without_predictions_is_ng():
    verdict = decide((Top1Rule(("scratch",), frozenset({1})),), cls(), None)
    assert verdict == Verdict(False, "no top-1 class to judge top-1 class in [scratch] by")


@pytest.mark.parametrize("mask", [None, np.zeros((0, 0), np.uint8)])
@pytest.mark.parametrize("rule", [AreaRule("scratch", (1,), 5), FractionRule("scratch", (1,), 0.1)])
def test_an_area_rule_on_a_result_without_a_mask_is_ng(mask, rule):
    verdict = decide((rule,), seg(mask), None)
    assert verdict == Verdict(False, f"no mask to judge {rule.describe()} by")


def test_a_result_with_everything_still_judged_as_before():
    mask = np.zeros((4, 4), np.uint8)
    assert decide((AreaRule("scratch", (1,), 5), ScoreRule(0.7)), seg(mask, 0.2), None) == Verdict(True)
    assert decide((Top1Rule(("scratch",), frozenset({1})),), cls(0.7, 0.2, 0.1), None) == Verdict(True)


# -- the folder's score limit moved: the same holds -----------------------------------------------------------

def test_a_moved_limit_on_a_file_without_a_score_is_ng():
    judged = Judgement(None, Verdict(True))
    assert judged.at_limit(ScoreRule(0.7), 0.5) == Verdict(False, "no image score to judge image score > 0.5 by")


@pytest.mark.parametrize("limit", [NAN, math.inf, -math.inf])
def test_a_non_finite_limit_is_ng_whatever_the_score(limit):
    judged = Judgement(0.2, Verdict(True))
    assert judged.at_limit(ScoreRule(0.7), limit) == Verdict(False, f"score limit {limit} is not finite")
