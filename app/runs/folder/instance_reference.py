"""Ground truth for an instance model (`run --reference` with a YOLO detect, segment or obb export): a COCO instances
JSON or a YOLO labels folder, each input's instances scored against its reference (app.runs.labels.metrics) —
precision and recall at IoU 0.5 in the image's report row, the folder's mAP@0.5:0.95 as COCOeval computes it in the
summary, the run record and seglens_metrics.csv (one row per class).

Which reference belongs to an input found as `a/x.jpg` (its path relative to the folder it was found in):
- COCO (`--reference FILE.json`): the image whose `file_name` is `a/x.jpg`, else the one image named `x.jpg` when
  exactly one COCO image and one input have that name (a flat file over a folder of folders). Its categories are
  matched to the model's classes by name.
- YOLO (`--reference DIR`, the dataset folder holding `labels/`, or its `data.yaml`): Ultralytics' own rule first —
  the input's path with its last `images` folder made `labels` and its extension `.txt`, when that lies under
  DIR/labels (`DIR/images/train/x.jpg` → `DIR/labels/train/x.txt`) — else `DIR/labels/a/x.txt` (as SegLens writes
  them). An image without a label file is a background image (no instances), as Ultralytics reads it. The class
  names are DIR/data.yaml's, matched to the model's by name; without one, the model's own, by index.

The reference as a whole (an unreadable COCO file or data.yaml, a class the model does not have) refuses the run in
one line before anything runs; one image's problem (its label file, its size, no COCO image for it) is that image's
notice and the run goes on. Every file goes through the labels readers' gates (sizes bounded before allocation).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import SegLensError
from app.runs.folder.metrics import Scored
from app.runs.folder.plan import PlanRefused
from app.runs.labels.metrics import ImageScore, image_score, mean_average_precision
from app.runs.labels.records import LabelledImage
from app.runs.outputs.report import write_table
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.image.pipeline import Result
    from app.inference.model.instances import Instances
    from app.inference.model.spec import ModelSpec
    from app.io.discover import InputFile

COLUMNS = ("reference", "reference_instances", "matched_iou50", "precision_iou50", "recall_iou50")
METRICS_NAME = "seglens_metrics.csv"
_CLASS_COLUMNS = ("class", "reference_instances", "found_instances", "matched_iou50", "precision_iou50",
                  "recall_iou50", "ap_50_95")
_KEYED_DIGITS = 16


def instance_reference_problem(reference: Path) -> str | None:
    """Why `reference` cannot be an instance model's ground truth (one line), or None."""
    if reference.is_file() and reference.suffix.lower() == ".json":
        return None
    if reference.is_file() and reference.suffix.lower() not in (".yaml", ".yml"):
        return f"{reference} is neither a COCO instances JSON nor a YOLO data.yaml"
    if not reference.exists():
        return f"{reference} does not exist (a COCO instances JSON or a YOLO dataset folder)"
    folder = reference.parent if reference.is_file() else reference
    if not (folder / "labels").is_dir():
        return f"{folder} has no labels/ folder (a YOLO dataset: data.yaml, images/, labels/)"
    return None


@dataclass(frozen=True)
class InstanceScored(Scored):
    """One input's instances against its reference: the score at IoU 0.5 and the pair the folder's mAP is made of
    (`order`: where COCOeval puts the image, ascending image id)."""

    score: ImageScore | None = None
    pair: tuple[Instances, Instances] | None = None
    order: int = 0


class InstanceScorer:
    """`run --reference` for an instance model: the reference read once (PlanRefused when it cannot be), each
    result scored on the writer thread. `key` (--anonymize): no input or reference path in any cell or line."""

    def __init__(self, reference: Path, spec: ModelSpec, inputs: Sequence[InputFile], *, key: bytes = b"") -> None:
        self.root, self.names, self.key = Path(reference), tuple(spec.class_names), key
        self.columns = list(COLUMNS)
        self.coco = _CocoIndex(self.root, self.names, inputs) if self.root.suffix.lower() == ".json" else None
        obb = spec.detector is not None and spec.detector.head.task == "obb"
        self.yolo = None if self.coco is not None else _YoloIndex(self.root, self.names, obb=obb)
        self.summary = InstanceSummary(self.names, against=self.recorded)

    @property
    def recorded(self) -> str:
        """The reference as the run record and the summary name it."""
        if not self.key:
            return str(self.root)
        return f"reference-folder-{self._keyed('reference-folder', str(self.root))}"

    def score_result(self, item: InputFile, result: Result, *, name: str | None = None) -> Scored | None:
        """The result's instances against the input's reference, or the notice why there are no metrics."""
        found = result.instances
        if found is None:
            return None
        try:
            reference = self.coco.find(item) if self.coco is not None else self._yolo().find(item, found.image_hw)
        except SegLensError as exc:
            return Scored("", None, f"{self._name(item, name)}: {self._private(str(exc))}; no metrics")
        where, truth = reference
        if truth.instances.image_hw != found.image_hw:
            (h, w), (ih, iw) = truth.instances.image_hw, found.image_hw
            return Scored(self._cell(where), None, f"{self._name(item, name)}: reference {self._cell(where)} is "
                                                   f"{w}×{h}, the image {iw}×{ih}; no metrics")
        return InstanceScored(self._cell(where), None, score=image_score(truth.instances, found),
                              pair=(truth.instances, found), order=truth.order)

    def cells(self, scored: Scored | None) -> list[str]:
        """The report's reference cells for one input (the counts empty without a score)."""
        reference = "" if scored is None else (scored.notice or scored.reference)
        score = scored.score if isinstance(scored, InstanceScored) else None
        if score is None:
            return [reference, "", "", "", ""]
        return [reference, str(score.reference), str(score.matched), f"{score.precision:.6f}", f"{score.recall:.6f}"]

    def _yolo(self) -> _YoloIndex:
        assert self.yolo is not None  # not a COCO reference
        return self.yolo

    def _cell(self, where: str) -> str:
        return where if not self.key else f"reference/ref-{self._keyed('reference-name', where)}"

    def _name(self, item: InputFile, name: str | None) -> str:
        from app.runs.privacy.names import shown_name

        return shown_name(item, name, self.key)

    def _private(self, why: str) -> str:
        """A reader's line (`<file>: <what>`) with no path under --anonymize: what is wrong, or its kind."""
        if not self.key:
            return why
        what = why.split(": ", 1)[-1]
        return what if os.sep not in what and str(self.root) not in what else "the reference is unusable"

    def _keyed(self, purpose: str, text: str) -> str:
        from app.runs.privacy.pseudonyms import keyed_hex

        return keyed_hex(self.key, purpose, text)[:_KEYED_DIGITS]


class _CocoIndex:
    """A COCO file's images by `file_name`, and by base name where that is unambiguous."""

    def __init__(self, path: Path, names: tuple[str, ...], inputs: Sequence[InputFile]) -> None:
        from app.runs.labels.coco_read import read_coco

        self.path = path
        try:
            dataset = read_coco(path, names=names)
        except SegLensError as exc:
            raise PlanRefused(f"--reference {exc}") from None
        self.images = {image.name: image for image in dataset.images}
        self.by_base: dict[str, list[str]] = {}
        for image in dataset.images:
            self.by_base.setdefault(image.name.rsplit("/", 1)[-1], []).append(image.name)
        self.input_bases: dict[str, int] = {}
        for item in inputs:
            self.input_bases[item.rel.name] = self.input_bases.get(item.rel.name, 0) + 1

    def find(self, item: InputFile) -> tuple[str, LabelledImage]:
        """(the image's file_name, its reference), or LabelsError with why there is none."""
        from app.runs.labels.records import LabelsError

        rel = item.rel.as_posix()
        if rel in self.images:
            return rel, self.images[rel]
        same = self.by_base.get(item.rel.name, [])
        if len(same) == 1 and self.input_bases.get(item.rel.name, 0) == 1:
            return same[0], self.images[same[0]]
        if same:
            raise LabelsError(f"{self.path}: no unambiguous image for {rel} ({', '.join(sorted(same)[:3])})")
        raise LabelsError(f"{self.path}: no image with file_name {rel}")


class _YoloIndex:
    """A YOLO dataset folder's label files, read when an image of that size asks for one."""

    def __init__(self, reference: Path, names: tuple[str, ...], *, obb: bool = False) -> None:
        from app.runs.labels.yolo_read import read_data_yaml

        folder = reference.parent if reference.is_file() else reference
        yaml = reference if reference.is_file() else folder / "data.yaml"
        self.folder, self.names, self.remap, self.obb = folder, names, None, obb
        if yaml.is_file() or reference.is_file():
            try:  # a data.yaml found in the folder must lie in it; one named on the command line is the user's
                self.remap = _remap(read_data_yaml(yaml, root=None if reference.is_file() else folder), names, yaml)
            except SegLensError as exc:
                raise PlanRefused(f"--reference {exc}") from None
        self.file_names = tuple(names) if self.remap is None else tuple(names[i] for i in self.remap)

    def find(self, item: InputFile, image_hw: tuple[int, int]) -> tuple[str, LabelledImage]:
        """(the label file, relative to the folder; the image's reference: none without a file), or LabelsError."""
        from app.inference.model.instances import Instances
        from app.runs.labels.yolo_read import read_yolo_labels

        path = self.label(item)
        rel = path.relative_to(self.folder).as_posix()
        name = item.rel.as_posix()
        if not os.path.lexists(path):
            return f"{rel} (no file: a background image)", LabelledImage(name, Instances((), image_hw))
        found = read_yolo_labels(path, image_hw=image_hw, names=self.file_names, obb=self.obb, root=self.folder)
        if self.remap is not None:
            remap = self.remap
            found = replace(found, items=tuple(replace(i, class_index=remap[i.class_index],
                                                       class_name=self.names[remap[i.class_index]])
                                               for i in found.items))
        return rel, LabelledImage(name, found)

    def label(self, item: InputFile) -> Path:
        """The first label file there is of: Ultralytics' rule (the input's last `images` folder made `labels`,
        when that lands under labels/), labels/<relative path>.txt; the first of them when neither is there."""
        from app.runs.labels.yolo_read import label_path

        candidates = [label_path(self.folder, inner) for inner in (self._ultralytics(item), item.rel.as_posix())
                      if inner is not None]
        return next((path for path in candidates if os.path.lexists(path)), candidates[0])

    def _ultralytics(self, item: InputFile) -> str | None:
        """The input's path under labels/ by Ultralytics' `images` → `labels` rule, or None where it leads
        elsewhere."""
        from app.runs.labels.yolo import LABELS

        parts = Path(os.path.abspath(item.path)).parts
        if "images" not in parts:
            return None
        at = len(parts) - 1 - parts[::-1].index("images")
        beside, labels = Path(*parts[:at], LABELS, *parts[at + 1:]), Path(os.path.abspath(self.folder / LABELS))
        if not beside.is_relative_to(labels) or beside == labels:
            return None
        return beside.relative_to(labels).as_posix()


def _remap(yaml_names: tuple[str, ...], names: tuple[str, ...], yaml: Path) -> tuple[int, ...] | None:
    """Each data.yaml class's index among the model's (None: the same names in the same order); LabelsError for a
    class the model does not have."""
    from app.runs.labels.records import LabelsError

    if yaml_names == names:
        return None
    missing = [name for name in yaml_names if name not in names]
    if missing:
        raise LabelsError(f"{yaml}: class {missing[0]!r} is not one of the model's ({', '.join(names)})")
    return tuple(names.index(name) for name in yaml_names)


class InstanceSummary:
    """Every scored image (in order, on the writer thread) and the folder at the end: mAP@0.5:0.95 over the
    scored images as COCOeval computes it over the same files, precision and recall at IoU 0.5 pooled."""

    def __init__(self, class_names: Sequence[str], *, against: str) -> None:
        self.class_names, self.against = list(class_names), against
        self.images: list[tuple[str, InstanceScored]] = []
        self.unscored = 0

    def add(self, path: str, scored: Scored | None) -> None:
        if isinstance(scored, InstanceScored) and scored.pair is not None:
            self.images.append((path, scored))
        else:
            self.unscored += 1

    def mean_average_precision(self, class_index: int | None = None) -> float:
        """COCOeval's AP@[.5:.95] of the scored images (one class's with `class_index`); -1 with no reference
        instance."""
        return mean_average_precision([_only(pair, class_index) for pair in self._pairs()])

    def lines(self) -> list[str]:
        """The folder summary: the mAP, precision and recall at IoU 0.5, the images scored."""
        head = (f"metrics vs {self.against}: {counted(len(self.images), 'image')} scored, {self.unscored} without "
                "metrics")
        if not self.images:
            return [head]
        m = self.record()
        ap = "no reference instance" if m["map_50_95"] is None else f"{m['map_50_95']:.4f}"
        return [f"{head}; mAP@0.5:0.95 {ap}, at IoU 0.5 precision {m['precision_iou50']:.4f} recall "
                f"{m['recall_iou50']:.4f} ({m['matched_iou50']} of {m['reference_instances']} reference instances "
                f"found, {m['found_instances']} found)"]

    def record(self) -> dict[str, Any]:
        """What the run record keeps of the folder's metrics."""
        score = _total(s.score for _, s in self.images if s.score is not None)
        matched, found, reference = score.matched, score.found, score.reference
        value = self.mean_average_precision() if self.images else -1.0
        return {"images_scored": len(self.images), "images_without_metrics": self.unscored,
                "map_50_95": None if value < 0 else value, "precision_iou50": score.precision,
                "recall_iou50": score.recall, "matched_iou50": matched, "found_instances": found,
                "reference_instances": reference}

    def write(self, folder: Path) -> list[Path]:
        """seglens_metrics.csv: the folder (`(all classes)`) and each class, with its AP@0.5:0.95."""
        rows = [self._row("(all classes)", None), *(self._row(name, i) for i, name in enumerate(self.class_names))]
        return [write_table(folder / METRICS_NAME, _CLASS_COLUMNS, rows)]

    def _row(self, name: str, class_index: int | None) -> list[str]:
        pairs = [_only(pair, class_index) for pair in self._pairs()]
        total = _total(image_score(*pair) for pair in pairs)
        matched, found, reference = total.matched, total.found, total.reference
        ap = mean_average_precision(pairs) if pairs else -1.0
        return [name, str(reference), str(found), str(matched), f"{total.precision:.6f}", f"{total.recall:.6f}",
                "" if ap < 0 else f"{ap:.6f}"]

    def _pairs(self) -> list[tuple[Instances, Instances]]:
        """(reference, found) of each scored image, in COCOeval's order (ascending image id)."""
        ordered = sorted((s for _, s in self.images), key=lambda s: s.order)
        return [s.pair for s in ordered if s.pair is not None]


def _only(pair: tuple[Instances, Instances], class_index: int | None) -> tuple[Instances, Instances]:
    """The pair as it is, or with one class's instances only."""
    if class_index is None:
        return pair
    reference, found = (replace(side, items=tuple(i for i in side.items if i.class_index == class_index))
                        for side in pair)
    return reference, found


def _total(scores: Iterable[ImageScore]) -> ImageScore:
    """The images' matched, found and reference instances added up."""
    kept = list(scores)
    return ImageScore(sum(s.matched for s in kept), sum(s.found for s in kept), sum(s.reference for s in kept))
