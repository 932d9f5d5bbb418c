"""The sidecar's `verdict:` section checked (app.inference.model.sidecar calls these): `fail_if` and `review_if` rule
lists — each rule one mapping of a single kind, named keys only, limits in range — and `calibrated`, the
provenance seglens-cli calibrate writes. Class names are resolved to the model's classes later, by the spec."""

from __future__ import annotations

from typing import Any, cast

from app.inference.model.validators import Check, KeyedValueError, fraction, number, short_key, shown, whole
from app.inference.model.validators import text as nonempty_text


def _millilitres(value: Any) -> float:
    ml = number(value)
    if ml <= 0:
        raise ValueError(f"must be more than 0 (mL), got {shown(value)}")
    return ml


def calibrated(value: Any) -> dict[str, Any]:
    """`verdict.calibrated`: seglens-cli calibrate's provenance of the limits (a mapping, kept as written)."""
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping (written by seglens-cli calibrate), got {shown(value)}")
    return value


MAX_VERDICT_RULES = 64
_RULE_KEYS = {  # rule kind: (its keys, the check of its limit)
    "min_area_px": ({"class", "min_area_px"}, whole(1, 2**31 - 1)),
    "min_total_fraction": ({"class", "min_total_fraction"}, fraction),
    "min_component_ml": ({"class", "min_component_ml"}, _millilitres),  # volumes only; class optional
    "score_above": ({"score_above"}, number),
    "top1_in": ({"top1_in"}, None),
}


def rules(value: Any) -> tuple[dict[str, Any], ...]:
    """`verdict.fail_if` (and `verdict.review_if`): a list of rules, each one mapping of a single kind, or one such
    mapping alone (`{score_above: 0.7}`); class names are resolved to the model's classes later, by the spec."""
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value or len(value) > MAX_VERDICT_RULES:
        raise ValueError(f"must be a rule or a list of 1 to {MAX_VERDICT_RULES} rules, got {shown(value)}")
    return tuple(_verdict_rule(index, item) for index, item in enumerate(value))


def _verdict_rule(index: int, item: Any) -> dict[str, Any]:
    where = f"[{index}]"
    kinds = [k for k in _RULE_KEYS if isinstance(item, dict) and k in item]
    if len(kinds) != 1:
        raise KeyedValueError(where, f"must be one rule: {{class: ..., min_area_px: ...}}, {{class: ..., "
                                     f"min_total_fraction: ...}}, {{min_component_ml: ...}}, {{score_above: ...}} or "
                                     f"{{top1_in: [...]}}, "
                                     f"got {shown(item)}")
    rule_kind = kinds[0]
    keys, check = _RULE_KEYS[rule_kind]
    unknown = sorted(str(k) for k in set(item) - keys)
    if unknown:
        raise KeyedValueError(where, f"has unknown key '{short_key(unknown[0])}' (a {rule_kind} rule takes "
                                     f"{', '.join(sorted(keys))})")
    if "class" in keys and "class" not in item and rule_kind != "min_component_ml":
        raise KeyedValueError(where, f"needs 'class' (the class the {rule_kind} rule measures)")
    rule: dict[str, Any] = {"kind": rule_kind}
    try:
        if rule_kind == "top1_in":
            names = item["top1_in"]
            if not isinstance(names, list) or not names or len(names) > 1000:
                raise ValueError(f"must be a list of 1 to 1000 class names, got {shown(names)}")
            rule["classes"] = tuple(nonempty_text(n) for n in names)
        else:
            rule["limit"] = cast(Check, check)(item[rule_kind])  # only top1_in has no limit check
    except ValueError as exc:
        raise KeyedValueError(f"{where}.{rule_kind}", str(exc)) from exc
    if "class" in keys and "class" in item:
        try:
            rule["class"] = nonempty_text(item["class"])
        except ValueError as exc:
            raise KeyedValueError(f"{where}.class", str(exc)) from exc
    return rule
