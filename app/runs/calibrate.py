"""Calibration of the verdict band from labelled examples (seglens-cli calibrate): score an OK folder and an NG
folder through the one folder run (app.runs.folder_run), split each at random, choose the limits on one part and
measure what they achieve on the other.

How the limits are chosen (NG is the positive class; an image is NG above the fail limit, REVIEW above the review
limit up to the fail limit, OK at or below the review limit):
- `max_fnr` (with `max_fpr`): a defect passed as OK is the costly error, so the *review* limit is the highest one
  that passes at most ⌊max_fnr · n_NG⌋ of the NG images as OK, and the *fail* limit the lowest one that calls at most
  ⌊max_fpr · n_OK⌋ of the OK images NG. Between them lies the REVIEW band. When the two sets separate (the fail limit
  would fall at or below the review limit) there is no band: the review limit alone becomes the fail limit.
- `best_f1`: one limit, the one with the best F1 of NG on the calibration part; no band.
Each limit sits midway between the two neighbouring calibration scores it falls between (never on a score: the
held-out images fall either side of a gap, not onto its edge).

What is reported on the held-out part: FNR (NG images passed as OK), FPR (OK images called NG) and the REVIEW share
(all images in the band), each with its exact 95 % Clopper-Pearson interval: exact binomial, right for the small
sets a line has, where a normal approximation would give intervals below 0 %.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import SegLensError, shown

if TYPE_CHECKING:
    from app.inference.session import ModelSession

CONFIDENCE = 0.95
FEW = 30  # fewer held-out images of a class than this: its interval is wide, and said so
CALIBRATED_KINDS = ("binary", "anomaly")  # outputs with an image score worth calibrating


class CalibrationRefused(SegLensError):
    """A calibration that cannot go ahead: its one line."""


@dataclass(frozen=True)
class FolderScores:
    """A folder's image scores (by file, in order) and its error lines (an unreadable image is a row, not the end)."""

    scores: tuple[float, ...]
    names: tuple[str, ...]
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Limits:
    """The chosen limits: NG above `fail`; REVIEW above `review` (None: no band) up to `fail`."""

    fail: float
    review: float | None

    def state(self, score: float) -> str:
        """"OK", "REVIEW" or "NG" of one score under these limits (the sidecar's rules: strictly above)."""
        if score > self.fail:
            return "NG"
        return "REVIEW" if self.review is not None and score > self.review else "OK"


@dataclass(frozen=True)
class Rate:
    """`count` of `total`, and its exact two-sided 95 % interval."""

    count: int
    total: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return self.count / self.total if self.total else float("nan")

    def text(self) -> str:
        """`1/30 = 3.3 % [0.1 %, 17.2 %]`."""
        return (f"{self.count}/{self.total} = {_pct(self.value)} [{_pct(self.low)}, {_pct(self.high)}]"
                if self.total else "0/0 (no images)")

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "of": self.total, "ci95": [round(self.low, 4), round(self.high, 4)]}


@dataclass(frozen=True)
class Measured:
    """The held-out part's rates under the limits."""

    fnr: Rate
    fpr: Rate
    review: Rate


@dataclass(frozen=True)
class Split:
    """Each class's scores in the part the limits are chosen on and the part they are measured on."""

    ok_pick: np.ndarray
    ng_pick: np.ndarray
    ok_test: np.ndarray
    ng_test: np.ndarray


def folder_scores(model: ModelSession, folder: Path, *, flag: str,
                  told: Callable[[str], None] = lambda _: None) -> FolderScores:
    """Every image under `folder` through `model` (app.runs.folder_run.run_folder, nothing written): its image
    score, or its error line (`told` each as it comes). An empty folder is refused in one line."""
    from app.inference.verdict import image_score
    from app.runs.folder_run import LocalRunner, PlanRefused, RunPlan, plan_run, run_folder
    from app.runs.plan import Callbacks

    if not folder.is_dir():
        raise CalibrationRefused(f"{flag} {shown(folder)}: not a folder")
    try:
        probe = plan_run(model.spec, [folder], out=folder / ".seglens-calibrate", save=())
    except PlanRefused as exc:
        raise CalibrationRefused(f"{flag} {exc}") from None
    scores: list[float] = []
    names: list[str] = []
    errors: list[str] = []

    def outcome(done: Any, _summary: Any) -> None:
        score = image_score(done.result) if done.result is not None else None
        if done.error is not None or score is None or not math.isfinite(score):
            line = done.error or f"{shown(done.input.path)}: no finite image score ({score})"
            errors.append(line)
            told(f"error: {line}")
            return
        scores.append(score)
        names.append(str(done.input.path))

    plan = RunPlan(spec=model.spec, inputs=probe.inputs, out=None, save=())
    run_folder(plan, LocalRunner(model), progress=Callbacks(outcome=outcome))
    if not scores:
        raise CalibrationRefused(f"{flag} {shown(folder)}: none of its {len(errors)} image(s) could be scored")
    return FolderScores(tuple(scores), tuple(names), tuple(errors))


def refuse_unscored(kind: str, name: str) -> None:
    """A model whose output has no image score to calibrate, in one line."""
    if kind not in CALIBRATED_KINDS:
        raise CalibrationRefused(f"{name}: its output is {'an' if kind[0] in 'aeiou' else 'a'} {kind} output, "
                                 "which has no image score to calibrate (calibrate needs an anomaly or binary "
                                 "segmentation model: NG above a score limit)")


def split(ok: Sequence[float], ng: Sequence[float], *, fraction: float, seed: int) -> Split:
    """Each class shuffled (numpy's default generator at `seed`) and cut: `fraction` of it (at least one image,
    at least one left) to choose on, the rest to measure on. A class of one image cannot be split: refused."""
    rng = np.random.default_rng(seed)
    parts = []
    for name, values in (("--ok", ok), ("--ng", ng)):
        if len(values) < 2:
            raise CalibrationRefused(f"{name}: {len(values)} image(s) scored; at least 2 are needed (one to choose "
                                     "the limits on, one to measure them on)")
        shuffled = np.asarray(values, np.float64)[rng.permutation(len(values))]
        cut = min(max(1, round(fraction * len(values))), len(values) - 1)
        parts.append((shuffled[:cut], shuffled[cut:]))
    return Split(parts[0][0], parts[1][0], parts[0][1], parts[1][1])


def pick_limits(ok: np.ndarray, ng: np.ndarray, *, max_fnr: float | None = None, max_fpr: float | None = None,
                best_f1: bool = False) -> Limits:
    """The limits chosen on these scores (the module's docstring says how)."""
    everything = np.sort(np.concatenate([ok, ng]))
    if best_f1:
        return Limits(_best_f1(ok, ng, everything), None)
    assert max_fnr is not None
    missed = math.floor(max_fnr * len(ng) + 1e-9)  # NG images the review limit may pass as OK
    review = _below(np.sort(ng)[missed], everything) if missed < len(ng) else float(np.max(ng))
    called = math.floor((max_fpr if max_fpr is not None else max_fnr) * len(ok) + 1e-9)  # OK images called NG
    fail = _above(np.sort(ok)[::-1][called], everything) if called < len(ok) else float(np.min(ok))
    return Limits(fail, review) if fail > review else Limits(review, None)


def _below(score: float, everything: np.ndarray) -> float:
    """Midway between `score` and the highest calibration score below it (a little below when none is)."""
    lower = everything[everything < score]
    return float((lower[-1] + score) / 2) if lower.size else float(score - max(1e-6, abs(score) * 1e-3))


def _above(score: float, everything: np.ndarray) -> float:
    """Midway between `score` and the lowest calibration score above it (`score` itself when none is)."""
    higher = everything[everything > score]
    return float((higher[0] + score) / 2) if higher.size else float(score)


def _best_f1(ok: np.ndarray, ng: np.ndarray, everything: np.ndarray) -> float:
    """The gap midpoint whose limit (NG above it) has the best F1 of NG; the lowest of equals."""
    candidates = np.unique(np.concatenate([(everything[:-1] + everything[1:]) / 2, [everything[0] - 1e-6]]))
    best, best_f1 = float(candidates[0]), -1.0
    for limit in candidates:
        tp, fp = int(np.sum(ng > limit)), int(np.sum(ok > limit))
        f1 = 2 * tp / (2 * tp + fp + (len(ng) - tp)) if tp else 0.0
        if f1 > best_f1:
            best, best_f1 = float(limit), f1
    return best


def measure(limits: Limits, ok: np.ndarray, ng: np.ndarray) -> Measured:
    """FNR, FPR and the REVIEW share of these scores under `limits`, with their exact intervals."""
    ok_states = [limits.state(float(s)) for s in ok]
    ng_states = [limits.state(float(s)) for s in ng]
    review = ok_states.count("REVIEW") + ng_states.count("REVIEW")
    return Measured(rate(ng_states.count("OK"), len(ng)), rate(ok_states.count("NG"), len(ok)),
                    rate(review, len(ok) + len(ng)))


def rate(count: int, total: int) -> Rate:
    """`count` of `total` with its Clopper-Pearson interval."""
    low, high = clopper_pearson(count, total)
    return Rate(count, total, low, high)


def clopper_pearson(count: int, total: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact two-sided binomial interval of `count` successes in `total` trials: the p where the binomial
    tail on each side is (1 − confidence) / 2, found by bisection (equal to the Beta quantiles; no scipy)."""
    if total <= 0:
        return 0.0, 1.0
    tail = (1 - confidence) / 2
    low = 0.0 if count == 0 else _solve(lambda p: _upper_tail(count, total, p) - tail)
    high = 1.0 if count == total else _solve(lambda p: tail - _lower_tail(count, total, p))
    return low, high


def _solve(f: Callable[[float], float]) -> float:
    """The root in (0, 1) of an increasing `f`."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def _lower_tail(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (n of thousands does not overflow)."""
    return sum(_pmf(i, n, p) for i in range(k + 1))


def _upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k)."""
    return sum(_pmf(i, n, p) for i in range(k, n + 1))


def _pmf(i: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 1.0 if i == 0 else 0.0
    if p >= 1.0:
        return 1.0 if i == n else 0.0
    log = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)
    return math.exp(log)


def wide_notes(parts: Split) -> list[str]:
    """A note for each class with fewer than FEW images to measure on, and when the target allows no miss."""
    notes = [f"note: only {len(values)} {name} image(s) to measure on: the intervals are wide"
             for name, values in (("OK", parts.ok_test), ("NG", parts.ng_test)) if len(values) < FEW]
    return notes


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"
