"""Calibration of the verdict band from labelled examples (seglens-cli calibrate): score an OK folder and an NG
folder through the one folder run (app.runs.folder.run), split each at random, choose the limits on one part and
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
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import SegLensError, shown
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.model.session import ModelSession
    from app.io.discover import InputFile

CONFIDENCE = 0.95
FEW = 30  # fewer held-out images of a class than this: its interval is wide, and said so
# outputs with an image score worth calibrating (an instance model's: its best object's score, 0 with none)
CALIBRATED_KINDS = ("binary", "anomaly", "instances")


class CalibrationRefused(SegLensError):
    """A calibration that cannot go ahead: its one line."""


class CalibrationCancelled(CalibrationRefused):
    """Stopped by its caller (the viewer's Cancel) between two images."""


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


def _planned(model: ModelSession, folder: Path, *, flag: str) -> tuple[InputFile, ...]:
    """The folder's inputs as `run` finds them; a missing or empty folder refused in one line."""
    from app.runs.folder.run import PlanRefused, plan_run

    if not folder.is_dir():
        raise CalibrationRefused(f"{flag} {shown(folder)}: not a folder")
    try:
        return tuple(plan_run(model.spec, [folder], out=folder / ".seglens-calibrate", save=()).inputs)
    except PlanRefused as exc:
        raise CalibrationRefused(f"{flag}{'' if flag.startswith('-') else ':'} {exc}") from None


def _scored(model: ModelSession, inputs: tuple[InputFile, ...], folder: Path, *, flag: str, told: Callable[[str], None],
            each: Callable[[], None] = lambda: None, should_stop: Callable[[], bool] = lambda: False) -> FolderScores:
    """The inputs' image scores (`each` after every input, scored or not; `should_stop` asked between inputs)."""
    from app.inference.decide.verdict import image_score
    from app.runs.folder.plan import Callbacks
    from app.runs.folder.run import LocalRunner, RunPlan, run_folder

    scores: list[float] = []
    names: list[str] = []
    errors: list[str] = []

    def outcome(done: Any, _summary: Any) -> None:
        score = image_score(done.result) if done.result is not None else None
        if done.error is not None or score is None or not math.isfinite(score):
            line = done.error or f"{shown(done.input.path)}: no finite image score ({score})"
            errors.append(line)
            told(f"error: {line}")
        else:
            scores.append(score)
            names.append(str(done.input.path))
        each()

    plan = RunPlan(spec=model.spec, inputs=inputs, out=None, save=())
    run_folder(plan, LocalRunner(model), progress=Callbacks(outcome=outcome), should_stop=should_stop)
    if should_stop():
        raise CalibrationCancelled("Cancelled: nothing was chosen or written")
    if not scores:
        raise CalibrationRefused(f"{flag} {shown(folder)}: none of its {counted(len(errors), 'image')} could be scored")
    return FolderScores(tuple(scores), tuple(names), tuple(errors))


def refuse_unscored(kind: str, name: str) -> None:
    """A model whose output has no image score to calibrate, in one line."""
    if kind not in CALIBRATED_KINDS:
        raise CalibrationRefused(f"{name}: its output is {'an' if kind[0] in 'aeiou' else 'a'} {kind} output, "
                                 "which has no image score to calibrate (calibrate needs an anomaly, binary "
                                 "segmentation or instance model: NG above a score limit)")


def split(ok: Sequence[float], ng: Sequence[float], *, fraction: float, seed: int,
          names: tuple[str, str] = ("--ok", "--ng")) -> Split:
    """Each class shuffled (numpy's default generator at `seed`) and cut: `fraction` of it (at least one image,
    at least one left) to choose on, the rest to measure on. A class of one image cannot be split: refused (in
    the words `names`: the options, or the viewer's fields)."""
    rng = np.random.default_rng(seed)
    parts = []
    for name, values in zip(names, (ok, ng), strict=True):
        if len(values) < 2:
            raise CalibrationRefused(f"{name}: {counted(len(values), 'image')} scored; at least 2 are needed (one to "
                                     "choose the limits on, one to measure them on)")
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
    """A note for each class with fewer than FEW images to measure on, and one when every image scored the same."""
    scores = np.concatenate([parts.ok_pick, parts.ng_pick, parts.ok_test, parts.ng_test])
    same = [f"note: every image scored {scores[0]:.6g}: the model cannot tell OK from NG, and no limit can"] \
        if scores.size and np.all(scores == scores[0]) else []
    return [f"note: only {counted(len(values), name + ' image')} to measure on: the intervals are wide"
            for name, values in (("OK", parts.ok_test), ("NG", parts.ng_test)) if len(values) < FEW] + same


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


# -- the whole calibration: what seglens-cli calibrate and the viewer's Model ▸ Calibrate limits… both call -----

DEFAULT_MAX_FNR = 0.01


@dataclass(frozen=True)
class Target:
    """What the limits aim at: at most `max_fnr` of the NG images passed as OK and `max_fpr` of the OK images
    called NG (a band between), or (`best_f1`) one limit with the best F1 of NG."""

    max_fnr: float | None = DEFAULT_MAX_FNR
    max_fpr: float | None = DEFAULT_MAX_FNR
    best_f1: bool = False

    @classmethod
    def chosen(cls, *, max_fnr: float | None = None, max_fpr: float | None = None, best_f1: bool = False) -> Target:
        """The target asked for, its defaults filled in (FNR 1 %; FPR as FNR); --max-fpr with --best-f1 refused."""
        if best_f1 and max_fpr is not None:
            raise CalibrationRefused("--max-fpr goes with --max-fnr: --best-f1 chooses one limit, without a band")
        if best_f1:
            return cls(None, None, True)
        fnr = max_fnr if max_fnr is not None else DEFAULT_MAX_FNR
        return cls(fnr, max_fpr if max_fpr is not None else fnr)

    def as_dict(self) -> dict[str, Any]:
        """As the sidecar's provenance writes it."""
        return {"best_f1": True} if self.best_f1 else {"max_fnr": self.max_fnr, "max_fpr": self.max_fpr}

    def words(self) -> str:
        """`FNR <= 1 %, FPR <= 1 %` or `best F1`."""
        return "best F1" if self.best_f1 else f"FNR <= {_aim(self.max_fnr)}, FPR <= {_aim(self.max_fpr)}"


@dataclass(frozen=True)
class Calibration:
    """A calibration's inputs, split, limits and what they achieved on the held-out part."""

    name: str  # the model's
    ok: FolderScores
    ng: FolderScores
    parts: Split
    limits: Limits
    measured: Measured
    target: Target
    fraction: float
    seed: int

    def report(self) -> list[str]:
        """The report's lines, as seglens-cli calibrate prints them and the viewer shows them."""
        parts, limits, measured = self.parts, self.limits, self.measured
        band = f"review_if score_above {limits.review:.6g}, " if limits.review is not None else "no REVIEW band, "
        return [f"calibrate: {shown(self.name)} on {len(self.ok.scores)} OK and {len(self.ng.scores)} NG images "
                f"(split {self.fraction:g}, seed {self.seed}: limits chosen on {len(parts.ok_pick)} OK + "
                f"{len(parts.ng_pick)} NG, measured on {len(parts.ok_test)} OK + {len(parts.ng_test)} NG)",
                f"limits ({self.target.words()}): {band}fail_if score_above {limits.fail:.6g}",
                "measured on the held-out images (exact 95 % Clopper-Pearson intervals):",
                f"  FNR     {measured.fnr.text()}  NG images passed as OK",
                f"  FPR     {measured.fpr.text()}  OK images called NG",
                f"  REVIEW  {measured.review.text()}  of all images"]

    def notes(self) -> list[str]:
        """The warnings: a small held-out set, a target the NG images cannot resolve."""
        fnr, count = self.target.max_fnr, len(self.parts.ng_pick)
        unresolved = fnr is not None and fnr * count < 1
        return wide_notes(self.parts) + ([
            f"note: FNR <= {_aim(fnr)} of {counted(count, 'NG image')} allows no miss: the review limit lies below the "
            "lowest NG score chosen on"] if unresolved else [])

    @property
    def errors(self) -> tuple[str, ...]:
        """The images that could not be scored (rows, not the end), OK folder's first."""
        return self.ok.errors + self.ng.errors


def calibrate(model: ModelSession, ok: Path, ng: Path, *, target: Target, fraction: float = 0.5, seed: int = 0,
              names: tuple[str, str] = ("--ok", "--ng"), told: Callable[[str], None] = lambda _: None,
              scored: Callable[[int, int], None] = lambda _done, _total: None,
              should_stop: Callable[[], bool] = lambda: False) -> Calibration:
    """Score both folders through `model` (both refused first when empty or missing), split, choose the limits on
    one part and measure them on the other. `names`: the folders' words in refusals; `told`: each error line;
    `scored(done, total)`: after each image; `should_stop`: asked between images (CalibrationCancelled)."""
    refuse_unscored(model.spec.output.kind, shown(model.spec.path.name))
    planned = [_planned(model, folder, flag=name) for folder, name in ((ok, names[0]), (ng, names[1]))]
    _refuse_shared(planned[0], planned[1], names)
    total, done = sum(len(inputs) for inputs in planned), 0

    def each() -> None:
        nonlocal done
        done += 1
        scored(done, total)

    ok_scores, ng_scores = [_scored(model, inputs, folder, flag=name, told=told, each=each, should_stop=should_stop)
                            for inputs, folder, name in zip(planned, (ok, ng), names, strict=True)]
    parts = split(ok_scores.scores, ng_scores.scores, fraction=fraction, seed=seed, names=names)
    limits = pick_limits(parts.ok_pick, parts.ng_pick, max_fnr=target.max_fnr, max_fpr=target.max_fpr,
                         best_f1=target.best_f1)
    return Calibration(model.spec.name, ok_scores, ng_scores, parts, limits,
                       measure(limits, parts.ok_test, parts.ng_test), target, fraction, seed)


def _refuse_shared(ok: tuple[InputFile, ...], ng: tuple[InputFile, ...], names: tuple[str, str]) -> None:
    """Images in both sets (the same folder twice, or one inside the other) refused in one line: the limits
    would be chosen between a part and itself."""
    seen = {os.path.realpath(item.path) for item in ok}  # realpath: never raises, a link loop as written
    both = [item for item in ng if os.path.realpath(item.path) in seen]
    if both:
        are = "is" if len(both) == 1 else "are"
        raise CalibrationRefused(f"{names[0]} and {names[1]}: {counted(len(both), 'image')} {are} in both (e.g. "
                                 f"{shown(both[0].rel)}): a part is either good or defective")


def _aim(value: float | None) -> str:
    return f"{float(value) * 100:g} %" if value is not None else "-"
