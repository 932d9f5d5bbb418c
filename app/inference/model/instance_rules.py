"""Verdict rules on instances (a detection, instance-segmentation or oriented-box model's objects): how each is
written in `verdict.fail_if` / `verdict.review_if`, checked as the sidecar is read, and resolved to a record with
the model's classes (app.inference.decide.instance_verdict judges a result by them).

Each rule is one mapping whose limit is a number (any class) or a mapping of class name to limit:
- `count_above: {scratch: 2}`: more than 2 scratches (`count_above: 3`: more than 3 objects of any class);
- `max_area_px: {scratch: 500}`: an object of more than 500 pixels (its mask's, else its box's);
- `max_area_mm2: {scratch: 4}` with `mm_per_px: 0.05` (or `[row_mm, column_mm]`): an object of more than 4 mm²;
- `score_above: {pit: 0.5}`: an object scoring more than 0.5 (a number instead of a mapping is the image score:
  the best object's, app.inference.model.rules.ScoreRule).
`count_above`, `max_area_px` and `max_area_mm2` take `min_score`: only objects scoring at least this count for the
rule (the model's own `detect.conf` already dropped those below it). A mapping of several classes fires when any
of its limits is passed; every limit is strict (a count of 2 passes `count_above: 2`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.inference.model.validators import fraction, number, shown
from app.inference.model.validators import text as nonempty_text

# the instance kinds and the keys each takes beside its own (`score_above` with a mapping is one too)
INSTANCE_KINDS = {"count_above": {"min_score"}, "max_area_px": {"min_score"},
                  "max_area_mm2": {"min_score", "mm_per_px"}}
MAX_CLASS_LIMITS = 1000
_UNITS = {"count_above": "", "max_area_px": " px", "max_area_mm2": " mm²", "score_above": ""}


@dataclass(frozen=True)
class ClassLimit:
    """One class's limit in an instance rule; `class_name` None: objects of any class."""

    class_name: str | None
    indices: frozenset[int]  # the class indices with that name; empty for any class
    limit: float

    def takes(self, class_index: int) -> bool:
        return not self.indices or class_index in self.indices

    @property
    def what(self) -> str:
        return self.class_name if self.class_name is not None else "object"


@dataclass(frozen=True)
class InstanceRule:
    """A rule on a result's instances (module docstring): `kind` one of count_above, max_area_px, max_area_mm2,
    score_above; `mm_per_px` (row, column) for max_area_mm2, None where it was not given (judged: fails closed)."""

    kind: str
    limits: tuple[ClassLimit, ...]
    min_score: float = 0.0
    mm_per_px: tuple[float, float] | None = None

    def describe(self) -> str:
        unit = _UNITS[self.kind]
        parts = [f"{item.what} count > {item.limit:g}" if self.kind == "count_above" else
                 f"{item.what} score > {item.limit:g}" if self.kind == "score_above" else
                 f"{item.what} area > {item.limit:g}{unit}" for item in self.limits]
        scoring = f" (objects scoring >= {self.min_score:g})" if self.min_score > 0 else ""
        size = "" if self.mm_per_px is None else f" at {mm_text(self.mm_per_px)} mm/px"
        return " or ".join(parts) + size + scoring

    def as_dict(self) -> dict[str, Any]:
        """The rule as the sidecar writes it."""
        whole = self.kind in ("count_above", "max_area_px")
        values = {item.class_name: int(item.limit) if whole else item.limit for item in self.limits}
        limit: Any = values.get(None, values)
        extra: dict[str, Any] = {"min_score": self.min_score} if self.min_score > 0 else {}
        if self.mm_per_px is not None:
            row, column = self.mm_per_px
            extra["mm_per_px"] = row if row == column else [row, column]
        return {self.kind: limit, **extra}


def mm_text(mm_per_px: tuple[float, float]) -> str:
    row, column = mm_per_px
    return f"{row:g}" if row == column else f"{row:g} × {column:g}"


# -- reading a rule (app.inference.model.sidecar) ---------------------------------------------------------------

def class_limits(kind: str) -> Callable[[Any], tuple[tuple[str | None, float], ...]]:
    """The check of a `kind` rule's value: a limit (any class) or a mapping of 1 to 1000 class names to limits."""
    check = _LIMIT_CHECKS[kind]

    def limits(value: Any) -> tuple[tuple[str | None, float], ...]:
        if not isinstance(value, dict):
            return ((None, check(value)),)
        if not value or len(value) > MAX_CLASS_LIMITS:
            raise ValueError(f"must be a limit or a mapping of 1 to {MAX_CLASS_LIMITS} class names to limits "
                             f"({{scratch: 2}}), got {shown(value)}")
        try:
            return tuple((nonempty_text(name), check(limit)) for name, limit in value.items())
        except ValueError as exc:
            raise ValueError(f"must map class names to limits ({{scratch: 2}}): {exc}") from exc

    return limits


def _count(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
        raise ValueError(f"must be a whole number from 0 (any object) up, got {shown(value)}")
    return float(value)


def _square_mm(value: Any) -> float:
    area = number(value)
    if area <= 0:
        raise ValueError(f"must be more than 0 (mm²), got {shown(value)}")
    return area


def _score(value: Any) -> float:
    score = number(value)
    if not 0 <= score < 1:
        raise ValueError(f"must be from 0 to below 1 (an object's score is a probability: the rule fires above "
                         f"it), got {shown(value)}")
    return score


_LIMIT_CHECKS: dict[str, Callable[[Any], float]] = {
    "count_above": _count, "max_area_px": _count, "max_area_mm2": _square_mm, "score_above": _score}


def mm_per_px(value: Any) -> tuple[float, float]:
    """`mm_per_px`: the image's pixel size in mm, one number (square pixels) or [row, column], each above 0."""
    sizes = value if isinstance(value, list) else [value]
    if len(sizes) not in (1, 2):
        raise ValueError(f"must be a pixel size in mm or [row_mm, column_mm], got {shown(value)}")
    found = [number(size) for size in sizes]
    if any(size <= 0 for size in found):
        raise ValueError(f"must be more than 0 mm, got {shown(value)}")
    return found[0], found[-1]


def extra_checks() -> dict[str, Callable[[Any], Any]]:
    """The checks of the keys an instance rule takes beside its limit."""
    return {"min_score": fraction, "mm_per_px": mm_per_px}


# -- resolving a rule with the model's classes (app.inference.model.rules) ----------------------------------------

def resolve_instance_rule(key: str, item: dict[str, Any], task: str,
                          labels: Callable[[str, str], tuple[int, ...]],
                          refuse: Callable[[str, str], Exception]) -> InstanceRule:
    """`item` (a parsed instance rule at `key`) as a record; refused on a model without instances, or when a
    max_area_mm2 rule has no pixel size. `labels(key, name)` resolves a class name (refusing one the model lacks)."""
    kind = item["kind"]
    if task != "instances":
        raise refuse(f"{key}.{kind}", f"on {'per-class scores' if kind == 'score_above' else 'objects'} applies "
                                      "to instance models (detection, instance segmentation, oriented boxes), but "
                                      f"this model's task is {task}")
    if kind == "max_area_mm2" and "mm_per_px" not in item:
        raise refuse(f"{key}.mm_per_px", "is needed by max_area_mm2: the image's pixel size in mm (a number, or "
                                         "[row_mm, column_mm]); SegLens reads none from the images")
    limits = tuple(ClassLimit(name, frozenset() if name is None else frozenset(labels(f"{key}.{kind}", name)),
                              limit) for name, limit in item["limits"])
    return InstanceRule(kind, limits, item.get("min_score", 0.0), item.get("mm_per_px"))


def instance_band(rule: InstanceRule, other: InstanceRule) -> tuple[float, float, str]:
    """(review limit, fail limit, the review key) of the first class both rules limit the same way where the review
    limit is not below the fail limit; (0, 0, "") when there is none."""
    same = (rule.kind, rule.min_score, rule.mm_per_px) == (other.kind, other.min_score, other.mm_per_px)
    for mine in rule.limits if same else ():
        for theirs in other.limits:
            if mine.class_name == theirs.class_name and mine.limit >= theirs.limit:
                where = rule.kind if mine.class_name is None else f"{rule.kind}.{mine.class_name}"
                return mine.limit, theirs.limit, where
    return 0.0, 0.0, ""
