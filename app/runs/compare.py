"""`seglens-cli compare MODEL_A MODEL_B PATH… --out DIR`: how far model B agrees with model A, image by image.

Each input is decoded once and run through both models; B's mask is measured against A's as the reference
(app.inference.metrics: IoU/Dice per class, A's class names), and `<stem>_disagreement.png` shows where they
differ (app.io.render.disagreement_overlay: agreement dimmed, only A magenta, only B cyan, both but different
classes yellow). One row per input in `seglens_compare.csv`; a failing input is an error row and the run goes on.
Sequential on purpose: two sessions on one device, and a comparison is a review tool, not a throughput path.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.errors import SegLensError, error_line, unexpected_error_line
from app.inference import pipeline
from app.inference.metrics import disagreement_map, image_metrics
from app.inference.session import ModelSession
from app.inference.spec import ModelSpec
from app.io.discover import InputFile, output_stems
from app.io.files import atomic_write, encode_png
from app.io.render import disagreement_overlay
from app.runs.batch import RunSummary
from app.runs.metrics_report import MetricsSummary, Scored, foreground_names, metric_cells, metric_columns
from app.runs.outputs import path_text
from app.runs.safety import OutputGuard

log = logging.getLogger(__name__)
REPORT_NAME = "seglens_compare.csv"
PICTURE_SUFFIX = "_disagreement.png"
_COUNTS = ("only_a_pixels", "only_b_pixels", "different_pixels")


@dataclass(frozen=True)
class Compared:
    """One input: its report row, and the metrics or the error (the CLI's progress line reads `error`)."""

    input: InputFile
    row: list
    scored: Scored | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()  # why the image does not fit model A or B (app.inference.fit)


def compare_problem(a: ModelSpec, b: ModelSpec) -> str | None:
    """Why the two models cannot be compared pixel by pixel (one line), or None."""
    for spec in (a, b):
        if spec.task != "segmentation":
            return f"{spec.path.name} is a {spec.task} model; compare needs two segmentation models"
    if len(a.classes) != len(b.classes):
        return (f"{a.path.name} has {len(a.classes)} classes and {b.path.name} {len(b.classes)}: their labels "
                "cannot be compared")
    return None


def compare_columns(spec: ModelSpec) -> list[str]:
    return ["path", "status", "width", "height", *metric_columns(spec, lead=_COUNTS), "warning", "error"]


def compare_inputs(model_a: ModelSession, model_b: ModelSession, inputs: Sequence[InputFile], *, out_dir: Path,
                   progress: Callable[[Compared, RunSummary], None] | None = None
                   ) -> tuple[RunSummary, MetricsSummary, Path]:
    """Compare on every input, write the pictures and `seglens_compare.csv` into `out_dir`:
    (counts, the metrics summary of B against A, the report's path)."""
    summary = RunSummary(total=len(inputs))
    metrics = MetricsSummary(foreground_names(model_a.spec), against=f"{model_a.spec.path.name} (model A)")
    guard = OutputGuard(out_dir, inputs)
    rows = []
    for item, stem in zip(inputs, output_stems(list(inputs)), strict=True):
        done = _compare_one(model_a, model_b, item, out_dir / stem, guard)
        summary.failed += done.error is not None
        summary.ok += done.error is None
        if done.error is None:
            metrics.add(str(item.path), done.scored)
        rows.append(done.row)
        if progress:
            progress(done, summary)
    report = out_dir / REPORT_NAME
    _write_rows(report, compare_columns(model_a.spec), rows)
    return summary, metrics, report


def _compare_one(model_a: ModelSession, model_b: ModelSession, item: InputFile, stem: Path,
                 guard: OutputGuard) -> Compared:
    n_foreground = len(foreground_names(model_a.spec))
    blank = [""] * (len(_COUNTS) + 2 + 2 * n_foreground)
    try:
        if item.problem:
            raise SegLensError(f"{item.path}: {item.problem}")
        if item.volume is not None:  # a series' path names no file: decoding it would say "file not found"
            raise SegLensError(f"{item.path}: volumes are not supported by compare (a DICOM series, multi-frame "
                               "DICOM or NIfTI file); run each model on it with `seglens-cli run`")
        image, decode_ms = pipeline.decode(item.path)
        result_a = pipeline.run_image(model_a, image, decode_ms=decode_ms)
        result_b = pipeline.run_image(model_b, image)
        a, b = result_a.mask, result_b.mask
        warnings = tuple(dict.fromkeys((*result_a.warnings, *result_b.warnings)))
        picture = stem.with_name(stem.name + PICTURE_SUFFIX)
        refused = guard.problem(picture)
        if refused:
            raise SegLensError(f"{item.path}: {refused}")
        codes = disagreement_map(a, b)
        atomic_write(picture, encode_png(disagreement_overlay(image.display(), codes)))
        metrics = image_metrics(b, a, max(len(model_a.spec.classes), 2))
        counts = [int(c) for c in np.bincount(codes.ravel(), minlength=4)[1:4]]
        row = [path_text(item.path), "ok", a.shape[1], a.shape[0], *counts, *metric_cells(metrics, n_foreground),
               "; ".join(warnings), ""]
        return Compared(item, row, Scored(str(model_a.spec.path), metrics), warnings=warnings)  # A: the reference
    except SegLensError as exc:
        message = error_line(item.path, exc)
    except Exception as exc:  # a bug on one input must not end the comparison
        log.debug("unexpected error comparing %s", item.path, exc_info=True)
        message = unexpected_error_line(item.path, exc)
    return Compared(item, [path_text(item.path), "error", "", "", *blank, "", message], error=message)


def _write_rows(path: Path, header: list[str], rows: list[list]) -> None:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow([path_text(c) for c in header])
    for row in rows:
        writer.writerow([path_text(v) if isinstance(v, str) else v for v in row])
    atomic_write(path, buffer.getvalue().encode("utf-8"))
