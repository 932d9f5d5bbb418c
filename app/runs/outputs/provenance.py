"""What made a report: the model file, its sidecar and SegLens's version, beside the report as `<report>.run.json`;
and where it ran (provider, the fallback reason), the thresholds and verdict rules actually
used and a hash of the effective settings. Every PNG of the run carries the short form in a `SegLens` text chunk
(`png_texts`), so a mask found a year later still says which model and threshold made it.

`--resume` carries earlier rows and outputs over only when the same model, sidecar and SegLens made them: a
retrained model or an edited sidecar gives other masks, and rows from both in one report would be a wrong answer
given silently. A JSON file beside the report rather than lines inside it keeps the CSV a plain table for Excel.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app import __version__
from app.errors import OutputError
from app.guard.untrusted import STATE_FILE_LIMIT, read_untrusted
from app.inference.describe.info import spec_dict
from app.inference.model.session import SessionInfo
from app.inference.model.spec import ModelSpec
from app.io.files import atomic_write, file_sha256, png_text

SHORT = 12  # hex digits of a hash in messages and PNG text chunks
PNG_KEY = "SegLens"  # the PNG text keyword holding a run's provenance (compact JSON)


@dataclass(frozen=True)
class RunIdentity:
    model: str  # file name, for messages
    model_sha256: str
    sidecar: str | None
    sidecar_sha256: str | None
    seglens: str
    threshold: float | None = None  # --threshold: it changes the masks as much as a sidecar would
    # everything below is absent from records older versions wrote (read with .get, never required)
    settings_sha256: str | None = None  # settings_hash: the resolved spec as used
    provider: str | None = None  # where the session really ran, as every line says it: "CUDA (GPU 0)", "CPU"
    requested_device: str | None = None
    fallback_reason: str | None = None  # why not the GPU, when one was asked for (or auto)
    thresholds: dict[str, float] = field(default_factory=dict)  # effective_thresholds
    verdict_rules: tuple[str, ...] = ()  # "fail if …" rules, as `info` shows them
    reference: str | None = None  # the ground-truth folder of `--reference` (recorded, not checked)
    review_rules: tuple[str, ...] = ()  # the band's "review if …" rules (verdict.review_if)
    # the folder's metrics against `reference`, added once every input is scored (an instance model's mAP@0.5:0.95,
    # precision and recall at IoU 0.5: app.runs.folder.instance_reference)
    reference_metrics: dict[str, Any] | None = None

    @classmethod
    def of(cls, spec: ModelSpec, *, threshold: float | None = None, min_confidence: float | None = None,
           session: SessionInfo | None = None) -> RunIdentity:
        """`spec` as loaded with --threshold applied (app.inference.decide.tuning.with_threshold); `min_confidence` the
        multi-class minimum it gave; `session` where the model runs (None: not recorded)."""
        sidecar = spec.sidecar
        return cls(spec.path.name, _model_sha256(spec), sidecar.name if sidecar else None,
                   file_sha256(sidecar) if sidecar else None, __version__, threshold,
                   settings_hash(spec, min_confidence), None if session is None else session.provider_label,
                   None if session is None else session.requested,
                   None if session is None else session.fallback_reason,
                   effective_thresholds(spec, min_confidence), tuple(r.describe() for r in spec.verdict or ()),
                   review_rules=tuple(r.describe() for r in spec.review))

    def png_texts(self, spec: ModelSpec) -> dict[str, dict[str, str]]:
        """The PNG text items for each output kind: `SegLens` (compact JSON) and `Software`; masks also name
        their label values (the class table, at most the 256 a uint8 mask can hold)."""
        short = {"model": self.model, "model_sha256": self.model_sha256[:SHORT], "sidecar": self.sidecar,
                 "sidecar_sha256": self.sidecar_sha256 and self.sidecar_sha256[:SHORT],
                 "settings_sha256": self.settings_sha256 and self.settings_sha256[:SHORT], "seglens": self.seglens,
                 "provider": self.provider, "thresholds": self.thresholds,
                 **({"verdict": list(self.verdict_rules)} if self.verdict_rules else {}),
                 **({"review": list(self.review_rules)} if self.review_rules else {})}
        # an instance model's mask holds class index + 1 (0: no object; app.runs.outputs.instance_images)
        classes = ["(no object)", *spec.class_names] if spec.task == "instances" else list(spec.class_names)
        extra: dict[str, dict[str, Any]] = {"mask": {"classes": classes[:256]},
                                            "scores": {"pixel": "round(p * 65535)"}}
        software = f"SegLens {self.seglens}"
        return {kind: {PNG_KEY: _compact({**short, **extra.get(kind, {})}), "Software": software}
                for kind in ("mask", "overlay", "heatmap", "scores")}

    def summary_line(self, report: Path) -> str:
        """One line for the terminal: what made these outputs, and where the full record is."""
        sidecar = f"{self.sidecar} {self.sidecar_sha256[:SHORT]}" if self.sidecar and self.sidecar_sha256 else "none"
        # each by its name ("threshold 0.5, image threshold 0.785"): "thresholds threshold 0.5" said it twice
        thresholds = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in self.thresholds.items()) or "no thresholds"
        return (f"provenance: model {self.model} sha256 {self.model_sha256[:SHORT]}, sidecar {sidecar}, settings "
                f"{(self.settings_sha256 or 'none')[:SHORT]}, SegLens {self.seglens}, provider {self.provider}, "
                f"{thresholds}; full record {record_path(report).name}, PNG text key {PNG_KEY}")


def _model_sha256(spec: ModelSpec) -> str:
    """The model file's SHA-256; a remote model's stands for what its server declares (ModelSpec.remote)."""
    return spec.remote.sha256 if spec.remote is not None else file_sha256(spec.path)


def png_provenance(path: Path) -> dict[str, Any]:
    """The text items of a PNG, the `SegLens` one parsed (`seglens-cli info x_mask.png`)."""
    try:
        items: dict[str, Any] = png_text(path)
    except (OSError, ValueError) as exc:
        raise OutputError(f"{path}: not a readable PNG ({getattr(exc, 'strerror', None) or exc})") from exc
    if PNG_KEY in items:
        with contextlib.suppress(ValueError):  # not JSON: shown as the text it is
            items[PNG_KEY] = json.loads(items[PNG_KEY])
    return items or {"note": "no text chunks: not written by a SegLens with provenance"}


def effective_thresholds(spec: ModelSpec, min_confidence: float | None = None) -> dict[str, float]:
    """The thresholds that made the masks and verdicts: `threshold` (binary: foreground where p > it; anomaly:
    anomalous where the map >= it), `image_threshold` (anomaly: NG where the score >= it) and `min_confidence`
    (multi-class --threshold)."""
    out, found = spec.output, {}
    if spec.task == "segmentation" and out.kind in ("binary", "anomaly"):
        found["threshold"] = out.threshold
    if out.kind == "anomaly" and out.image_threshold is not None:
        found["image_threshold"] = out.image_threshold
    if min_confidence is not None:
        found["min_confidence"] = min_confidence
    if spec.task == "classification":  # an uncertain result (app.inference.decide.verdict.uncertainty), when set
        found.update({f"classification_{k}": v for k, v in (("min_confidence", out.min_confidence),
                                                              ("min_margin", out.min_margin)) if v})
    return found


# where a value came from, and the file paths and display name: none of them changes a mask or a verdict
_NOT_SETTINGS = ("model", "sidecar", "name", "sources")


def settings_hash(spec: ModelSpec, min_confidence: float | None = None) -> str:
    """SHA-256 of a canonical JSON of the resolved spec as used (sidecar + ONNX metadata + defaults +
    --threshold), without absolute paths: equal hashes, equal settings, whichever file they came from."""
    settings = {k: v for k, v in spec_dict(spec, None).items() if k not in _NOT_SETTINGS}
    settings["min_confidence"] = min_confidence
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def record_path(report: Path) -> Path:
    return report.with_name(report.name + ".run.json")


def record_run(report: Path, identity: RunIdentity) -> None:
    """Write what makes this run's rows (before any row, so a killed run's `.partial` has it too)."""
    atomic_write(record_path(report), json.dumps(asdict(identity), indent=2).encode("utf-8"))


def record_compare(report: Path, a: RunIdentity, b: RunIdentity) -> None:
    """`seglens-cli compare`'s record beside its report: both models as `record_run` records one (A is the
    reference B is measured against), written before any row."""
    record = {"command": "compare", "seglens": __version__, "model_a": asdict(a), "model_b": asdict(b)}
    atomic_write(record_path(report), json.dumps(record, indent=2).encode("utf-8"))


def compare_summary_line(report: Path, a: RunIdentity, b: RunIdentity) -> str:
    """One line for the terminal: the two models compared, and where the full record is."""
    return (f"provenance: A {a.model} sha256 {a.model_sha256[:SHORT]}, B {b.model} sha256 {b.model_sha256[:SHORT]}, "
            f"SegLens {a.seglens}, provider {a.provider}; full record {record_path(report).name}")


def resume_problem(report: Path, identity: RunIdentity) -> str | None:
    """Why the rows of the earlier run at `report` must not be carried into this one (one line), or None."""
    path = record_path(report)
    try:
        earlier = json.loads(read_untrusted(path, limit=STATE_FILE_LIMIT).decode("utf-8"))
    except FileNotFoundError:
        return (f"{path.name} is missing: nothing says which model made the earlier rows (an older SegLens, or "
                "no earlier run)") if _has_rows(report) else None
    except (OSError, ValueError) as exc:
        return f"{path}: unreadable ({exc})"
    checks = (("model_sha256", "model file"), ("sidecar_sha256", "sidecar"), ("seglens", "SegLens version"),
              ("threshold", "--threshold"),  # a record without one (an older run) had none
              ("settings_sha256", "effective-settings hash"))
    # Not checked: the provider. CUDA and the CPU give the same masks up to float rounding, and a resume on
    # another machine (or after a driver update made CUDA fall back) is a normal thing to do; the record says
    # where each run ran.
    for key, what in checks:
        if key == "settings_sha256" and key not in earlier:
            continue  # a record from before the hash: judged by the other keys, as it was then
        if earlier.get(key) != getattr(identity, key):
            return (f"the earlier rows were made with another {what} ({_short(earlier.get(key))}, now "
                    f"{_short(getattr(identity, key))})")
    return None


def _has_rows(report: Path) -> bool:
    return report.exists() or report.with_name(report.name + ".partial").exists()


def _short(value: object) -> str:
    text = "none" if value is None else str(value)
    return text[:12] + "…" if len(text) > 16 else text
