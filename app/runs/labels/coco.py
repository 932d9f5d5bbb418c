"""COCO instances JSON, written: the dataset form a training pipeline reads (`images`, `categories`, `annotations`)
and the results form COCOeval scores (a list of detections with their scores).

- Images keep their path relative to the folder as `file_name` and get an id from that path alone
  (`records.image_id`), so the same image has the same id in every file made from the folder.
- Categories are the model's class names, `id` = class index + 1 (COCO's ids start at 1).
- Each instance is one annotation: `bbox` [x, y, w, h] of its box, `area` (its mask's pixels, else its (oriented)
  box's w × h), `iscrowd` 0 (1 for a reference's crowd region, its mask run-length as COCO writes those), its
  `score`, and `segmentation`: polygons (`polygons.outer_polygons`, exact through pycocotools) or, for a mask with
  a hole or when asked, COCO's compressed run-length mask. An oriented box is its four corners as a polygon, with
  `obb` [cx, cy, w, h, angle in radians] beside it (a key other readers ignore).
- The results form always writes masks run-length (pycocotools' `loadRes` reads no polygons there).

Written whole or not at all through the writing gate (app.guard.shared.atomic_write).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Literal

import numpy as np

from app.errors import OutputError
from app.guard.shared import atomic_write
from app.inference.model.instances import Instance
from app.runs.labels import polygons, rle
from app.runs.labels.records import LabelledImage, LabelsError, LabelSet, image_id

Segmentation = Literal["polygons", "rle"]
JsonValue = dict[str, object]


def coco_document(labels: LabelSet, *, segmentation: Segmentation = "polygons") -> JsonValue:
    """The dataset form of `labels` as a JSON-ready dict (LabelsError for two images with one id, a value that is
    not finite)."""
    ids = _image_ids(labels)
    annotations: list[JsonValue] = []
    for image, number in zip(labels.images, ids, strict=True):
        for instance in image.instances.items:
            entry = {"id": len(annotations) + 1, "image_id": number, **_annotation(instance, image, segmentation)}
            annotations.append(entry)
    return {
        "info": {"description": "instances written by SegLens"},
        "images": [_image_entry(image, number) for image, number in zip(labels.images, ids, strict=True)],
        "categories": [{"id": index + 1, "name": name} for index, name in enumerate(labels.names)],
        "annotations": annotations,
    }


def coco_results(labels: LabelSet) -> list[JsonValue]:
    """The results form of `labels`: one detection per instance (masks run-length), for COCOeval's `loadRes`."""
    found: list[JsonValue] = []
    for image, number in zip(labels.images, _image_ids(labels), strict=True):
        for instance in image.instances.items:
            entry = _annotation(instance, image, "rle")
            found.append({"image_id": number, "category_id": entry["category_id"], "bbox": entry["bbox"],
                          "score": entry["score"], **_only(entry, "segmentation", "obb")})
    return found


def write_coco(path: Path, labels: LabelSet, *, segmentation: Segmentation = "polygons", results: bool = False,
               root: str | os.PathLike[str] | None = None) -> None:
    """`labels` as a COCO file at `path` (the results form with `results`), written whole or not at all (beneath
    `root` when given). LabelsError for labels COCO cannot hold, OutputError when it cannot be written."""
    try:
        document: object = coco_results(labels) if results else coco_document(labels, segmentation=segmentation)
    except LabelsError as exc:
        raise LabelsError(f"{path}: {exc}") from None
    text = json.dumps(document, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    try:
        atomic_write(path, text.encode("utf-8", "surrogatepass"), root=root)
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def _image_ids(labels: LabelSet) -> list[int]:
    ids = [image_id(image.name) for image in labels.images]
    seen: dict[int, str] = {}
    for image, number in zip(labels.images, ids, strict=True):
        if number in seen:
            raise LabelsError(f"'{seen[number]}' and '{image.name}' share an image id (one image named twice?)")
        seen[number] = image.name
    return ids


def _image_entry(image: LabelledImage, number: int) -> JsonValue:
    h, w = image.instances.image_hw
    return {"id": number, "file_name": image.name, "width": int(w), "height": int(h)}


def _annotation(instance: Instance, image: LabelledImage, segmentation: Segmentation) -> JsonValue:
    x0, y0, x1, y1 = _finite(instance.box, image.name)
    entry: JsonValue = {"category_id": instance.class_index + 1, "bbox": [x0, y0, x1 - x0, y1 - y0],
                        "area": _area(instance), "iscrowd": int(instance.crowd),
                        "score": _finite((instance.score,), image.name)[0]}
    if instance.rotated is not None:
        cx, cy, w, h, angle = _finite(instance.rotated, image.name)
        entry["segmentation"] = [corners(instance.rotated)]
        entry["obb"] = [cx, cy, w, h, angle]
    elif instance.mask is not None and instance.mask_box is not None:
        entry["segmentation"] = _mask_segmentation(instance, image.instances.image_hw,
                                                   "rle" if instance.crowd else segmentation)
    return entry


def _mask_segmentation(instance: Instance, image_hw: tuple[int, int], segmentation: Segmentation) -> object:
    assert instance.mask is not None and instance.mask_box is not None
    if segmentation == "polygons":
        found = polygons.outer_polygons(instance.mask, offset=(instance.mask_box[0], instance.mask_box[1]))
        if found is not None:
            return found
    return rle.to_rle(_placed(instance.mask, instance.mask_box, image_hw))


def _placed(mask: np.ndarray, mask_box: tuple[int, int, int, int], image_hw: tuple[int, int]) -> np.ndarray:
    """The mask at the image's size, the part of its box outside the image cut off."""
    h, w = image_hw
    out = np.zeros((h, w), dtype=bool)
    x0, y0, x1, y1 = mask_box
    cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    if cx1 > cx0 and cy1 > cy0:
        out[cy0:cy1, cx0:cx1] = mask[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
    return out


def _area(instance: Instance) -> float:
    if instance.mask is not None:
        return int(np.count_nonzero(instance.mask))
    if instance.rotated is not None:
        return float(instance.rotated[2] * instance.rotated[3])
    x0, y0, x1, y1 = instance.box
    return float(max(0.0, x1 - x0) * max(0.0, y1 - y0))


def corners(rotated: tuple[float, float, float, float, float]) -> list[float]:
    """An oriented box's four corners x1, y1, … x4, y4 (Ultralytics' order: centre ± half width ± half height)."""
    cx, cy, w, h, angle = rotated
    cos, sin = math.cos(angle), math.sin(angle)
    wx, wy, hx, hy = w / 2 * cos, w / 2 * sin, -h / 2 * sin, h / 2 * cos
    points = ((cx + wx + hx, cy + wy + hy), (cx + wx - hx, cy + wy - hy), (cx - wx - hx, cy - wy - hy),
              (cx - wx + hx, cy - wy + hy))
    return [float(v) for point in points for v in point]


def _finite(values: tuple[float, ...], name: str) -> tuple[float, ...]:
    if not all(math.isfinite(v) for v in values):
        raise LabelsError(f"'{name}': an instance's box, score or rotation is not a finite number")
    return tuple(float(v) for v in values)


def _only(entry: JsonValue, *keys: str) -> JsonValue:
    return {key: entry[key] for key in keys if key in entry}
