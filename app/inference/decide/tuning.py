"""Decisions made again from what a run kept — another pixel threshold, a minimum confidence, another image-score
limit, a probability or an uncertainty picture — never a new model run.

The CLI's `--threshold` and the viewer's slider both go through `with_threshold`; the viewer's histogram line moves
the limit of the verdict's score rule (`with_score_limit`) and re-judges a folder from each file's score and the
verdict of its other rules (`Judgement`), which a run records once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from app.inference.decide.verdict import Verdict, decide, image_score, review_reason, score_fired
from app.inference.image import postprocess
from app.inference.image.pipeline import Result
from app.inference.model.rules import ScoreRule
from app.inference.model.spec import ModelSpec

LAYERS = ("probability", "uncertainty")  # the pictures a result with kept scores can give besides its mask


def with_threshold(spec: ModelSpec, threshold: float | None) -> tuple[ModelSpec, float | None]:
    """(spec, min_confidence) for a threshold chosen by the user: a binary (or anomaly) model's own pixel threshold
    is replaced (the pipeline applies it as always); a multi-class model keeps its spec and gets a minimum
    confidence, applied to the kept scores (pixels whose winning probability is below it become background); an
    instance model's is its objects' score threshold (the `detect.conf` its run keeps them above)."""
    if threshold is not None and spec.detector is not None and spec.task == "instances":  # the score threshold
        options = replace(spec.detector.options, conf=threshold)
        return replace(spec, detector=replace(spec.detector, options=options),
                       output=replace(spec.output, threshold=threshold)), None
    if threshold is None or spec.task != "segmentation":
        return spec, None
    if spec.output.kind in ("binary", "anomaly"):  # anomaly: the pixel threshold on the map
        return replace(spec, output=replace(spec.output, threshold=threshold)), None
    return spec, threshold


def tunable(spec: ModelSpec) -> str | None:
    """What a threshold means for this model: "threshold" (binary/anomaly pixel cut), "min_confidence" (multi-class
    scores), or None (classification, or a label-map output: nothing kept to decide again from)."""
    if spec.task != "segmentation":
        return None
    if spec.output.kind in ("binary", "anomaly"):
        return "threshold"
    return "min_confidence" if spec.output.kind == "scores" else None


def score_rule(spec: ModelSpec) -> ScoreRule | None:
    """The verdict's image-score rule (an anomaly model's default one included), None when it has none."""
    return next((rule for rule in spec.verdict or () if isinstance(rule, ScoreRule)), None)


def with_score_limit(spec: ModelSpec, limit: float | None) -> ModelSpec:
    """The spec whose image-score rule fires at `limit` instead (None: unchanged; no score rule: unchanged)."""
    rule = score_rule(spec)
    if limit is None or rule is None:
        return spec
    rules = tuple(replace(r, score_above=limit) if r is rule else r for r in spec.verdict or ())  # rule is in it
    return replace(spec, verdict=rules)


@dataclass(frozen=True)
class Judgement:
    """One file's verdict kept so that a new image-score limit re-judges it without its result: the score, and the
    first of the *other* rules that fired (empty: none did)."""

    score: float | None
    verdict: Verdict | None
    other_reason: str = ""
    review_reason: str = ""  # the first review rule (verdict.review_if) that held: REVIEW when nothing fails

    def at_limit(self, rule: ScoreRule | None, limit: float | None) -> Verdict | None:
        """The verdict with the score rule at `limit` (None: as judged)."""
        if self.verdict is None or rule is None or limit is None:
            return self.verdict
        # no score, a NaN score or a NaN limit fires (NaN passes every comparison): never OK
        fired = score_fired(self.score, rule, limit)
        if fired:
            return Verdict(False, fired)
        if self.other_reason:
            return Verdict(False, self.other_reason)
        return Verdict(False, self.review_reason, review=True) if self.review_reason else Verdict(True)


def judge(spec: ModelSpec, result: Result) -> Judgement:
    """The verdict of `result` under the spec's rules, with what a later score limit needs."""
    if spec.verdict is None:
        return Judgement(image_score(result), None)
    others = tuple(rule for rule in spec.verdict if not isinstance(rule, ScoreRule))
    return Judgement(image_score(result), decide(spec.verdict, result, spec, review=spec.review),
                     decide(others, result, spec).reason, review_reason(spec.review, result, spec))


def plane(result: Result, spec: ModelSpec, layer: str, class_index: int | None = None, *,
          hw: tuple[int, int] | None = None) -> np.ndarray | None:
    """A float32 0–1 picture at the image's size (or at `hw`: the viewer's downscaled display, sampled there
    rather than made at the image's size and brought down) from the kept scores, None when the result kept none.

    - "probability": the foreground of a binary model, the anomaly map of an anomaly model, class `class_index`
      of a multi-class one (None: the winning class's probability);
    - "uncertainty": 1 − the winning probability (binary: 1 − max(p, 1 − p)); None for an anomaly model, whose map
      is not a probability. It runs from 0 (sure) to 1 − 1/C (a uniform guess), shown on the same fixed scale.
    """
    scores, geometry = result.scores, result.geometry
    if scores is None or geometry is None:
        return None
    if hw is not None and hw != geometry.image_hw:
        geometry = replace(geometry, image_hw=hw)
    if layer == "probability":
        return postprocess.probability_at_image_size(scores, geometry, class_index)
    if layer != "uncertainty" or spec.output.kind == "anomaly":
        return None
    winning = scores.max(axis=0).astype(np.float32)
    if len(scores) == 1:
        winning = np.maximum(winning, 1.0 - winning)
    return postprocess.probability_at_image_size((1.0 - winning)[None], geometry)

