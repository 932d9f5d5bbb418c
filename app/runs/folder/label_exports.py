"""A folder run's instances as training labels (`--save coco`, `--save yolo`): every image's objects, collected on
the writer thread in input order, written once the whole run has finished — a COCO instances file
(`seglens_coco.json`: polygons, or RLE for a mask with a hole; each object's score kept; image ids from the
image's relative path, so they stay the same whatever else the folder holds) and YOLO txt labels
(`yolo/labels/<image>.txt` and `yolo/data.yaml` with the model's class names), through app.runs.labels.

Each image is named by its output stem (its path relative to the folder it was found in, made safe; under
--anonymize its pseudonymous name). An image that failed has no entry; a run that stopped early writes no labels
(they would look like a whole folder's). Every file is written whole or not at all, beneath the output folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.errors import SegLensError
from app.inference.model.instances import Instances
from app.runs.labels.coco import write_coco
from app.runs.labels.records import LabelledImage, LabelSet
from app.runs.labels.yolo import DATA_YAML, write_yolo
from app.runs.outputs.images import LABEL_KINDS
from app.runs.outputs.safety import OutputGuard

COCO_NAME = "seglens_coco.json"
YOLO_FOLDER = "yolo"


def label_kinds(save: Sequence[str]) -> tuple[str, ...]:
    """The run-wide label exports among `save`'s kinds."""
    return tuple(kind for kind in save if kind in LABEL_KINDS)


def label_files(out: Path, kinds: Sequence[str]) -> list[Path]:
    """The files `kinds` write under `out` (YOLO: its data.yaml; its labels/ beside it)."""
    return [out / COCO_NAME if kind == "coco" else out / YOLO_FOLDER / DATA_YAML for kind in kinds]


class RunLabels:
    """The instances of a run's images, by image, in the order they were added."""

    def __init__(self, names: Sequence[str], kinds: Sequence[str]) -> None:
        self.names, self.kinds = tuple(names), tuple(kinds)
        self._images: list[LabelledImage] = []

    def add(self, name: str, instances: Instances) -> None:
        """One image's objects (`name`: its relative '/'-path)."""
        self._images.append(LabelledImage(name, instances))

    def write(self, out: Path, guard: OutputGuard | None = None) -> list[Path]:
        """The label files under `out`, each whole or not at all; SegLensError in one line when one cannot be
        (its path refused by `guard`, or labels the format cannot hold)."""
        labels = LabelSet(self.names, tuple(self._images))
        written = []
        for kind, path in zip(self.kinds, label_files(out, self.kinds), strict=True):
            refused = guard.problem(path) if guard is not None else None
            if refused:
                raise SegLensError(refused)
            if kind == "coco":
                write_coco(path, labels, root=out)
            else:
                write_yolo(path.parent, labels)
            written.append(path)
        return written
