"""seglens-cli calibrate --write: the chosen limits into the sidecar's `verdict:` section, with their provenance.

Only the `verdict:` section is rewritten (and, for an anomaly model, its `output.image_threshold` line removed: the
written fail rule replaces that default rule, and the sidecar refuses both); every other line, comments included,
stays as it was. The rules of the section that are not score rules (an area rule) are kept. The new text is checked
by loading it as a model's spec before it replaces the file, atomically (app.io.files.atomic_write): a sidecar is
never half-written, nor left one the model refuses.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from app.errors import OutputError, SegLensError
from app.guard.shared import remove_under
from app.guard.untrusted import read_untrusted
from app.inference.model.rules import Rule, ScoreRule
from app.inference.model.spec import ModelSpec
from app.io.files import atomic_write, file_sha256
from app.runs.calibrate.band import Calibration, Limits, Measured


@dataclass(frozen=True)
class Provenance:
    """Where the limits came from: written under `verdict.calibrated`."""

    model_sha256: str
    ok_images: int
    ng_images: int
    target: dict[str, Any]
    split: float
    seed: int
    chosen_on: tuple[int, int]  # (OK, NG) images the limits were chosen on
    measured: Measured

    def as_dict(self) -> dict[str, Any]:
        return {"model_sha256": self.model_sha256, "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "ok_images": self.ok_images, "ng_images": self.ng_images, "target": self.target,
                "split": self.split, "seed": self.seed,
                "chosen_on": {"ok": self.chosen_on[0], "ng": self.chosen_on[1]},
                "measured": {"fnr": self.measured.fnr.as_dict(), "fpr": self.measured.fpr.as_dict(),
                             "review": self.measured.review.as_dict(), "interval": "Clopper-Pearson 95 %"}}


def provenance(result: Calibration, model: Path) -> Provenance:
    """The provenance of `result`'s limits for the model file `model` (its SHA-256 read here)."""
    return Provenance(sha256_of(model), len(result.ok.scores), len(result.ng.scores), result.target.as_dict(),
                      result.fraction, result.seed, (len(result.parts.ok_pick), len(result.parts.ng_pick)),
                      result.measured)


def written_line(path: Path, limits: Limits) -> str:
    """What a write put where: `surface_anomaly.yaml (verdict.fail_if, verdict.review_if, verdict.calibrated)`."""
    return f"{path} (verdict.fail_if{', verdict.review_if' if limits.review is not None else ''}, verdict.calibrated)"


def sha256_of(path: Path) -> str:
    """The model file's SHA-256, read in pieces (app.io.files.file_sha256: a FIFO or device refused)."""
    return file_sha256(path)


def write_limits(spec: ModelSpec, limits: Limits, provenance: Provenance) -> Path:
    """The sidecar (`<model>.yaml`, made when the model has none) with the limits in its verdict section."""
    from app.inference.model.sidecar import find_sidecar

    path = spec.sidecar or find_sidecar(spec.path) or spec.path.with_suffix(".yaml")
    old = _sidecar_text(path) if os.path.lexists(path) else ""
    section = verdict_section(spec, limits, provenance)
    new = with_verdict(old, section, drop_image_threshold=spec.output.kind == "anomaly")
    _check(spec, path, new)
    atomic_write(path, new.encode("utf-8"))
    return path


def verdict_section(spec: ModelSpec, limits: Limits, provenance: Provenance) -> dict[str, Any]:
    """The new `verdict:` mapping: the kept other rules, the score limits, the provenance."""
    fail = [*_others(spec.verdict or ()), {"score_above": round(limits.fail, 6)}]
    review = [*_others(spec.review), *([{"score_above": round(limits.review, 6)}] if limits.review is not None else [])]
    return {"fail_if": fail, **({"review_if": review} if review else {}), "calibrated": provenance.as_dict()}


def _others(rules: tuple[Rule, ...]) -> list[dict[str, Any]]:
    return [rule.as_dict() for rule in rules if not isinstance(rule, ScoreRule)]


_TOP_KEY = re.compile(r"^[^\s#-][^:]*:")
MARK = "# verdict limits written by seglens-cli calibrate"


def with_verdict(text: str, verdict: dict[str, Any], *, drop_image_threshold: bool) -> str:
    """`text` with its top-level `verdict:` block replaced by `verdict` (appended when it had none). Comments and
    blank lines at the left edge between the old block and the next key are that key's (kept); the mark line a
    previous write put above the block is not repeated."""
    lines = text.splitlines()
    kept: list[str] = []
    held: list[str] = []  # left-edge comments and blank lines seen inside the verdict block: the next key's?
    inside_verdict = inside_output = False
    for line in lines:
        if _TOP_KEY.match(line):
            kept += held if inside_verdict else []
            held = []
            inside_verdict = line.split(":", 1)[0].strip() == "verdict"
            inside_output = line.split(":", 1)[0].strip() == "output"
        if line.strip() == MARK:
            continue
        if inside_verdict:
            held = [*held, line] if not line.strip() or line.startswith("#") else []  # indented: the block's
            continue
        if inside_output and drop_image_threshold and line.strip().startswith("image_threshold:"):
            continue
        kept.append(line)
    kept += held if inside_verdict else []  # the file ended inside the block: its left-edge comments are kept
    while kept and not kept[-1].strip():
        kept.pop()
    block = yaml.safe_dump({"verdict": verdict}, sort_keys=False, default_flow_style=None, width=100)
    return "\n".join([*kept, *([""] if kept else []), MARK, block.rstrip("\n")]) + "\n"


def _sidecar_text(path: Path) -> str:
    """The sidecar's text, read as the sidecar loader reads it (app.guard.untrusted: regular, at most 1 MiB)."""
    from app.inference.model.sidecar import MAX_SIDECAR_BYTES

    try:
        return read_untrusted(path, limit=MAX_SIDECAR_BYTES).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise SegLensError(f"{path}: cannot read the sidecar ({problem or exc})") from None


def _check(spec: ModelSpec, path: Path, text: str) -> None:
    """The model's spec loads with the new sidecar text (tried beside the sidecar: a `classes_file` is found
    there), or the write is refused in one line."""
    from app.inference.model.builder import load_spec

    trial = path.with_name(f".{path.stem}.calibrate-check.yaml")
    try:
        atomic_write(trial, text.encode("utf-8"))  # a link planted under the trial's name is replaced, not followed
        load_spec(spec.path, trial)
    except OutputError as exc:
        raise SegLensError(str(exc)) from None
    except SegLensError as exc:
        raise SegLensError(f"the limits were not written: the new sidecar would be refused ({exc})") from None
    finally:
        remove_under(trial.parent, trial.name)
