"""The verdict's rules as records, resolved from the sidecar's `verdict.fail_if` and `verdict.review_if` sections:
what each rule measures and its limit, class names already turned into label values, and the refusals of a rule that
does not fit the model (app.inference.decide.verdict judges a result by them; the spec carries them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.errors import with_article
from app.inference.model.instance_rules import INSTANCE_KINDS, InstanceRule, instance_band, resolve_instance_rule


@dataclass(frozen=True)
class VerdictRules:
    """A verdict section given apart from the sidecar (a station file's `verdict:`), in place of the sidecar's:
    each rule already checked key by key as a sidecar's (app.inference.model.sidecar.rules: `{"kind": ...,
    "limit": ..., "class": ...}`), its class names resolved when the spec is built (they need the model's
    classes). `fail_if` or `review_if` None: not given. `source` names where it was written, in refusals."""

    fail_if: tuple[dict[str, Any], ...] | None = None
    review_if: tuple[dict[str, Any], ...] | None = None
    source: str = "the verdict"

    def as_overrides(self) -> dict[str, Any]:
        """The rules as the sidecar's flat keys (`verdict.fail_if`, `verdict.review_if`), those given."""
        keys = {"verdict.fail_if": self.fail_if, "verdict.review_if": self.review_if}
        return {key: rules for key, rules in keys.items() if rules is not None}


@dataclass(frozen=True)
class AreaRule:
    class_name: str
    labels: tuple[int, ...]  # every label value with that name (two classes may share one)
    min_area_px: int

    def describe(self) -> str:
        return f"{with_article(self.class_name)} component of >= {self.min_area_px} px"

    def as_dict(self) -> dict[str, Any]:
        return {"class": self.class_name, "min_area_px": self.min_area_px}


@dataclass(frozen=True)
class FractionRule:
    class_name: str
    labels: tuple[int, ...]
    min_total_fraction: float

    def describe(self) -> str:
        return f"{self.class_name} covers >= {percent(self.min_total_fraction)} % of the image"

    def as_dict(self) -> dict[str, Any]:
        return {"class": self.class_name, "min_total_fraction": self.min_total_fraction}


@dataclass(frozen=True)
class ScoreRule:
    score_above: float
    inclusive: bool = False  # True: fires at the limit too (an anomaly model's default rule, score >= threshold)

    @property
    def sign(self) -> str:
        return ">=" if self.inclusive else ">"

    def describe(self) -> str:
        return f"image score {self.sign} {self.score_above:g}"

    def as_dict(self) -> dict[str, Any]:
        return {"score_at_least" if self.inclusive else "score_above": self.score_above}


@dataclass(frozen=True)
class Top1Rule:
    class_names: tuple[str, ...]
    indices: frozenset[int]

    def describe(self) -> str:
        return f"top-1 class in [{', '.join(self.class_names)}]"

    def as_dict(self) -> dict[str, Any]:
        return {"top1_in": list(self.class_names)}


# the connectivity of the components a volume rule judges and the report counts (stated in every reason and column)
VOLUME_CONNECTIVITY = 26


@dataclass(frozen=True)
class ComponentRule:
    class_name: str | None  # None: any class but the background
    labels: tuple[int, ...]
    names: tuple[str, ...]  # each label's class name, for the reason
    min_component_ml: float

    def describe(self) -> str:
        what = f"{with_article(self.class_name)} component" if self.class_name else \
            "a component of any class but the background"
        return f"{what} of >= {self.min_component_ml:g} mL ({VOLUME_CONNECTIVITY}-connected, in 3D)"

    def as_dict(self) -> dict[str, Any]:
        return {**({} if self.class_name is None else {"class": self.class_name}),
                "min_component_ml": self.min_component_ml}


Rule = AreaRule | FractionRule | ScoreRule | Top1Rule | ComponentRule | InstanceRule


# output kinds (app.inference.model.spec.OutputSpec.kind) whose results carry an image score, and those where it is a
# probability (0..1: a binary model's highest foreground probability, a classifier's top-1, the best object's score)
SCORED_KINDS = ("binary", "anomaly", "classification", "instances")
PROBABILITY_KINDS = ("binary", "classification", "instances")


def resolve_rules(raw: tuple[dict[str, Any], ...], task: str, class_names: tuple[str, ...],
                  refuse: Callable[[str, str], Exception], *, output_kind: str,
                  section: str = "verdict.fail_if") -> tuple[Rule, ...]:
    """The sidecar's parsed rules (app.inference.model.sidecar) as Rule records, class names resolved to label values;
    `refuse(key, problem)` makes the error for a rule that does not fit the task (areas need a mask, top-1 needs
    a classifier), names a class the model does not have, or could never fire (`score_above` on an `output_kind`
    without an image score, or at a limit its probability can never pass)."""

    def labels(key: str, name: str) -> tuple[int, ...]:
        found = tuple(i for i, known in enumerate(class_names) if known == name)
        if not found:
            known = ", ".join(class_names)
            known = known if len(known) <= 200 else known[:197] + "..."
            shown = name if len(name) <= 60 else name[:57] + "..."
            raise refuse(key, f"is '{shown}', not a class of this model (classes: {known})")
        return found

    def rule(key: str, item: dict[str, Any]) -> Rule:
        kind = item["kind"]
        if kind in INSTANCE_KINDS or "limits" in item:  # on objects, or a per-class score (`score_above: {pit: 0.5}`)
            return resolve_instance_rule(key, item, task, labels, refuse)
        if kind == "score_above":
            return ScoreRule(score_limit(f"{key}.score_above", item["limit"], output_kind, refuse))
        needs = "classification" if kind == "top1_in" else "segmentation"
        if task != needs:
            instead = " (on objects: max_area_px, count_above)" if task == "instances" else ""
            raise refuse(f"{key}.{kind}", f"applies to {needs} models, but this model's task is {task}{instead}")
        if kind == "top1_in":
            names = item["classes"]
            return Top1Rule(names, frozenset(i for n in names for i in labels(f"{key}.top1_in", n)))
        if kind == "min_component_ml":
            every = tuple(range(1, max(2, len(class_names))))
            found = labels(f"{key}.class", item["class"]) if "class" in item else every
            if 0 in found:  # the volume's components are counted for every class but the background
                raise refuse(f"{key}.class", f"is '{item['class']}', the background (label 0), whose components are "
                                             "not counted: name a class, or leave class out for any class but the "
                                             "background")
            return component_rule(item, class_names, found)
        found = labels(f"{key}.class", item["class"])
        if kind == "min_area_px":
            return AreaRule(item["class"], found, item["limit"])
        return FractionRule(item["class"], found, item["limit"])

    return tuple(rule(f"{section}[{i}]", item) for i, item in enumerate(raw))


def component_rule(item: dict[str, Any], class_names: tuple[str, ...], found: tuple[int, ...]) -> ComponentRule:
    """A `min_component_ml` rule of the labels `found` (its class's, or every label but the background's)."""
    names = tuple(class_names[i] if i < len(class_names) else f"class {i}" for i in found)
    return ComponentRule(item.get("class"), found, names, item["limit"])


def score_limit(key: str, limit: float, output_kind: str, refuse: Callable[[str, str], Exception]) -> float:
    """`limit` of a `score_above` rule, refused where the rule could never fire (or would fire on every image)."""
    if output_kind not in SCORED_KINDS:
        what = {"scores": "a scores output", "labels": "a labels output"}.get(output_kind, f"a {output_kind} output")
        raise refuse(key, f"applies to models with an image score (binary segmentation, anomaly, classification, "
                          f"instances), "
                          f"but this model's output is {what}, which has none: the rule could never fire")
    if output_kind in PROBABILITY_KINDS and limit >= 1:
        raise refuse(key, f"is {limit:g}, but this model's image score is a probability (0 to 1) and the rule "
                          "fires only above the limit: it could never fire; give a limit from 0 to below 1")
    if output_kind in PROBABILITY_KINDS and limit < 0:
        raise refuse(key, f"is {limit:g}, but this model's image score is a probability (0 to 1): every image "
                          "would be NG; give a limit from 0 to below 1")
    return limit



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
    if isinstance(rule, InstanceRule) and isinstance(other, InstanceRule):
        return instance_band(rule, other)
    return 0.0, 0.0, ""

def percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}"
