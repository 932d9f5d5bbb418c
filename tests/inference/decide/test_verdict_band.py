"""The verdict band (verdict.review_if beside fail_if): OK / REVIEW / NG on exact scores, fail closed, refusals."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from app.errors import SidecarError
from app.inference.decide.tuning import judge
from app.inference.decide.verdict import Verdict, verdict_of
from app.inference.decide.volume import combined
from app.inference.describe.info import spec_dict, spec_text
from app.inference.model.builder import load_spec
from app.inference.model.rules import ScoreRule

BAND = "verdict:\n  fail_if: {score_above: 0.7}\n  review_if: {score_above: 0.4}\n"


@dataclass(frozen=True)
class Scored:  # a Result with the kept image score (read through getattr), as test_verdict's ScoredResult
    task: str
    mask: np.ndarray | None
    predictions: tuple
    image_score: float | None
    instances: None = None  # Result's field: no objects (not an instance model)


def spec_with(models, text: str, kind: str = "anomaly_named"):
    path = models(kind)
    path.with_suffix(".yaml").write_text(text)
    return load_spec(path)


def verdict_at(spec, score: float | None) -> Verdict | None:
    return verdict_of(spec, Scored("segmentation", np.zeros((4, 4), np.uint8), (), score))


@pytest.mark.parametrize(("score", "state"), [
    (0.0, "OK"), (0.4, "OK"),  # equal is not above
    (np.nextafter(0.4, 1.0), "REVIEW"), (0.55, "REVIEW"), (0.7, "REVIEW"),
    (np.nextafter(0.7, 1.0), "NG"), (5.0, "NG"),
])
def test_the_band_on_exact_scores(models, score, state):
    verdict = verdict_at(spec_with(models, BAND), float(score))
    assert verdict is not None and verdict.state == state
    assert verdict.ok == (state == "OK")  # REVIEW is never passed as OK by a reader of `ok`
    assert verdict.cell == state.lower()


def test_the_reasons_say_which_limit(models):
    spec = spec_with(models, BAND)
    assert verdict_at(spec, 0.55) == Verdict(False, "review: score 0.55 > 0.4", review=True)
    assert verdict_at(spec, 0.8) == Verdict(False, "score 0.8 > 0.7")
    assert verdict_at(spec, 0.1) == Verdict(True)


def test_fail_closed_stays_ng_never_review(models):
    spec = spec_with(models, BAND)
    assert verdict_at(spec, float("nan")) == Verdict(False, "image score nan is not finite")
    assert verdict_at(spec, None) == Verdict(False, "no image score to judge image score > 0.7 by")


def test_a_review_rule_that_cannot_be_judged_makes_ng_not_review(models):
    spec = spec_with(models, "verdict:\n  review_if: {score_above: 0.4}\n", "binary_logits")  # no fail rules
    assert spec.verdict == () and verdict_at(spec, 0.5).state == "REVIEW" and verdict_at(spec, 0.3).state == "OK"
    assert verdict_at(spec, None) == Verdict(False, "no image score to judge image score > 0.4 by")


def test_a_band_beside_the_anomaly_default_rule(models):
    spec = spec_with(models, "output:\n  image_threshold: 0.6\nverdict:\n  review_if: {score_above: 0.3}\n")
    assert spec.verdict == (ScoreRule(0.6, inclusive=True),) and spec.review == (ScoreRule(0.3),)
    assert [verdict_at(spec, s).state for s in (0.3, 0.31, 0.5999, 0.6)] == ["OK", "REVIEW", "REVIEW", "NG"]
    assert "band: score <= 0.3 OK, 0.3 < score < 0.6 REVIEW, from 0.6 NG" in spec_text(spec, None)


def test_info_shows_the_band(models):
    spec = spec_with(models, BAND)
    text = spec_text(spec, None)
    assert "NG when a fail rule holds, else REVIEW when a review rule holds, else OK" in text
    assert "  fail if image score > 0.7\n  review if image score > 0.4\n" in text
    assert "  band: score <= 0.4 OK, 0.4 < score <= 0.7 REVIEW, above 0.7 NG" in text
    assert spec_dict(spec, None)["verdict"] == {"fail_if": [{"score_above": 0.7}], "review_if": [{"score_above": 0.4}]}


@pytest.mark.parametrize(("text", "message"), [
    ("verdict:\n  fail_if: {score_above: 0.7}\n  review_if: {score_above: 0.8}\n",
     "'verdict.review_if[0].score_above' is 0.8, not below verdict.fail_if[0]'s 0.7 (image score > 0.7): the REVIEW "
     "band between them would be empty; give a review limit below the fail limit"),
    ("verdict:\n  fail_if: {score_above: 0.7}\n  review_if: {score_above: 0.7}\n",
     "'verdict.review_if[0].score_above' is 0.7, not below verdict.fail_if[0]'s 0.7 (image score > 0.7): the REVIEW "
     "band between them would be empty; give a review limit below the fail limit"),
    ("output:\n  image_threshold: 0.6\nverdict:\n  review_if: [{score_above: 0.65}]\n",
     "'verdict.review_if[0].score_above' is 0.65, not below output.image_threshold's 0.6 (image score >= 0.6): the "
     "REVIEW band between them would be empty; give a review limit below the fail limit"),
    ("verdict:\n  review_if: {min_component_ml: 1}\n",
     "'verdict.review_if[0].min_component_ml' judges a whole volume and has no REVIEW band: give it in "
     "verdict.fail_if"),
    ("verdict:\n  review_if: 0.4\n", "'verdict.review_if' must be a rule or a list of 1 to 64 rules, got 0.4"),
])
def test_an_inconsistent_band_is_refused_in_one_line_naming_the_key(models, text, message):
    with pytest.raises(SidecarError) as caught:
        spec_with(models, text)
    assert str(caught.value).endswith(f": {message}")
    assert "\n" not in str(caught.value)


def test_area_rules_of_the_same_class_make_a_band(models):
    text = ("classes: [bg, scratch, stain]\nverdict:\n  fail_if: [{class: scratch, min_area_px: 50}]\n"
            "  review_if: [{class: scratch, min_area_px: 10}, {class: stain, min_area_px: 100}]\n")
    spec = spec_with(models, text, "rgb_classes")
    mask = np.zeros((20, 20), np.uint8)
    mask[:4, :4] = 1  # 16 px of scratch: above the review limit, below the fail limit
    got = verdict_of(spec, Scored("segmentation", mask, (), None))
    assert got == Verdict(False, "review: scratch component 16 px >= 10", review=True)
    with pytest.raises(SidecarError, match=r"'verdict.review_if\[0\].min_area_px' is 60, not below "):
        spec_with(models, text.replace("min_area_px: 10", "min_area_px: 60"), "rgb_classes")


def test_the_tuner_re_judges_into_the_band(models):
    spec = spec_with(models, BAND)
    kept = judge(spec, Scored("segmentation", np.zeros((4, 4), np.uint8), (), 0.5))
    assert kept.verdict == Verdict(False, "review: score 0.5 > 0.4", review=True)
    assert kept.at_limit(spec.verdict[0], 0.45).state == "NG"  # the fail line moved below the score
    assert kept.at_limit(spec.verdict[0], 0.9).state == "REVIEW"


def test_a_volume_review_never_hides_an_ng():
    review, ng = Verdict(False, "review: x", review=True), Verdict(False, "y")
    assert combined([(1, review), (2, ng)], None) == Verdict(False, "slice 2: y")
    assert combined([(1, Verdict(True)), (3, review)], None) == Verdict(False, "slice 3: review: x", review=True)
    assert combined([(1, review)], Verdict(False, "big")) == Verdict(False, "big")
    assert combined([(1, Verdict(True))], None) == Verdict(True)
