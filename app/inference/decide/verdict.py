"""Verdict rules (the sidecar's `verdict.fail_if`) and their evaluation: is an image OK or NG?

An image is NG when any rule holds, OK otherwise; the reason is the first rule that fired. Rules are frozen
records built with the spec (class names already resolved to label values); `decide` is a pure function of a
rule list and a Result, so a verdict is never a new model run.

- `min_area_px`: a connected component of the class (8-connectivity: diagonal neighbours touch; OpenCV's
  `connectedComponentsWithStats`) of at least this many pixels of the label mask at the image's size;
- `min_total_fraction`: the class covers at least this share of the image (all its pixels, connected or not);
- `score_above`: the image score is strictly above the limit. The image score is the model's own
  (`result.image_score`: an anomaly score, a binary model's highest foreground probability) or, for a classifier,
  the top-1 probability. A model without an image score (multi-class scores, a label map) has the rule refused
  when the sidecar is loaded, as is a limit a probability can never pass (>= 1) or always passes (< 0);
- `top1_in`: a classifier's top-1 class is one of these;
- on instances (a detection, instance or oriented-box model's objects; app.inference.model.instance_rules):
  `count_above`, `max_area_px`, `max_area_mm2` and a per-class `score_above`, each a limit or a mapping of class
  names to limits (`count_above: {scratch: 2}`), judged in app.inference.decide.instance_verdict. Their image
  score is the best object's (0.0 with none), so `score_above: 0.5` judges it as any other;
- `min_component_ml`: a volume's 3D connected component (26-connectivity: faces, edges and corners touch;
  app.inference.decide.lesions) of the class (`class` optional: without it any class but the background, label 0) of at
  least this many mL. It judges a volume's assembled label volume (app.runs.folder.volumes: a 2D model run slice by
  slice, and 3D models), never one slice: a slice of a volume is judged by the other rules. A plain 2D image has no
  voxel volume, so the rule cannot be judged there and makes it NG (`no volume to judge …`), like a missing mask;
  so does a volume without a voxel size (no spacing in its files) that has a component of the class.

Fail closed: a rule that meets a result without what it measures (no image score, no mask, no top-1 class: a
Result made elsewhere than the pipeline) makes the image NG (`no mask to judge … by`), never OK, and so does a
non-finite score.

The band (`verdict.review_if`, beside `fail_if`): when no fail rule fired and the result is sure, a review rule
that holds makes the image REVIEW, not OK (`review_if: {score_above: 0.4}` with `fail_if: {score_above: 0.7}`:
score <= 0.4 OK, 0.4 < score <= 0.7 REVIEW, above NG). REVIEW never hides an NG: the fail rules, fail closed and
uncertainty are judged first. A Verdict's `ok` is False for REVIEW, so a reader that knows only OK/NG shows NG.

A classifier whose output sets `min_confidence` / `min_margin` is also judged *uncertain* when its top-1
probability is below the first, or top-1 − top-2 below the second (strictly: equal is not uncertain). When no rule
fired, an uncertain result is NG (`uncertain: top-1 0.41 < min_confidence 0.50`), never passed as OK; a model
without a verdict section has no verdict, and the report gives the uncertainty as its reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

from app.inference.decide.instance_verdict import instance_fired, judgeable_instances, not_finite_score
from app.inference.model.instance_rules import InstanceRule
from app.inference.model.rules import (
    ComponentRule,
    FractionRule,
    Rule,
    ScoreRule,
    Top1Rule,
    percent,
)

if TYPE_CHECKING:  # the pipeline imports the spec, which imports these rules: types only, no cycle
    from app.inference.image.pipeline import Result
    from app.inference.image.postprocess import Prediction
    from app.inference.model.spec import ModelSpec


VERDICT_STATES = ("OK", "REVIEW", "NG")  # what a verdict says, on screens, in summaries and on the line


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""  # the first rule that fired; empty when OK
    review: bool = False  # REVIEW: no fail rule fired but a review rule did (`ok` is False: never passed as OK)

    @property
    def state(self) -> str:
        """"OK", "REVIEW" or "NG"."""
        return "OK" if self.ok else "REVIEW" if self.review else "NG"

    @property
    def cell(self) -> str:
        """The report's `verdict` cell: "ok", "review" or "ng"."""
        return self.state.lower()


@dataclass(frozen=True)
class Uncertain:
    """Why a classification result is uncertain: its top-1 probability (measure "top-1") or its top-1 − top-2
    margin ("margin") is below the spec's limit (key "min_confidence" or "min_margin")."""

    measure: str
    value: float
    key: str
    limit: float

    @property
    def reason(self) -> str:
        """`uncertain: top-1 0.41 < min_confidence 0.50`, the report's verdict_reason."""
        value, limit = _two(self.value, self.limit)
        return f"uncertain: {self.measure} {value} < {self.key} {limit}"

    @property
    def short(self) -> str:
        """`Uncertain: top-1 0.41 < 0.50`, the viewer's line."""
        value, limit = _two(self.value, self.limit)
        return f"Uncertain: {self.measure} {value} < {limit}"


def uncertainty(predictions: Sequence[Prediction], spec: ModelSpec) -> Uncertain | None:
    """Whether best-first `predictions` (name, score) are uncertain under the spec's `output.min_confidence` and
    `output.min_margin`; None when they are not, or the model is not a classifier. Confidence is checked first."""
    if spec is None or spec.task != "classification" or not predictions:  # None: rules judged without a model
        return None
    out = spec.output
    top1 = float(predictions[0].score)
    # `not >=` rather than `<`: a NaN is below every limit (uncertain), never passed as sure
    if not top1 >= out.min_confidence:
        return Uncertain("top-1", top1, "min_confidence", out.min_confidence)
    if len(predictions) > 1 and not top1 - float(predictions[1].score) >= out.min_margin:
        return Uncertain("margin", top1 - float(predictions[1].score), "min_margin", out.min_margin)
    return None


def _two(value: float, limit: float) -> tuple[str, str]:
    """Both numbers with 2 decimals, or as many as the limit needs (0.625 < 0.626), more when that would show them
    equal (0.4999 < 0.5 is not `0.50 < 0.50`)."""
    digits = 2
    while digits < 6 and float(f"{limit:.{digits}f}") != limit:
        digits += 1
    while digits < 8 and f"{value:.{digits}f}" == f"{limit:.{digits}f}":
        digits += 1
    return f"{value:.{digits}f}", f"{limit:.{digits}f}"


def image_score(result: Result) -> float | None:
    """The model's image score when it keeps one, else a classifier's top-1 probability, else None."""
    if result.image_score is not None:
        return float(result.image_score)
    if result.task == "classification" and result.predictions:
        return float(result.predictions[0].score)
    return None


def verdict_of(spec: ModelSpec, result: Result) -> Verdict | None:
    """The verdict of `result` under the spec's rules; None when the model has no `verdict` section."""
    return None if spec.verdict is None else decide(spec.verdict, result, spec, review=spec.review)


def decide(rules: tuple[Rule, ...], result: Result, spec: ModelSpec, *, review: tuple[Rule, ...] = ()) -> Verdict:
    """OK unless a rule holds; the reason names the first that did (`scratch component 412 px >= 50`). A classifier's
    uncertain result is NG when no rule fired (`uncertain: top-1 0.41 < min_confidence 0.50`). Only then is a
    `review` rule judged: the first that holds makes it REVIEW (`review: score 0.55 > 0.4`). A non-finite score
    is NG whatever the rules (`image score nan is not finite`): a comparison with NaN is False, so it would pass
    every rule. The pipeline already makes such an output an error (app.inference.runtime.finite); this is for a Result
    made anywhere else."""
    broken = not_finite(result)
    if broken:
        return Verdict(False, broken)
    for rule in rules:
        reason = _fired(rule, result, spec)
        if reason:
            return Verdict(False, reason)
    if spec is not None and spec.task == "classification" and not result.predictions:
        return Verdict(False, "no class scores to judge")  # uncertainty() has nothing to measure: never sure
    doubt = uncertainty(result.predictions, spec)
    if doubt is not None:
        return Verdict(False, doubt.reason)
    unjudged = next((rule for rule in review if not judgeable(rule, result)), None)
    if unjudged is not None:  # fail closed: a review rule that cannot be judged makes NG, as a fail rule does
        return Verdict(False, _fired(unjudged, result, spec))
    reason = review_reason(review, result, spec)
    return Verdict(False, reason, review=True) if reason else Verdict(True)


def judgeable(rule: Rule, result: Result) -> bool:
    """Whether `result` has what `rule` measures (an image score and a finite limit, a mask, a top-1 class)."""
    if isinstance(rule, ScoreRule):
        return image_score(result) is not None and math.isfinite(rule.score_above)
    if isinstance(rule, Top1Rule):
        return bool(result.predictions)
    if isinstance(rule, ComponentRule):
        return False  # a volume rule never judges one image (refused in review_if: app.inference.decide.band)
    if isinstance(rule, InstanceRule):
        return judgeable_instances(rule, result.instances)
    return result.mask is not None and result.mask.size > 0


def review_reason(review: tuple[Rule, ...], result: Result, spec: ModelSpec) -> str:
    """Why the first review rule that holds does (`review: score 0.55 > 0.4`), or "" (`decide` has made a result
    that a review rule cannot judge NG before asking)."""
    return next((f"review: {why}" for why in (_fired(rule, result, spec) for rule in review) if why), "")


def not_finite(result: Result) -> str:
    """Why `result`'s image score or a prediction's score is NaN or ±inf (`image score nan is not finite`), or ""."""
    score = image_score(result)
    if score is not None and not math.isfinite(score):
        return f"image score {score} is not finite"
    bad = next((p for p in result.predictions if not math.isfinite(p.score)), None)
    if bad is not None:
        return f"score {bad.score} of {bad.name} is not finite"
    return not_finite_score(result.instances)


def _fired(rule: Rule, result: Result, spec: ModelSpec) -> str:
    """Why `rule` holds for `result` ("" when it does not). What the rule measures missing from the result is a
    reason too (`no image score to judge image score > 0.7 by`): a rule that cannot be judged never passes."""
    if isinstance(rule, ScoreRule):
        return score_fired(image_score(result), rule, rule.score_above)
    if isinstance(rule, ComponentRule):  # a volume rule: a slice of a volume is never judged by it (slice_verdict)
        return f"no volume to judge {rule.describe()} by (one 2D image or slice)"
    if isinstance(rule, InstanceRule):
        return instance_fired(rule, result.instances)
    if isinstance(rule, Top1Rule):
        if not result.predictions:
            return f"no top-1 class to judge {rule.describe()} by"
        if result.predictions[0].index not in rule.indices:
            return ""
        return f"top-1 {result.predictions[0].name} is in [{', '.join(rule.class_names)}]"
    mask = result.mask
    if mask is None or mask.size == 0:
        return f"no mask to judge {rule.describe()} by"
    pixels = np.isin(mask, rule.labels)
    if isinstance(rule, FractionRule):
        fraction = int(np.count_nonzero(pixels)) / pixels.size
        if fraction < rule.min_total_fraction:
            return ""
        return (f"{rule.class_name} covers {percent(fraction)} % >= {percent(rule.min_total_fraction)} %")
    largest = largest_component(pixels)
    return f"{rule.class_name} component {largest} px >= {rule.min_area_px}" if largest >= rule.min_area_px else ""


def score_fired(score: float | None, rule: ScoreRule, limit: float) -> str:
    """Why a score rule at `limit` holds for `score` (`score 0.82 > 0.7`), or "". Written so that anything not
    comparable fires: no score, a NaN score, a NaN limit (every comparison with NaN is False)."""
    shown = ScoreRule(limit, rule.inclusive).describe()
    if score is None:
        return f"no image score to judge {shown} by"
    if not math.isfinite(limit):
        return f"score limit {limit} is not finite"
    if not math.isfinite(score):
        return f"image score {score} is not finite"
    below = score < limit if rule.inclusive else score <= limit
    return "" if below else f"score {score:.4g} {rule.sign} {limit:g}"


def largest_component(pixels: np.ndarray) -> int:
    """Pixels in the largest 8-connected component of a boolean image (0 when it is empty)."""
    if not pixels.any():
        return 0
    count, _, stats, _ = cv2.connectedComponentsWithStats(pixels.astype(np.uint8), connectivity=8)
    return int(stats[1:count, cv2.CC_STAT_AREA].max())
