"""Metrics of a run against ground truth (`--reference`) or of model B against model A (`compare`): the report's
metric cells, the folder summary printed at the end and the CSV files written beside the report.

`seglens_metrics.csv`: one row per foreground class (and `(all classes)` first) — images where the class is in
the prediction or the reference, mean and median IoU and Dice over those images, precision and recall pooled
over their pixels, TP/FP/FN pixel totals. `seglens_metrics_images.csv`: one row per image and class present,
with IoU, Dice, precision, recall and TP/FP/FN pixels.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from app.errors import SegLensError
from app.inference.decide.metrics import ClassMetrics, ImageMetrics, image_metrics
from app.inference.model.spec import ModelSpec
from app.io.discover import InputFile
from app.io.references import ReferenceIndex, read_reference
from app.runs.outputs.report import write_table  # the report's cell rule: no live formulas, valid UTF-8
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.image.pipeline import Result

METRICS_NAME = "seglens_metrics.csv"
IMAGES_NAME = "seglens_metrics_images.csv"
_SUMMARY_COLUMNS = ("class", "images", "iou_mean", "iou_median", "dice_mean", "dice_median", "precision",
                    "recall", "tp_pixels", "fp_pixels", "fn_pixels")
_IMAGE_COLUMNS = ("path", "class", "iou", "dice", "precision", "recall", "tp_pixels", "fp_pixels", "fn_pixels")


def foreground_names(spec: ModelSpec) -> list[str]:
    """Distinct names of classes 1..n-1 (two classes may share a name: `a`, `a_2`)."""
    taken: set[str] = set()
    names = []
    for info in spec.classes[1:]:
        name, n = info.name, 2
        while name in taken:
            name, n = f"{info.name}_{n}", n + 1
        taken.add(name)
        names.append(name)
    return names


def metric_columns(spec: ModelSpec, *, lead: Sequence[str] = ("reference",)) -> list[str]:
    """The report's metric columns: `lead` (the reference used, or why none), `iou`, `dice`, then
    `iou:<class>`, `dice:<class>` per foreground class."""
    per_class = [c for name in foreground_names(spec) for c in (f"iou:{name}", f"dice:{name}")]
    return [*lead, "iou", "dice", *per_class]


def metric_cells(metrics: ImageMetrics | None, n_foreground: int) -> list[str]:
    """Cells for `iou`, `dice` and each class's pair; all empty without metrics."""
    if metrics is None:
        return [""] * (2 + 2 * n_foreground)
    per_class = [f"{v:.6f}" for c in metrics.classes[:n_foreground] for v in (c.iou, c.dice)]
    return [f"{metrics.iou:.6f}", f"{metrics.dice:.6f}", *per_class]


@dataclass(frozen=True)
class Scored:
    """One input against its reference: the metrics, or the one-line notice saying why there are none."""

    reference: str  # the reference file used, or the notice
    metrics: ImageMetrics | None
    notice: str | None = None


class MetricsSummary:
    """Collects every scored image (in order, on the writer thread) and describes the folder at the end."""

    def __init__(self, class_names: Sequence[str], *, against: str) -> None:
        self.class_names, self.against = list(class_names), against
        self.images: list[tuple[str, ImageMetrics]] = []
        self.unscored = 0

    def add(self, path: str, scored: Scored | None) -> None:
        if scored is None or scored.metrics is None:
            self.unscored += 1
        else:
            self.images.append((path, scored.metrics))

    def lines(self, worst: int = 5) -> list[str]:
        """The folder summary: mean and median IoU/Dice, each class, the `worst` files by IoU."""
        head = (f"metrics vs {self.against}: {counted(len(self.images), 'image')} scored, {self.unscored} without "
                "metrics")
        if not self.images:
            return [head]
        ious, dices = [m.iou for _, m in self.images], [m.dice for _, m in self.images]
        lines = [f"{head}; IoU mean {np.mean(ious):.3f} median {statistics.median(ious):.3f}, "
                 f"Dice mean {np.mean(dices):.3f} median {statistics.median(dices):.3f}"]
        per_class = [f"{name} {float(row[2]):.3f} ({counted(int(row[1]), 'image')})" for name, row in zip(
            self.class_names, self._class_rows(), strict=False) if row[1]]
        if per_class:
            lines.append("  IoU per class: " + ", ".join(per_class))
        # a perfect image is nobody's worst: listed only when some differ, and then only those that do
        ranked = sorted((item for item in self.images if item[1].iou < 1.0), key=lambda item: item[1].iou)[:worst]
        lines.append("  worst IoU: " + ", ".join(f"{path} {m.iou:.3f}" for path, m in ranked) if ranked
                     else f"  all identical (IoU 1.000{'' if len(self.images) == 1 else ' for each image'})")
        return lines

    def _class_rows(self) -> list[list[Any]]:
        return [_summary_row(name, [m.of(i + 1) for _, m in self.images])
                for i, name in enumerate(self.class_names)]

    def record(self) -> dict[str, Any] | None:
        """Nothing more in the run record (the files and the report hold the masks' metrics)."""
        return None

    def write(self, folder: Path) -> list[Path]:
        """`seglens_metrics.csv` (per class) and `seglens_metrics_images.csv` (per image and class) in `folder`."""
        every = [c for _, m in self.images for c in m.classes]
        overall = _summary_row("(all classes)", every, images=[m for _, m in self.images])
        rows = [overall, *self._class_rows()]
        details = [[path, name, *_class_cells(m.of(i + 1))] for path, m in self.images
                   for i, name in enumerate(self.class_names) if m.of(i + 1).present]
        return [write_table(folder / METRICS_NAME, _SUMMARY_COLUMNS, rows),
                write_table(folder / IMAGES_NAME, _IMAGE_COLUMNS, details)]


def _summary_row(name: str, classes: list[ClassMetrics], images: list[ImageMetrics] | None = None) -> list[Any]:
    """One row of seglens_metrics.csv: IoU/Dice over the images where the class is present (or, for the
    `(all classes)` row, each image's mean), precision and recall pooled over pixels."""
    present = [c for c in classes if c.present]
    ious = [m.iou for m in images] if images is not None else [c.iou for c in present]
    dices = [m.dice for m in images] if images is not None else [c.dice for c in present]
    tp, fp, fn = (sum(getattr(c, k) for c in present) for k in ("tp", "fp", "fn"))
    return [name, len(ious), *_mean_median(ious), *_mean_median(dices), _ratio(tp, tp + fp), _ratio(tp, tp + fn),
            tp, fp, fn]


def _mean_median(values: list[float]) -> list[str]:
    if not values:
        return ["", ""]
    return [f"{float(np.mean(values)):.6f}", f"{statistics.median(values):.6f}"]


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.6f}" if b else ""


def _class_cells(c: ClassMetrics) -> list[Any]:
    return [f"{c.iou:.6f}", f"{c.dice:.6f}", "" if c.precision is None else f"{c.precision:.6f}",
            "" if c.recall is None else f"{c.recall:.6f}", c.tp, c.fp, c.fn]


def reference_problem(reference: Path | None, spec: ModelSpec, *, resume: bool = False) -> str | None:
    """Why `--reference` cannot be used in this run (one line), or None."""
    if reference is None:
        return None
    if spec.task != "instances":  # an instance model's: app.runs.folder.instance_reference, checked by the run
        if not reference.is_dir():
            return f"{reference} is not a folder"
        if spec.task != "segmentation":
            return f"needs a segmentation or instance model; {spec.path.name} is a {spec.task} model"
    if resume:  # carried rows would have no per-class counts for the summary: refused, not half-measured
        return "cannot be combined with --resume (the metrics summary needs every image measured); run without it"
    return None


class ScoreSummary(Protocol):
    """A folder's metrics as a run collects them: each input's scoring added in order, then its summary lines,
    its files and what the run record keeps of it (None: nothing)."""

    def add(self, path: str, scored: Scored | None) -> None: ...

    def lines(self) -> list[str]: ...

    def write(self, folder: Path) -> list[Path]: ...

    def record(self) -> dict[str, Any] | None: ...


class Scorer(Protocol):
    """`run --reference`: the report's columns, each result scored against its ground truth (None: nothing to
    score), the cells of its row, the folder's summary and how the record names the reference."""

    @property
    def columns(self) -> list[str]: ...

    @property
    def summary(self) -> ScoreSummary: ...

    @property
    def recorded(self) -> str: ...

    def score_result(self, item: InputFile, result: Result, *, name: str | None = None) -> Scored | None: ...

    def cells(self, scored: Scored | None) -> list[str]: ...


class ReferenceScorer:
    """`run --reference`: finds, reads and checks each input's reference and measures the mask against it.

    `key` (--anonymize, the pseudonym key): the report's reference cells, notices, the metrics files and the run
    record carry no input or reference path: an input goes by the name the report gives it, a reference file by a
    keyed name (`reference/ref-<keyed id>`), the folder by `reference-folder-<keyed id>`."""

    def __init__(self, root: Path, spec: ModelSpec, inputs: Sequence[InputFile], *, key: bytes = b"") -> None:
        self.root, self.n_classes = Path(root), spec.label_count
        self.index = ReferenceIndex(self.root, [item.rel for item in inputs])
        self.columns = metric_columns(spec)
        self.key = key
        self.summary = MetricsSummary(foreground_names(spec), against=self.recorded)

    @property
    def recorded(self) -> str:
        """The reference folder as the run record and the summary name it."""
        if not self.key:
            return str(self.root)
        from app.runs.privacy.pseudonyms import keyed_hex

        return f"reference-folder-{keyed_hex(self.key, 'reference-folder', str(self.root))[:_KEYED_DIGITS]}"

    def score(self, item: InputFile, mask: np.ndarray, *, name: str | None = None) -> Scored:
        """The mask against the input's reference, or a notice (missing, unreadable, wrong size or values).
        `name`: the input as the report names it (under `key`; default its pseudonymous name)."""
        path, why = self.index.find(item.rel, item.path)
        shown = self._name(item, name)
        if path is None:
            return Scored("", None, f"{shown}: {self._private(why or '', path)}; no metrics")
        try:
            reference = read_reference(path, self.n_classes)
        except SegLensError as exc:
            return Scored(self._reference(path), None, f"{shown}: {self._private(str(exc), path)}; no metrics")
        if reference.shape != mask.shape:
            h, w = reference.shape
            return Scored(self._reference(path), None, f"{shown}: reference {self._reference(path)} is {w}×{h}, "
                                                       f"the image {mask.shape[1]}×{mask.shape[0]}; no metrics")
        return Scored(self._reference(path), image_metrics(mask, reference, self.n_classes))

    def score_result(self, item: InputFile, result: Result, *, name: str | None = None) -> Scored | None:
        """The result's mask scored (`score`); None for a result without one."""
        mask = result.mask
        return None if mask is None else self.score(item, mask, name=name)

    def cells(self, scored: Scored | None) -> list[str]:
        """The report's metric cells for one input (all empty for an input without a result)."""
        reference = "" if scored is None else (scored.notice or scored.reference)
        return [reference, *metric_cells(None if scored is None else scored.metrics, len(self.columns) // 2 - 1)]

    def _name(self, item: InputFile, name: str | None) -> str:
        from app.runs.privacy.names import shown_name

        return shown_name(item, name, self.key)

    def _reference(self, path: Path) -> str:
        if not self.key:
            return str(path)
        from app.runs.privacy.pseudonyms import keyed_hex

        rel = path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)
        return f"reference/ref-{keyed_hex(self.key, 'reference-name', rel)[:_KEYED_DIGITS]}"

    def _private(self, why: str, path: Path | None) -> str:
        """Why there are no metrics; under `key` without a name: the kind of problem only (the reference index
        and reader name the reference's path, and a folder of references mirrors the inputs' patient folders)."""
        if not self.key:
            return why
        if path is not None:  # read_reference's `<path>: <what is wrong>`: what is wrong names no file
            what = why.removeprefix(f"{path}: ")
            return what if str(self.root) not in what and path.name not in what else "the reference mask is unusable"
        if why.startswith("ambiguous"):
            return "ambiguous reference (inputs beside it share its stem)"
        if why.startswith("no unambiguous"):
            return "no unambiguous reference (several share its stem)"
        return "no reference found"


_KEYED_DIGITS = 16  # hex digits of a keyed name (as app.runs.privacy.names' output names)
