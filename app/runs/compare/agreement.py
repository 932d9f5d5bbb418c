"""`seglens-cli compare MODEL_A MODEL_B PATH… --out DIR`: how far model B agrees with model A, image by image.

Each input is decoded once and run through both models; B's mask is measured against A's as the reference
(app.inference.decide.metrics: IoU/Dice per class, A's class names), and `<stem>_disagreement.png` shows where they
differ (app.io.render.disagreement_overlay: agreement dimmed, only A magenta, only B cyan, both but different
classes yellow). One row per input in `seglens_compare.csv`; a failing input is an error row and the run goes on.
A volume (DICOM series, multi-frame DICOM, NIfTI) is one row too: every slice through both models, measured over
every voxel, its picture the slice where they disagree most.
Sequential on purpose: two sessions on one device, and a comparison is a review tool, not a throughput path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from app.errors import SegLensError, error_line, unexpected_error_line
from app.inference.decide.metrics import (
    ImageMetrics,
    add_confusion,
    confusion,
    confusion_metrics,
    disagreement_map,
    image_metrics,
)
from app.inference.image import pipeline
from app.inference.model.session import ModelSession
from app.inference.model.spec import ModelSpec
from app.io.discover import InputFile, output_stems
from app.io.files import atomic_write, encode_png
from app.io.images import read_slice
from app.io.render import disagreement_overlay
from app.io.volumes import Volume
from app.runs.folder.batch import RunSummary
from app.runs.folder.metrics import MetricsSummary, Scored, foreground_names, metric_cells, metric_columns
from app.runs.outputs.report import write_table
from app.runs.outputs.safety import OutputGuard
from app.runs.privacy.names import anonymized_stems

log = logging.getLogger(__name__)
REPORT_NAME = "seglens_compare.csv"
PICTURE_SUFFIX = "_disagreement.png"
_COUNTS = ("only_a_pixels", "only_b_pixels", "different_pixels")


@dataclass(frozen=True)
class Compared:
    """One input: its report row, and the metrics or the error (the CLI's progress line reads `error`)."""

    input: InputFile
    row: list[Any]
    scored: Scored | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()  # why the image does not fit model A or B (app.inference.image.fit)
    name: str | None = None  # --anonymize: the input's pseudonymous name, what every line about it calls it


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
                   progress: Callable[[Compared, RunSummary], None] | None = None, key: bytes = b""
                   ) -> tuple[RunSummary, MetricsSummary, Path]:
    """Compare on every input, write the pictures and `seglens_compare.csv` into `out_dir`:
    (counts, the metrics summary of B against A, the report's path). `key` (--anonymize, the pseudonym key):
    rows, pictures and the summary name each input by its pseudonym (app.runs.privacy.names), error cells leave
    its paths out."""
    summary = RunSummary(total=len(inputs))
    metrics = MetricsSummary(foreground_names(model_a.spec), against=f"{model_a.spec.path.name} (model A)")
    guard = OutputGuard(out_dir, inputs)
    stems = anonymized_stems(inputs, key) if key else output_stems(list(inputs))
    rows = []
    for item, stem in zip(inputs, stems, strict=True):
        name = stem.as_posix() if key else None
        done = _compare_one(model_a, model_b, item, out_dir / stem, guard, name=name, out_dir=out_dir)
        summary.failed += done.error is not None
        summary.ok += done.error is None
        if done.error is None:
            metrics.add(name or str(item.path), done.scored)
        rows.append(done.row)
        if progress:
            progress(done, summary)
    report = out_dir / REPORT_NAME
    write_table(report, compare_columns(model_a.spec), rows)
    return summary, metrics, report


def _compare_one(model_a: ModelSession, model_b: ModelSession, item: InputFile, stem: Path,
                 guard: OutputGuard, *, name: str | None = None, out_dir: Path | None = None) -> Compared:
    n_foreground = len(foreground_names(model_a.spec))
    blank = [""] * (len(_COUNTS) + 2 + 2 * n_foreground)
    shown = name or str(item.path)  # spelt once, as the row is written
    try:
        if item.problem:
            raise SegLensError(f"{item.path}: {item.problem}")
        picture = stem.with_name(stem.name + PICTURE_SUFFIX)
        refused = guard.problem(picture)
        if refused:
            raise SegLensError(f"{item.path}: {refused}")
        agreement = volume_agreement(model_a, model_b, item.volume) if item.volume is not None else \
            image_agreement(model_a, model_b, item)
        atomic_write(picture, encode_png(disagreement_overlay(agreement.pixels, agreement.codes)))
        metrics = agreement.metrics
        height, width = agreement.shape
        row = [shown, "ok", width, height, *agreement.counts, *metric_cells(metrics, n_foreground),
               "; ".join(agreement.warnings), ""]
        return Compared(item, row, Scored(str(model_a.spec.path), metrics), warnings=agreement.warnings,
                        name=name)  # A: the reference
    except SegLensError as exc:
        message = error_line(item.path, exc)
    except Exception as exc:  # a bug on one input must not end the comparison
        log.debug("unexpected error comparing %s", item.path, exc_info=True)
        message = unexpected_error_line(item.path, exc)
    if name is not None:
        from app.runs.privacy.names import redact

        message = redact(message, item, name, out_dir=out_dir)
    return Compared(item, [shown, "error", "", "", *blank, "", message], error=message, name=name)


@dataclass(frozen=True)
class Agreement:
    """B measured against A on one input: the metrics (over every pixel, or every voxel of a volume), the
    disagreement counts (only A, only B, both but different classes), a slice's or the image's size, and the
    picture drawn: the image, or the volume's slice where they disagree most (`shown`; the middle one when they
    agree everywhere)."""

    metrics: ImageMetrics
    counts: tuple[int, int, int]
    shape: tuple[int, int]  # (height, width)
    pixels: np.ndarray  # display pixels of the picture
    codes: np.ndarray  # its disagreement map (app.inference.decide.metrics.disagreement_map)
    warnings: tuple[str, ...] = ()
    shown: int = 0


def image_agreement(model_a: ModelSession, model_b: ModelSession, item: InputFile) -> Agreement:
    image, decode_ms = pipeline.decode(item.path)
    result_a = pipeline.run_image(model_a, image, decode_ms=decode_ms)
    result_b = pipeline.run_image(model_b, image)
    a, b = _mask(result_a), _mask(result_b)
    codes = disagreement_map(a, b)
    return Agreement(image_metrics(b, a, model_a.spec.label_count), _counts(codes), a.shape,
                     image.display(), codes, tuple(dict.fromkeys((*result_a.warnings, *result_b.warnings))))


def volume_agreement(model_a: ModelSession, model_b: ModelSession, volume: Volume, *,
                     should_stop: Callable[[], bool] = lambda: False) -> Agreement:
    """Both models on every slice of `volume`, measured as one volume: the slices' confusion matrices summed, so
    IoU and Dice count every voxel (a mean of per-slice IoUs would weigh a slice with 3 voxels like one with
    3000). One slice is held at a time. Raises pipeline.Stopped when `should_stop()` says so."""
    n_classes = model_a.spec.label_count
    total: np.ndarray | None = None
    counts = np.zeros(3, np.int64)
    warnings: dict[str, None] = {}
    shown: tuple[int, int, np.ndarray, np.ndarray] | None = None  # (disagreeing voxels, slice, pixels, codes)
    for k in range(volume.depth):
        if should_stop():
            raise pipeline.Stopped()
        image = read_slice(volume, k)
        result_a, result_b = pipeline.run_image(model_a, image), pipeline.run_image(model_b, image)
        a, b = _mask(result_a), _mask(result_b)
        warnings.update(dict.fromkeys((*result_a.warnings, *result_b.warnings)))
        total = add_confusion(total, confusion(b, a, n_classes))
        codes = disagreement_map(a, b)
        here = np.asarray(_counts(codes))
        counts += here
        if shown is None or here.sum() > shown[0] or (k == volume.depth // 2 and shown[0] == 0):
            shown = (int(here.sum()), k, image.display(), codes)
    if total is None or shown is None:
        raise SegLensError(f"{volume.source}: the volume has no slices")
    return Agreement(confusion_metrics(total, n_classes), (int(counts[0]), int(counts[1]), int(counts[2])),
                     shown[3].shape,
                     shown[2], shown[3], tuple(warnings), shown=shown[1])


def _mask(result: pipeline.Result) -> np.ndarray:
    """A segmentation result's mask: compare takes segmentation models only (checked before it runs)."""
    return cast(np.ndarray, result.mask)


def _counts(codes: np.ndarray) -> tuple[int, int, int]:
    only_a, only_b, different = (int(c) for c in np.bincount(codes.ravel(), minlength=4)[1:4])
    return only_a, only_b, different
