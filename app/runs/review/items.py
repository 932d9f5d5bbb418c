"""The HTML review report's rows, for the viewer (File ▸ Export review report) and `seglens-cli report`: every input
once more through the model, drawn as a small overlay beside its verdict, its metrics and its review.

An image is its own row. A volume (a DICOM series, a multi-frame DICOM or a NIfTI file) is one row too: every
slice is run, the slice with the most foreground is the picture, and the volume's figures (slices, mL per class)
stand beside it (earlier versions gave a series only "not processed: …/<SeriesUID>: file not
found").

A row names its input by the path relative to the folder it was found in, never an absolute path; with
`anonymize` by its pseudonymous name (app.runs.privacy.names), and an error line is redacted the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from app.errors import SegLensError, error_line, unexpected_error_line
from app.inference.decide.tuning import judge
from app.inference.decide.verdict import Verdict
from app.inference.decide.volume import combined, plane_rules, slice_verdict
from app.inference.image import pipeline
from app.inference.image.postprocess import class_pixel_counts
from app.inference.model.spec import ModelSpec
from app.io.discover import InputFile
from app.io.images import DecodedImage, read_slice
from app.io.volumes import Volume
from app.runs.folder.lesions import components_verdict, volume_components
from app.runs.review.html import ReportItem
from app.runs.review.log import Review

if TYPE_CHECKING:
    from app.inference.image.pipeline import Result
    from app.inference.model.session import ModelSession
    from app.inference.model.spec import ClassInfo
    from app.runs.outputs.provenance import RunIdentity
    from app.runs.privacy.check import Identifying

OVERLAY_SIDE = 640  # the overlay is drawn at most this big; the report shrinks it further


@dataclass(frozen=True)
class Naming:
    """How rows name their inputs: relative to `input_root`, or (anonymize) by a keyed pseudonym."""

    input_root: Path
    anonymize: bool = False
    key: bytes = b""

    def name(self, item: InputFile) -> str:
        if not self.anonymize:
            return item.rel.as_posix()
        from app.runs.privacy.names import pseudonymous_name

        return pseudonymous_name(item, self.key)

    def problem(self, item: InputFile, exc: BaseException) -> str:
        """The error's one line without an absolute path (and under anonymize without the input's names)."""
        line = error_line(item.path, exc) if isinstance(exc, SegLensError) else unexpected_error_line(item.path, exc)
        if self.anonymize:
            from app.runs.privacy.names import redact

            return redact(line, item, self.name(item))
        root = os.fspath(self.input_root)
        return line.replace(root.rstrip(os.sep) + os.sep, "").replace(root, ".")

    def identifying(self, item: InputFile) -> Identifying | None:
        """Under anonymize, the values the report must not hold for `item`: the words of its path (folder and file
        names) and, for a DICOM volume, its source's identifying values and instance UIDs (app.runs.privacy.check,
        as the last check of a run); None otherwise."""
        if not self.anonymize:
            return None
        from app.runs.privacy.check import Identifying
        from app.runs.privacy.names import identifying_words

        values = [("input name", word) for word in identifying_words(item)]
        uids: frozenset[str] = frozenset()
        volume = item.volume
        if volume is not None and volume.kind.startswith("dicom"):
            from app.io.volumes import source_datasets
            from app.runs.privacy.deidentify import source_facts

            values += [("patient name", str(volume.info.get("Patient", ""))),
                       ("patient ID", str(volume.info.get("Patient ID", "")))]
            try:
                facts = source_facts(source_datasets(volume))
            except SegLensError:  # an unreadable header: its row says so; the names above are still looked for
                facts = None
            if facts is not None:
                values += list(facts.values)
                uids = facts.uids
        return Identifying.of(values, uids)


NOTE_WITHHELD = "[note withheld: contains patient identity]"


def private_review(review: Review | None, identifying: Identifying | None) -> Review | None:
    """`review` as an anonymized report shows it: a note holding one of the input's identifying values (a patient's
    name typed by the reviewer: "lung wrong for DOE JANE") replaced by NOTE_WITHHELD, the state, who and when
    kept. The note is withheld, not the report refused: the note is the reviewer's free text, not the output
    being de-identified, and the rest of the report (every other row, this row's verdict) stays worth sharing."""
    if review is None or identifying is None or not review.note or identifying.in_text(review.note) is None:
        return review
    return replace(review, note=NOTE_WITHHELD)


class MetricsFn(Protocol):
    """A mask measured against its input's reference: IoU and Dice, None when there is none; `frame`: the mask
    is that slice of a volume, measured against that slice's own correction (None: a one-frame picture)."""

    def __call__(self, item: InputFile, mask: np.ndarray, frame: int | None = None) -> dict[str, float] | None: ...


def report_items(model: ModelSession, inputs: Sequence[InputFile], *, spec: ModelSpec,
                 reviews: Mapping[str, Review | None], naming: Naming, min_confidence: float | None = None,
                 metrics: MetricsFn | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> list[ReportItem]:
    """A ReportItem per input, in order; an input that cannot be read or run still gets its row (no picture).
    `spec`: the model's spec as tuned (its verdict rules decide OK/NG); `reviews` by relative path;
    `metrics(item, mask)` the mask measured against the image's reference (None: none)."""
    items: list[ReportItem] = []
    for item in inputs:
        if should_stop():
            break
        identifying = naming.identifying(item)
        review = private_review(reviews.get(item.rel.as_posix()), identifying)
        try:
            if item.problem:
                raise SegLensError(f"{item.path}: {item.problem}")
            if item.volume is not None:
                row = volume_item(model, item.volume, spec=spec, name=naming.name(item), review=review,
                                  min_confidence=min_confidence, should_stop=should_stop,
                                  corrections=None if metrics is None else (item, metrics))
            else:
                row = image_item(model, item, spec=spec, name=naming.name(item), review=review,
                                 min_confidence=min_confidence, metrics=metrics)
        except pipeline.Stopped:
            break
        except Exception as exc:  # the row says why; the report goes on
            row = ReportItem(naming.name(item), None, "", f"not processed: {naming.problem(item, exc)}", None, review)
        items.append(replace(row, identifying=identifying))  # the finished page is checked for them (anonymize)
    return items


def image_item(model: ModelSession, item: InputFile, *, spec: ModelSpec, name: str, review: Review | None,
               min_confidence: float | None = None, metrics: MetricsFn | None = None) -> ReportItem:
    """One image's row: its overlay, verdict and metrics."""
    image, _ = pipeline.decode(item.path)
    result = _run(model, image, spec, min_confidence)
    verdict = judge(spec, result).verdict
    scored = metrics(item, result.mask) if metrics is not None and result.mask is not None else None
    return ReportItem(name, overlay_png(image.display(), result.mask, spec.classes),
                      "" if verdict is None else verdict.cell,
                      "" if verdict is None else verdict.reason, scored, review)


def volume_item(model: ModelSession, volume: Volume, *, spec: ModelSpec, name: str, review: Review | None,
                min_confidence: float | None = None,
                should_stop: Callable[[], bool] = lambda: False,
                corrections: tuple[InputFile, MetricsFn] | None = None) -> ReportItem:
    """One volume's row: every slice run; the picture is the slice with the most foreground (the middle one when
    none has any, or for a classifier); NG when any slice is NG (the first says why), else when a volume rule fires
    on the volume's 3D components (as the CLI's report); figures: slices, the slice shown, mL (else voxels) per
    class, and the slices corrected by hand. `corrections`: (the volume's input, its metrics) to measure each slice
    against its own correction; the row's IoU and Dice are their means over the corrected slices."""
    counts = np.zeros(256, np.int64)
    shown = _Shown(-1, -1, None, None)
    judged_slices: list[tuple[int, Verdict]] = []  # the first judged (any rule judged it) and every one not OK
    labels = _LabelVolume(volume) if spec.verdict is not None and plane_rules(spec.verdict) != spec.verdict else None
    corrected: dict[int, dict[str, float]] = {}
    for k in range(volume.depth):
        if should_stop():
            raise pipeline.Stopped()
        image = read_slice(volume, k)
        result = _run(model, image, spec, min_confidence)
        verdict = slice_verdict(spec, result)  # a volume rule judges the whole volume, below
        if verdict is not None and (not judged_slices or not verdict.ok):
            judged_slices.append((k + 1, verdict))
        if labels is not None:
            labels.add(k, result.mask)
        if corrections is not None and result.mask is not None:
            scored = corrections[1](corrections[0], result.mask, k)
            if scored is not None:
                corrected[k] = scored
        here = class_pixel_counts(result.mask) if result.mask is not None else None
        if here is not None:
            counts += here
        foreground = int(here[1:].sum()) if here is not None else 0
        if foreground > shown.foreground or (k == volume.depth // 2 and shown.foreground <= 0):
            shown = _Shown(k, foreground, image, result.mask)
    said, reason = _said(judged_slices, labels.verdict(spec) if labels is not None else None)
    picture = overlay_png(shown.image.display(), shown.mask, spec.classes) if shown.image is not None else None
    figures = volume_figures(volume, spec, counts, shown.index, shown.foreground) + _corrected_figures(corrected)
    return ReportItem(name, picture, said, reason, _mean_metrics(corrected), review, figures=figures)


def _corrected_figures(corrected: dict[int, dict[str, float]]) -> tuple[tuple[str, str], ...]:
    """("corrected slices", "5, 6") — the slices (1-based) whose correction the row's metrics are measured on."""
    if not corrected:
        return ()
    slices = [str(k + 1) for k in sorted(corrected)]
    shown = ", ".join(slices[:12]) + (f" … ({len(slices)})" if len(slices) > 12 else "")
    return (("corrected slices", shown),)


def _mean_metrics(corrected: dict[int, dict[str, float]]) -> dict[str, float] | None:
    if not corrected:
        return None
    return {name: float(np.mean([m[name] for m in corrected.values()])) for name in ("iou", "dice")}


def _said(slices: list[tuple[int, Verdict]], whole: Verdict | None) -> tuple[str, str]:
    """A volume row's verdict and reason: the first NG slice, else the volume rules' NG, else the first REVIEW
    slice, else OK (app.inference.decide.volume.combined); nothing when no rule judged it."""
    verdict = combined(slices, whole)
    return ("", "") if verdict is None else (verdict.cell, verdict.reason)


class _LabelVolume:
    """A volume's slices' masks stacked into its label volume, for the volume rules (min_component_ml)."""

    def __init__(self, volume: Volume) -> None:
        self.volume = volume
        self.labels: np.ndarray | None = None  # None until a slice has a mask

    def add(self, k: int, mask: np.ndarray | None) -> None:
        if mask is None:
            return
        if self.labels is None:
            self.labels = np.zeros((self.volume.depth, *mask.shape), np.uint8)
        if mask.shape != self.labels.shape[1:]:
            raise SegLensError(f"{self.volume.slices[k].path}: slice {k + 1} is {mask.shape[1]}×{mask.shape[0]}, "
                               f"the volume's first slice {self.labels.shape[2]}×{self.labels.shape[1]}")
        self.labels[k] = mask

    def verdict(self, spec: ModelSpec) -> Verdict | None:
        found, why_not = volume_components(self.volume, self.labels)
        return components_verdict(spec, found, why_not)


@dataclass(frozen=True)
class _Shown:
    index: int
    foreground: int
    image: DecodedImage | None
    mask: np.ndarray | None


def volume_figures(volume: Volume, spec: ModelSpec, counts: np.ndarray, shown: int,
                   foreground: int) -> tuple[tuple[str, str], ...]:
    """(name, value) lines: slices, the slice shown, and per foreground class its mL (voxels without geometry)."""
    why = "most foreground" if foreground > 0 else "middle"
    figures = [("slices", str(volume.depth)), ("shown", f"slice {shown + 1} ({why})")]
    if spec.task == "segmentation":
        names = spec.class_names
        ml = volume.millilitres(counts[:len(names)])
        for value, class_name in enumerate(names):
            if value == 0:
                continue
            figures.append((f"mL {class_name}", f"{ml[value]:.2f}") if ml is not None
                           else (f"voxels {class_name}", str(int(counts[value]))))
    return tuple(figures)


def _run(model: ModelSession, image: DecodedImage, spec: ModelSpec, min_confidence: float | None) -> Result:
    result = pipeline.run_image(model, image)
    return pipeline.relabel(result, spec=spec, min_confidence=min_confidence) if min_confidence is not None \
        else result


def overlay_png(pixels: np.ndarray, mask: np.ndarray | None, classes: Sequence[ClassInfo]) -> bytes:
    """The picture (at most OVERLAY_SIDE on its long side) with the mask blended in the classes' colours."""
    import cv2

    from app.io.files import encode_png
    from app.io.render import blend_overlay

    scale = OVERLAY_SIDE / max(pixels.shape[:2])
    if scale < 1:
        size = (max(1, round(pixels.shape[1] * scale)), max(1, round(pixels.shape[0] * scale)))
        pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
        mask = None if mask is None else cv2.resize(mask, size, interpolation=cv2.INTER_NEAREST)
    rgb = cv2.cvtColor(pixels, cv2.COLOR_GRAY2RGB) if pixels.ndim == 2 else pixels
    return encode_png(rgb if mask is None else blend_overlay(rgb, mask, classes))


# --- a review folder's report (seglens-cli report) ------------------------------------------------------------------

REPORT_NAME = "seglens_review_report.html"  # the default name, in the review folder (as the viewer writes it)


@dataclass(frozen=True)
class FolderReport:
    path: Path
    rows: int
    reviewed: int
    not_processed: int


def inputs_of(review_dir: Path, inputs: Path | None = None) -> Path:
    """The input folder a review folder belongs to: `inputs` when given, else the sibling `<name>` of
    `<name>_review` (app.runs.review.log.review_folder); raises ReviewError in one line otherwise."""
    from app.runs.review.log import ReviewError

    if inputs is not None:
        if not inputs.is_dir():
            raise ReviewError(f"{inputs}: --inputs must be the folder the review is of")
        return inputs
    name = review_dir.name
    sibling = review_dir.parent / name[: -len("_review")] if name.endswith("_review") else None
    if sibling is None or not sibling.is_dir():
        raise ReviewError(f"{review_dir}: not a review folder beside its inputs (<inputs>_review); give the input "
                          "folder with --inputs")
    return sibling


def corrected_metrics(review_dir: Path, spec: ModelSpec) -> MetricsFn:
    """IoU and Dice of a mask against the corrected mask saved for its image in `review_dir` (what a person signed
    off), None when there is none or it does not fit."""
    from app.inference.decide.metrics import image_metrics
    from app.io.references import read_reference
    from app.runs.review.log import find_corrected_mask

    n_classes = spec.label_count

    def measure(item: InputFile, mask: np.ndarray, frame: int | None = None) -> dict[str, float] | None:
        found = find_corrected_mask(review_dir, item.rel.as_posix(), frame)
        if found is None:
            return None
        try:
            reference = read_reference(found, n_classes)
        except SegLensError:
            return None
        if reference.shape != mask.shape:
            return None
        scored = image_metrics(mask, reference, n_classes)
        return {"iou": scored.iou, "dice": scored.dice}

    return measure


def folder_report(model: ModelSession, review_dir: Path, out: Path, *, input_root: Path, identity: RunIdentity,
                  spec: ModelSpec,
                  min_confidence: float | None = None, naming: Naming | None = None,
                  should_stop: Callable[[], bool] = lambda: False) -> FolderReport:
    """The HTML review report of every input under `input_root` (as `run` finds them) with the reviews of this
    model in `review_dir`, written atomically to `out`. `identity` (app.runs.outputs.provenance.RunIdentity) goes into
    the header: model, sidecar and their hashes, the thresholds and the provider."""
    from app.io.discover import discover
    from app.runs.outputs.segments import segments_of
    from app.runs.privacy.words import own_words
    from app.runs.review.html import write_review_report
    from app.runs.review.log import ReviewLog

    inputs = discover([input_root], exclude=[review_dir])
    log = ReviewLog.open(review_dir, identity.model_sha256)
    reviews = {item.rel.as_posix(): log.get(item.rel.as_posix()) for item in inputs}
    naming = naming or Naming(input_root)
    items = report_items(model, inputs, spec=spec, reviews=reviews, naming=naming, min_confidence=min_confidence,
                         metrics=corrected_metrics(review_dir, spec), should_stop=should_stop)
    where = None if naming.anonymize else os.path.relpath(input_root, out.parent)
    write_review_report(out, items, model_name=identity.model, model_sha256=identity.model_sha256,
                        seglens_version=identity.seglens, title=f"SegLens review — {identity.model}", run=identity,
                        inputs=where, own=own_words(segments_of(spec.classes)))
    return FolderReport(out, len(items), sum(review is not None for review in reviews.values()),
                        sum(item.verdict_reason.startswith("not processed:") for item in items))
