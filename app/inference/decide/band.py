"""The verdict band: `verdict.review_if` rules resolved beside `fail_if`, and refused when a pair cannot make a band.

A review rule is the same kind of rule as a fail rule (app.inference.decide.verdict); it makes an image REVIEW when no
fail
rule fired. A review limit at or above the fail limit of the same measure (`review_if: {score_above: 0.8}` with
`fail_if: {score_above: 0.7}`) would leave the band empty, which is a typo rather than a choice: it is refused, the
review key named. A volume's component rule (`min_component_ml`) judges a whole volume and has no band yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.inference.decide.verdict import AreaRule, FractionRule, Rule, ScoreRule, resolve_rules

REVIEW_SECTION = "verdict.review_if"


def resolve_review(raw: tuple[dict[str, Any], ...], fail: tuple[Rule, ...], task: str, class_names: tuple[str, ...],
                   refuse: Callable[[str, str], Exception], *, output_kind: str,
                   fail_key: str = "verdict.fail_if") -> tuple[Rule, ...]:
    """The sidecar's `review_if` rules as Rule records, each checked against the `fail` rules (named `fail_key`:
    `output.image_threshold` for an anomaly model's default rule)."""
    for index, item in enumerate(raw):
        if item["kind"] == "min_component_ml":
            raise refuse(f"{REVIEW_SECTION}[{index}].min_component_ml",
                         "judges a whole volume and has no REVIEW band: give it in verdict.fail_if")
    review = resolve_rules(raw, task, class_names, refuse, output_kind=output_kind, section=REVIEW_SECTION)
    for index, rule in enumerate(review):
        problem = _empty_band(rule, fail, fail_key)
        if problem:
            key, text = problem
            raise refuse(f"{REVIEW_SECTION}[{index}].{key}", text)
    return review


def _empty_band(rule: Rule, fail: tuple[Rule, ...], fail_key: str) -> tuple[str, str] | None:
    """(the review rule's key, why) when a fail rule of the same measure fires at or below its limit."""
    for number, other in enumerate(fail):
        mine, theirs, key = _limits(rule, other)
        if key and mine >= theirs:
            where = fail_key if fail_key.startswith("output.") else f"{fail_key}[{number}]"
            return key, (f"is {mine:g}, not below {where}'s {theirs:g} ({other.describe()}): the REVIEW band "
                         f"between them would be empty; give a review limit below the fail limit")
    return None


def _limits(rule: Rule, other: Rule) -> tuple[float, float, str]:
    """(review limit, fail limit, the review key) when both rules measure the same thing, else (0, 0, "")."""
    if isinstance(rule, ScoreRule) and isinstance(other, ScoreRule):
        return rule.score_above, other.score_above, "score_above"
    if isinstance(rule, AreaRule) and isinstance(other, AreaRule) and rule.labels == other.labels:
        return rule.min_area_px, other.min_area_px, "min_area_px"
    if isinstance(rule, FractionRule) and isinstance(other, FractionRule) and rule.labels == other.labels:
        return rule.min_total_fraction, other.min_total_fraction, "min_total_fraction"
    return 0.0, 0.0, ""


def score_band(fail: tuple[Rule, ...] | None, review: tuple[Rule, ...]) -> str:
    """The score band in words (`score <= 0.4 OK, 0.4 < score <= 0.7 REVIEW, above NG`), "" without one."""
    low = next((r for r in review if isinstance(r, ScoreRule)), None)
    high = next((r for r in fail or () if isinstance(r, ScoreRule)), None)
    if low is None or high is None:
        return ""
    a, b = f"{low.score_above:g}", f"{high.score_above:g}"
    if high.inclusive:
        return f"score <= {a} OK, {a} < score < {b} REVIEW, from {b} NG"
    return f"score <= {a} OK, {a} < score <= {b} REVIEW, above {b} NG"
