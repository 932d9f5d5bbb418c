"""A volume's verdict (app.inference.decide.verdict's rules on volumes): the slices are judged by the plane rules, the
whole volume by its 3D components (ComponentRule, `min_component_ml`), and the two combined so that the first NG
slice comes first, then the volume rules' NG, then a REVIEW slice — REVIEW never hides an NG. Fail closed as the
image rules: no components found, or a component without a voxel size to measure it by, fires."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.inference.decide.verdict import Verdict, decide
from app.inference.model.rules import VOLUME_CONNECTIVITY, ComponentRule, Rule

if TYPE_CHECKING:
    from app.inference.decide.lesions import Lesion
    from app.inference.image.pipeline import Result
    from app.inference.model.spec import ModelSpec


def plane_rules(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The rules that judge one image or slice: all but the volume rules (ComponentRule)."""
    return tuple(rule for rule in rules if not isinstance(rule, ComponentRule))


def slice_verdict(spec: ModelSpec, result: Result) -> Verdict | None:
    """The verdict of one slice of a volume: by the rules but the volume rules, which judge the whole volume
    (`volume_verdict`); None without a verdict section, or when every rule is a volume rule."""
    if spec.verdict is None:
        return None
    rules = plane_rules(spec.verdict)
    return decide(rules, result, spec, review=spec.review) if rules or spec.review else None


def combined(slices: Sequence[tuple[int, Verdict]], whole: Verdict | None) -> Verdict | None:
    """A volume's verdict from its slices' (number, verdict) and the volume rules' (`whole`): the first NG slice,
    else the volume rules' NG, else the first REVIEW slice, else the volume rules' verdict or OK; None: nothing
    judged it. REVIEW never hides an NG."""
    if not slices and whole is None:
        return None
    bad = next(((n, v) for n, v in slices if not v.ok and not v.review), None)
    if bad is not None:
        return Verdict(False, f"slice {bad[0]}: {bad[1].reason}")
    if whole is not None and not whole.ok:
        return whole
    doubt = next(((n, v) for n, v in slices if v.review), None)
    if doubt is not None:
        return Verdict(False, f"slice {doubt[0]}: {doubt[1].reason}", review=True)
    return Verdict(True) if whole is None else whole


def volume_verdict(rules: tuple[Rule, ...], found: Sequence[Lesion] | None, *, why_not: str = "") -> Verdict | None:
    """The volume rules (ComponentRule) on a volume's components (`found`: app.inference.decide.lesions at
    VOLUME_CONNECTIVITY; None: none could be found, `why_not` says why): NG with the first that fired
    (`lesion component 1.23 mL >= 0.5 mL (26-connected)`), OK when none did; None without volume rules."""
    mine = [rule for rule in rules if isinstance(rule, ComponentRule)]
    if not mine:
        return None
    for rule in mine:
        reason = component_fired(rule, found, why_not)
        if reason:
            return Verdict(False, reason)
    return Verdict(True)


def component_fired(rule: ComponentRule, found: Sequence[Lesion] | None, why_not: str = "") -> str:
    """Why `rule` holds for a volume's components, or "". Fails closed: no components found (`why_not`), or a
    component of the class without a voxel size to measure it by, fires."""
    if found is None:
        return f"no volume to judge {rule.describe()} by" + (f" ({why_not})" if why_not else "")
    largest = max((x for x in found if x.label in rule.labels), key=lambda x: x.voxels, default=None)
    if largest is None:
        return ""
    if largest.ml is None:
        return f"no voxel size to judge {rule.describe()} by (the files give no spacing)"
    if largest.ml < rule.min_component_ml:
        return ""
    name = rule.names[rule.labels.index(largest.label)]
    return (f"{name} component {largest.ml:.3g} mL >= {rule.min_component_ml:g} mL "
            f"({VOLUME_CONNECTIVITY}-connected, {largest.voxels} voxels)")
