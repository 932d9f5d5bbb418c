"""The verdict band: `verdict.review_if` rules resolved beside `fail_if`, and refused when a pair cannot make a band.

A review rule is the same kind of rule as a fail rule (app.inference.decide.verdict); it makes an image REVIEW when no
fail rule fired. A review limit at or above the fail limit of the same measure (`review_if: {score_above: 0.8}` with
`fail_if: {score_above: 0.7}`) would leave the band empty, which is a typo rather than a choice: it is refused, the
review key named. A volume's component rule (`min_component_ml`) judges a whole volume and has no band yet.
"""

from __future__ import annotations

from app.inference.model.rules import Rule, ScoreRule


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
