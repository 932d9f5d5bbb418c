"""What made a report: the model file, its sidecar and SegLens's version, beside the report as `<report>.run.json`.

`--resume` carries earlier rows and outputs over only when the same model, sidecar and SegLens made them: a
retrained model or an edited sidecar gives other masks, and rows from both in one report would be a wrong answer
given silently. A JSON file beside the report rather than lines inside it keeps the CSV a plain table for Excel.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from app import __version__
from app.inference.spec import ModelSpec
from app.io.files import atomic_write, file_sha256


@dataclass(frozen=True)
class RunIdentity:
    model: str  # file name, for messages
    model_sha256: str
    sidecar: str | None
    sidecar_sha256: str | None
    seglens: str
    threshold: float | None = None  # --threshold: it changes the masks as much as a sidecar would

    @classmethod
    def of(cls, spec: ModelSpec, *, threshold: float | None = None) -> RunIdentity:
        sidecar = spec.sidecar
        return cls(spec.path.name, file_sha256(spec.path), sidecar.name if sidecar else None,
                   file_sha256(sidecar) if sidecar else None, __version__, threshold)


def record_path(report: Path) -> Path:
    return report.with_name(report.name + ".run.json")


def record_run(report: Path, identity: RunIdentity) -> None:
    """Write what makes this run's rows (before any row, so a killed run's `.partial` has it too)."""
    atomic_write(record_path(report), json.dumps(asdict(identity), indent=2).encode("utf-8"))


def resume_problem(report: Path, identity: RunIdentity) -> str | None:
    """Why the rows of the earlier run at `report` must not be carried into this one (one line), or None."""
    path = record_path(report)
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return (f"{path.name} is missing: nothing says which model made the earlier rows (an older SegLens, or "
                "no earlier run)") if _has_rows(report) else None
    except (OSError, ValueError) as exc:
        return f"{path}: unreadable ({exc})"
    checks = (("model_sha256", "model file"), ("sidecar_sha256", "sidecar"), ("seglens", "SegLens version"),
              ("threshold", "--threshold"))  # a record without one (an older run) had none
    for key, what in checks:
        if earlier.get(key) != getattr(identity, key):
            return (f"the earlier rows were made with another {what} ({_short(earlier.get(key))}, now "
                    f"{_short(getattr(identity, key))})")
    return None


def _has_rows(report: Path) -> bool:
    return report.exists() or report.with_name(report.name + ".partial").exists()


def _short(value: object) -> str:
    text = "none" if value is None else str(value)
    return text[:12] + "…" if len(text) > 16 else text
