"""Verdict rules: parsed from the sidecar (refused with the key named), evaluated at each boundary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from app.errors import SidecarError
from app.inference.decide.verdict import Verdict, decide, image_score, largest_component, verdict_of
from app.inference.describe.info import spec_dict, spec_text
from app.inference.image.pipeline import STAGES, Result
from app.inference.image.postprocess import Prediction
from app.inference.model.builder import load_spec
from app.inference.model.rules import AreaRule, FractionRule, ScoreRule, Top1Rule

SEG_SIDECAR = """
classes: [bg, scratch, stain]
verdict:
  fail_if:
    - {class: scratch, min_area_px: 50}
    - {class: stain, min_total_fraction: 0.01}
"""  # no score_above: a multi-class model has no image score, so it is refused (test_rules_that_cannot_fire)


def seg_spec(models, verdict: str = SEG_SIDECAR):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text(verdict)
    return load_spec(path)


def cls_spec(models, rules: str = "    - {top1_in: [green, blue]}\n    - {score_above: 0.7}\n"):
    path = models("classifier")
    path.with_suffix(".yaml").write_text(f"classes: [red, green, blue]\nverdict:\n  fail_if:\n{rules}")
    return load_spec(path)


def seg_result(mask: np.ndarray) -> Result:
    return Result(Path("x.png"), "segmentation", mask.shape, mask, (), dict.fromkeys(STAGES, 1.0), "CPU")


def cls_result(*scores: tuple[int, str, float]) -> Result:
    return Result(Path("x.png"), "classification", (8, 8), None, tuple(Prediction(*s) for s in scores),
                  dict.fromkeys(STAGES, 1.0), "CPU")


@dataclass(frozen=True)
class ScoredResult:  # a Result with the kept image score of a later merge (read through getattr)
    task: str
    mask: np.ndarray | None
    predictions: tuple
    image_score: float | None
    instances: None = None  # Result's field: no objects (not an instance model)


# -- the sidecar -----------------------------------------------------------------------------------------

def test_rules_are_parsed_onto_the_spec_with_class_names_resolved(models):
    spec = seg_spec(models)
    assert spec.verdict == (AreaRule("scratch", (1,), 50), FractionRule("stain", (2,), 0.01))
    assert spec.sources["verdict"] == "sidecar"


def test_no_verdict_section_means_no_verdict(models):
    spec = seg_spec(models, "classes: [bg, scratch, stain]\n")
    assert spec.verdict is None
    assert verdict_of(spec, seg_result(np.ones((4, 4), np.uint8))) is None
    assert spec_dict(spec, None)["verdict"] is None
    assert "\nverdict" not in spec_text(spec, None)


def test_classifier_rules_resolve_top1_names(models):
    spec = cls_spec(models)
    assert spec.verdict == (Top1Rule(("green", "blue"), frozenset({1, 2})), ScoreRule(0.7))


@pytest.mark.parametrize(("rule", "key", "says"), [
    ("{class: scrach, min_area_px: 5}", "verdict.fail_if[0].class", "classes: bg, scratch, stain"),
    ("{top1_in: [bg]}", "verdict.fail_if[0].top1_in", "applies to classification models"),
    ("{class: bg, min_area_px: 0}", "verdict.fail_if[0].min_area_px", "whole number"),
    ("{class: bg, min_total_fraction: 1.5}", "verdict.fail_if[0].min_total_fraction", "between 0 and 1"),
    ("{score_above: .nan}", "verdict.fail_if[0].score_above", "finite"),
    ("{class: bg}", "verdict.fail_if[0]", "must be one rule"),
    ("{score_above: 0.5, top1_in: [bg]}", "verdict.fail_if[0]", "must be one rule"),
    ("{class: bg, min_area_px: 3, extra: 1}", "verdict.fail_if[0]", "unknown key 'extra'"),
    ("{min_area_px: 3}", "verdict.fail_if[0]", "needs 'class'"),
    ("{class: '', min_area_px: 3}", "verdict.fail_if[0].class", "non-empty text"),
    ("just text", "verdict.fail_if[0]", "must be one rule"),
])
def test_a_wrong_rule_is_refused_in_one_line_naming_the_key(models, rule, key, says):
    with pytest.raises(SidecarError) as caught:
        seg_spec(models, "classes: [bg, scratch, stain]\nverdict:\n  fail_if:\n    - {class: scratch, min_area_px: 1}\n"
                         f"    - {rule}\n".replace("[0]", "[1]"))
    message = str(caught.value)
    assert f"'{key.replace('[0]', '[1]')}'" in message and says in message and "\n" not in message


@pytest.mark.parametrize("section", ["verdict: {fail_if: []}", "verdict: {fail_if: {class: bg}}",
                                     "verdict: {fail_when: []}", "verdict: [1]"])
def test_a_wrong_section_is_refused(models, section):
    with pytest.raises(SidecarError, match="verdict"):
        seg_spec(models, f"classes: [bg, scratch, stain]\n{section}\n")


def test_area_rules_do_not_fit_a_classifier(models):
    with pytest.raises(SidecarError, match=r"'verdict.fail_if\[0\].min_area_px' applies to segmentation"):
        cls_spec(models, "    - {class: red, min_area_px: 4}\n")


def test_an_unknown_top1_class_is_refused_with_the_known_names(models):
    with pytest.raises(SidecarError, match=r"'verdict.fail_if\[0\].top1_in' is 'pit'.*red, green, blue"):
        cls_spec(models, "    - {top1_in: [green, pit]}\n")


def test_info_shows_the_rules(models):
    spec = seg_spec(models)
    text = spec_text(spec, None)
    assert "a scratch component of >= 50 px" in text and "stain covers >= 1 % of the image" in text
    assert spec_dict(spec, None)["verdict"] == {"fail_if": [
        {"class": "scratch", "min_area_px": 50}, {"class": "stain", "min_total_fraction": 0.01}]}
    classifier = cls_spec(models)
    assert "image score > 0.7" in spec_text(classifier, None)
    assert spec_dict(classifier, None)["verdict"]["fail_if"][1] == {"score_above": 0.7}


# -- evaluation at each boundary -------------------------------------------------------------------------

def square(side: int, label: int = 1, size: int = 40) -> np.ndarray:
    mask = np.zeros((size, size), np.uint8)
    mask[:side, :side] = label
    return mask


def test_a_component_exactly_at_the_limit_fires_one_pixel_less_does_not():
    rules = (AreaRule("scratch", (1,), 50),)
    at_limit = square(10)
    at_limit[0:5, 0:10] = 0  # 5×10 = 50 px
    assert decide(rules, seg_result(at_limit), None) == Verdict(False, "scratch component 50 px >= 50")
    at_limit[5, 0] = 0  # 49
    assert decide(rules, seg_result(at_limit), None) == Verdict(True, "")


def test_components_are_8_connected_and_counted_apart():
    mask = np.zeros((20, 20), np.uint8)
    mask[0:5, 0:5] = 1  # 25 px
    mask[5:10, 5:10] = 1  # 25 px touching the first at one corner only: 8-connected, one component of 50
    assert largest_component(mask == 1) == 50
    apart = np.zeros((20, 20), np.uint8)
    apart[0:5, 0:5] = 1
    apart[10:15, 10:15] = 1  # two of 25, together 50: no component reaches 50
    assert decide((AreaRule("scratch", (1,), 50),), seg_result(apart), None).ok
    assert largest_component(np.zeros((3, 3), bool)) == 0


def test_a_fraction_exactly_at_the_limit_fires():
    rules = (FractionRule("stain", (2,), 0.01),)
    mask = np.zeros((100, 100), np.uint8)
    mask[0, :100] = 2  # 100 of 10000 px = 1 %
    assert decide(rules, seg_result(mask), None) == Verdict(False, "stain covers 1 % >= 1 %")
    mask[0, 0] = 0
    assert decide(rules, seg_result(mask), None).ok
    mask[1:4, :10] = 2  # 129 px, scattered pieces count together
    assert decide(rules, seg_result(mask), None).reason == "stain covers 1.29 % >= 1 %"


def test_a_score_equal_to_the_limit_does_not_fire_strictly_above_does():
    rules = (ScoreRule(0.7),)
    assert decide(rules, ScoredResult("segmentation", None, (), 0.7), None).ok
    assert decide(rules, ScoredResult("segmentation", None, (), 0.82), None) == Verdict(False, "score 0.82 > 0.7")


def test_a_result_without_a_score_is_ng_under_a_score_rule():
    """Was: the rule never fired, so a model without an image score passed every image as OK (issue 24)."""
    assert image_score(seg_result(square(3))) is None
    assert decide((ScoreRule(-1.0),), seg_result(square(3)), None) == \
        Verdict(False, "no image score to judge image score > -1 by")


def test_a_classifier_score_is_its_top1_probability():
    result = cls_result((2, "blue", 0.9), (0, "red", 0.1))
    assert image_score(result) == pytest.approx(0.9)
    assert decide((ScoreRule(0.7),), result, None).reason == "score 0.9 > 0.7"


def test_top1_in_fires_on_the_top1_class_only():
    rules = (Top1Rule(("scratch", "pit"), frozenset({1, 2})),)
    assert decide(rules, cls_result((2, "pit", 0.6), (0, "ok", 0.4)), None) == \
        Verdict(False, "top-1 pit is in [scratch, pit]")
    assert decide(rules, cls_result((0, "ok", 0.6), (2, "pit", 0.4)), None).ok
    assert decide(rules, cls_result(), None).reason.startswith("no top-1 class")  # nothing to judge: never OK


def test_the_reason_is_the_first_rule_that_fired(models):
    spec = seg_spec(models)
    mask = np.zeros((100, 100), np.uint8)
    mask[:2, :] = 2  # 2 % stain, scratch absent: the second rule fires
    assert verdict_of(spec, seg_result(mask)) == Verdict(False, "stain covers 2 % >= 1 %")
    mask[50:60, 50:60] = 1  # now the first rule fires too, and is named
    assert verdict_of(spec, seg_result(mask)) == Verdict(False, "scratch component 100 px >= 50")
    assert verdict_of(spec, seg_result(np.zeros((100, 100), np.uint8))) == Verdict(True, "")
