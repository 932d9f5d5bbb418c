"""Judging a result's instances by an instance rule (app.inference.model.instance_rules): counts per class, an
object's area in pixels or mm², a class's score. Pure functions of a rule and the instances, as every other rule
(app.inference.decide.verdict dispatches to them).

Fail closed: no instances to judge (a result made elsewhere than an instance model's pipeline), an object's score
that is not finite, or a mm² rule without a pixel size make the rule hold (the image NG, never OK), with the reason.
"""

from __future__ import annotations

import math

from app.inference.model.instance_rules import ClassLimit, InstanceRule, mm_text
from app.inference.model.instances import Instance, Instances


def instance_fired(rule: InstanceRule, instances: Instances | None) -> str:
    """Why `rule` holds for `instances` (`scratch count 3 > 2`, `scratch area 6.1 mm² > 4`), or ""."""
    if instances is None:
        return f"no instances to judge {rule.describe()} by"
    if rule.kind == "max_area_mm2" and rule.mm_per_px is None:
        return f"no pixel size to judge {rule.describe()} by"
    broken = not_finite_score(instances)
    if broken:
        return broken
    counted = [item for item in instances.items if item.score >= rule.min_score]
    for limit in rule.limits:
        reason = _limit_fired(rule, limit, [item for item in counted if limit.takes(item.class_index)])
        if reason:
            return reason
    return ""


def _limit_fired(rule: InstanceRule, limit: ClassLimit, items: list[Instance]) -> str:
    if rule.kind == "count_above":
        return f"{limit.what} count {len(items)} > {limit.limit:g}" if len(items) > limit.limit else ""
    if rule.kind == "score_above":
        best = max((item.score for item in items), default=None)
        return "" if best is None or best <= limit.limit else f"{limit.what} score {best:.4g} > {limit.limit:g}"
    if rule.kind == "max_area_px":
        largest = max((item.area_px for item in items), default=0)
        return f"{limit.what} area {largest} px > {limit.limit:g}" if largest > limit.limit else ""
    return _mm2_fired(rule, limit, items)


def _mm2_fired(rule: InstanceRule, limit: ClassLimit, items: list[Instance]) -> str:
    assert rule.mm_per_px is not None  # instance_fired failed closed without one
    per_pixel = rule.mm_per_px[0] * rule.mm_per_px[1]
    largest = max((item.area_px * per_pixel for item in items), default=0.0)
    if largest <= limit.limit:
        return ""
    return f"{limit.what} area {largest:.4g} mm² > {limit.limit:g} (at {mm_text(rule.mm_per_px)} mm/px)"


def not_finite_score(instances: Instances | None) -> str:
    """Why an object's score is NaN or ±inf (`pit score nan is not finite`), or ""."""
    bad = next((item for item in instances.items if not math.isfinite(item.score)), None) if instances else None
    return "" if bad is None else f"{bad.class_name} score {bad.score} is not finite"


def judgeable_instances(rule: InstanceRule, instances: Instances | None) -> bool:
    """Whether `instances` can be judged by `rule` (there are some, and a mm² rule has its pixel size)."""
    return instances is not None and (rule.kind != "max_area_mm2" or rule.mm_per_px is not None)
