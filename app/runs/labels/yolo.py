"""YOLO txt labels, written: one `.txt` per image under `labels/` (the image's relative path, its extension made
`.txt`, as Ultralytics finds a label beside `images/`) with a line per instance, and a `data.yaml` with the names.

Coordinates are normalised by the image's width and height and kept inside [0, 1] as Ultralytics' loader requires:

- a box: `class cx cy w h`;
- a mask: `class x1 y1 x2 y2 …`, the boundary pixels' centres of its largest part, its holes joined to it by
  seams (YOLO holds one polygon per object: a second part is not written); a box among masks is written as its
  four corners, so a file is all boxes or all polygons;
- an oriented box: `class x1 y1 … x4 y4`, its four corners.

The `data.yaml` beside `labels/` holds the class names (`names: {0: …}`, `nc`, and `train`/`val` when the images'
folder is named). Every file written whole or not at all through the writing gate.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from app.errors import OutputError
from app.guard.names import PathEscape, join_under
from app.guard.shared import atomic_write
from app.inference.model.instances import Instance, Instances
from app.runs.labels import polygons
from app.runs.labels.coco import corners
from app.runs.labels.records import LabelsError, LabelSet, safe_relative

DATA_YAML = "data.yaml"
LABELS = "labels"


def label_parts(name: str) -> tuple[str, ...]:
    """The path of an image's label file under `labels/`, as components: `a/b.png` → ('a', 'b.txt')."""
    parts = safe_relative(name)
    if parts is None:
        raise LabelsError(f"'{name}' is not a relative path inside the folder")
    stem = parts[-1].rsplit(".", 1)[0] if "." in parts[-1].lstrip(".") else parts[-1]
    return (*parts[:-1], f"{stem}.txt")


def write_yolo(folder: Path, labels: LabelSet, *, masks: bool = True, images: str | None = None) -> None:
    """`labels` as YOLO txt files under `folder/labels/` and `folder/data.yaml` (`images`: the images' folder,
    relative to `folder` or absolute, written as `train` and `val`). Polygons where the instances have masks and
    `masks` is on, else boxes. LabelsError for two images that would share a label file, OutputError when a file
    cannot be written."""
    files: dict[tuple[str, ...], str] = {}
    for image in labels.images:
        parts = label_parts(image.name)
        if parts in files:
            raise LabelsError(f"{folder}: '{files[parts]}' and '{image.name}' would share the label file "
                              f"{'/'.join(parts)}")
        files[parts] = image.name
    polygon_set = masks and any(i.mask is not None for image in labels.images for i in image.instances.items)
    for image in labels.images:
        text = yolo_text(image.instances, polygon_set=polygon_set)
        _write(folder, (LABELS, *label_parts(image.name)), text.encode("utf-8"))
    _write(folder, (DATA_YAML,), data_yaml(labels.names, images=images).encode("utf-8"))


def yolo_text(instances: Instances, *, polygon_set: bool) -> str:
    """One image's label file: a line per instance, best score first (a crowd region is no YOLO object, as
    Ultralytics' own COCO converter leaves them out)."""
    return "".join(f"{_line(item, instances.image_hw, polygon_set)}\n" for item in instances.items if not item.crowd)


def data_yaml(names: tuple[str, ...], *, images: str | None = None) -> str:
    """The data.yaml text: the images' folder as `train` and `val` when named, `nc` and `names` by index."""
    values: dict[str, object] = {"path": "."} if images is not None else {}
    if images is not None:
        values |= {"train": images, "val": images}
    values |= {"nc": len(names), "names": dict(enumerate(names))}
    return yaml.safe_dump(values, sort_keys=False, allow_unicode=True)


def _line(item: Instance, image_hw: tuple[int, int], polygon_set: bool) -> str:
    x0, y0, x1, y1 = item.box
    if item.rotated is not None:
        points = corners(item.rotated)
    elif polygon_set and item.mask is not None and item.mask_box is not None:
        found = polygons.centre_polygon(item.mask, offset=(item.mask_box[0], item.mask_box[1]))
        points = found if found is not None else [x0, y0, x1, y0, x1, y1, x0, y1]
    elif polygon_set:
        points = [x0, y0, x1, y0, x1, y1, x0, y1]
    else:
        return _numbers(item.class_index, [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], image_hw)
    return _numbers(item.class_index, points, image_hw)


def _numbers(class_index: int, values: list[float], image_hw: tuple[int, int]) -> str:
    h, w = image_hw
    scaled = (min(1.0, max(0.0, v / (w if i % 2 == 0 else h))) for i, v in enumerate(values))
    return " ".join([str(class_index), *(f"{v:.6f}" for v in scaled)])


def _write(folder: Path, parts: tuple[str, ...], data: bytes) -> None:
    try:
        path = join_under(folder, *parts)
    except PathEscape as exc:
        raise LabelsError(f"{folder}: {exc}") from None
    try:
        atomic_write(path, data, root=folder)
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc


__all__ = ["DATA_YAML", "LABELS", "data_yaml", "label_parts", "write_yolo", "yolo_text"]
