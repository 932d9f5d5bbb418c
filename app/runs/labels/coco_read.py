"""COCO instances JSON, read back as a reference: someone else's file, so through the reading gate with a size
limit, parsed with no NaN or Infinity, nesting bounded, every value checked and every count bounded, and each
refusal one line naming the file and the problem (`LabelsError`).

The dataset form gives a LabelSet: each image under its `file_name` (a relative path with no `..`, never absolute),
its instances with their class (by category name when the model's `names` are given, else the categories in
ascending id order), box, score (1 when absent), mask (polygons filled as pycocotools fills them, or a run-length
mask, compressed or not), oriented box (`obb`) and whether it is a crowd region (`iscrowd`). The results form is
read with the dataset it answers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.guard.untrusted import STATE_FILE_LIMIT, read_untrusted
from app.inference.model.instances import Instance, Instances, PixelBox
from app.runs.labels import checks, polygons, rle
from app.runs.labels.checks import Bad
from app.runs.labels.records import LabelledImage, LabelsError, LabelSet, image_id, safe_relative

COCO_FILE_LIMIT = STATE_FILE_LIMIT  # 256 MiB of JSON: a few million annotations
MAX_IMAGES = 1_000_000


def read_coco(path: Path, *, names: Sequence[str] | None = None, limit: int = COCO_FILE_LIMIT,
              root: str | os.PathLike[str] | None = None) -> LabelSet:
    """The dataset form at `path` as a LabelSet, images in the file's order. With `names` (the model's classes)
    every category must be one of them, by name; LabelsError otherwise, and for anything unreadable."""
    document = _load(path, limit=limit, root=root)
    try:
        if not isinstance(document, dict):
            raise Bad("not a COCO dataset (an object with images, categories and annotations)")
        return _dataset(document, names)
    except Bad as exc:
        raise LabelsError(f"{path}: {exc}") from None


def read_coco_results(path: Path, dataset: LabelSet, *, limit: int = COCO_FILE_LIMIT,
                      root: str | os.PathLike[str] | None = None) -> LabelSet:
    """The results form at `path` (a list of detections) as a LabelSet over `dataset`'s images and class names
    (categories are class index + 1, as SegLens writes them). LabelsError for anything unreadable."""
    document = _load(path, limit=limit, root=root)
    images = {image_id(image.name): (image.name, image.instances.image_hw) for image in dataset.images}
    categories = {index + 1: (index, name) for index, name in enumerate(dataset.names)}
    try:
        if not isinstance(document, list):
            raise Bad("not a COCO results file (a list of detections)")
        found = _annotations(document, images, categories)
    except Bad as exc:
        raise LabelsError(f"{path}: {exc}") from None
    return LabelSet(dataset.names, tuple(LabelledImage(name, Instances(_best_first(found.get(number, [])), hw))
                                         for number, (name, hw) in images.items()))


def _load(path: Path, *, limit: int, root: str | os.PathLike[str] | None) -> object:
    try:
        data = read_untrusted(path, limit=limit, root=root)
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read the COCO file ({exc.strerror or exc})") from None
    try:
        return json.loads(data.decode("utf-8-sig"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        problem = "not UTF-8 text"
    except RecursionError:
        problem = "nested too deeply"
    except Bad as exc:
        problem = str(exc)
    except json.JSONDecodeError as exc:
        problem = f"invalid JSON at line {exc.lineno} ({exc.msg})"
    raise LabelsError(f"{path}: {problem}")


def _no_constant(name: str) -> object:
    raise Bad(f"{name} is not a number JSON allows")


def _dataset(document: dict[str, object], names: Sequence[str] | None) -> LabelSet:
    images = _images(_listed(document, "images", MAX_IMAGES))
    categories = _categories(_listed(document, "categories", 100_000), names)
    found = _annotations(_listed(document, "annotations", None), images, categories)
    names_out = tuple(names) if names is not None else tuple(name for _, name in sorted(categories.values()))
    return LabelSet(names_out, tuple(LabelledImage(name, Instances(_best_first(found.get(number, [])), hw), number)
                                     for number, (name, hw) in images.items()))


def _listed(document: dict[str, object], key: str, most: int | None) -> list[object]:
    value = document.get(key, [] if key == "annotations" else None)
    if not isinstance(value, list):
        raise Bad(f"'{key}' is not a list")
    if most is not None and len(value) > most:
        raise Bad(f"'{key}' holds {len(value):,} entries, more than {most:,}")
    return value


def _images(entries: list[object]) -> dict[int, tuple[str, tuple[int, int]]]:
    images: dict[int, tuple[str, tuple[int, int]]] = {}
    names: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"image {index}"
        if not isinstance(entry, dict):
            raise Bad(f"{where} is not an object")
        number = checks.integer(entry.get("id"), f"{where}'s id")
        name = checks.text(entry.get("file_name"), f"{where}'s file_name")
        if safe_relative(name) is None:
            raise Bad(f"{where}'s file_name {name[:80]!r} is not a relative path inside the folder")
        if number in images or name in names:
            raise Bad(f"{where} repeats an id or a file_name ({number}, {name[:80]!r})")
        images[number] = (name, checks.image_size(entry.get("width"), entry.get("height")))
        names.add(name)
    return images


def _categories(entries: list[object], names: Sequence[str] | None) -> dict[int, tuple[int, str]]:
    """Category id → (class index, class name)."""
    named: dict[int, str] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise Bad(f"category {index} is not an object")
        number = checks.integer(entry.get("id"), f"category {index}'s id")
        if number in named:
            raise Bad(f"category id {number} is given twice")
        named[number] = checks.text(entry.get("name"), f"category {index}'s name")
    if names is None:
        return {number: (index, named[number]) for index, number in enumerate(sorted(named))}
    unknown = [name for name in named.values() if name not in names]
    if unknown:
        raise Bad(f"category {unknown[0][:80]!r} is not a class of the model ({', '.join(names[:8])})")
    return {number: (list(names).index(name), name) for number, name in named.items()}


def _annotations(entries: list[object], images: dict[int, tuple[str, tuple[int, int]]],
                 categories: dict[int, tuple[int, str]]) -> dict[int, list[Instance]]:
    found: dict[int, list[Instance]] = {}
    pixels: dict[int, int] = {}
    for index, entry in enumerate(entries):
        where = f"annotation {index}"
        if not isinstance(entry, dict):
            raise Bad(f"{where} is not an object")
        number = checks.integer(entry.get("image_id"), f"{where}'s image_id")
        if number not in images:
            raise Bad(f"{where}'s image_id {number} is no image of the file")
        category = checks.integer(entry.get("category_id"), f"{where}'s category_id")
        if category not in categories:
            raise Bad(f"{where}'s category_id {category} is no category of the file")
        kept = found.setdefault(number, [])
        if len(kept) >= checks.MAX_INSTANCES:
            raise Bad(f"image '{images[number][0][:80]}' has more than {checks.MAX_INSTANCES:,} annotations")
        kept.append(_instance(entry, categories[category], images[number][1], where))
        pixels[number] = checks.mask_pixels(pixels.get(number, 0), kept[-1], f"image '{images[number][0][:80]}'")
    return found


def _instance(entry: dict[str, object], category: tuple[int, str], image_hw: tuple[int, int],
              where: str) -> Instance:
    x, y, w, h = checks.numbers(entry.get("bbox"), f"{where}'s bbox", count=4)
    if w < 0 or h < 0:
        raise Bad(f"{where}'s bbox has a negative size")
    checks.coordinates((x, y, x + w, y + h), f"{where}'s bbox")
    score = checks.number(entry.get("score", 1.0), f"{where}'s score")
    rotated = _rotated(entry.get("obb"), where) if "obb" in entry else None
    segmentation = entry.get("segmentation") if rotated is None else None
    cropped = _mask(segmentation, image_hw, where) if segmentation not in (None, []) else None
    if cropped is None and segmentation not in (None, []):
        cropped = (np.zeros((0, 0), dtype=bool), (0, 0, 0, 0))  # a mask of no pixel: COCOeval's IoU 0, not the box's
    crowd = checks.integer(entry.get("iscrowd", 0), f"{where}'s iscrowd", high=1) == 1
    return Instance(category[0], category[1], score, (x, y, x + w, y + h),
                    mask=cropped[0] if cropped else None, mask_box=cropped[1] if cropped else None,
                    angle=rotated[4] if rotated else None, rotated=rotated, crowd=crowd)


def _rotated(value: object, where: str) -> tuple[float, float, float, float, float]:
    cx, cy, w, h, angle = checks.numbers(value, f"{where}'s obb", count=5)
    if w < 0 or h < 0:
        raise Bad(f"{where}'s obb has a negative size")
    checks.coordinates((cx, cy, w, h), f"{where}'s obb")
    return cx, cy, w, h, angle


def _mask(value: object, image_hw: tuple[int, int], where: str) -> tuple[np.ndarray, PixelBox] | None:
    """The annotation's mask cut to its pixels' bounds, and those bounds; None when it holds no pixel."""
    if isinstance(value, list):
        if len(value) > checks.MAX_POINTS:
            raise Bad(f"{where}'s segmentation holds {len(value):,} polygons")
        shapes = [checks.numbers(item, f"{where}'s polygon") for item in value]
        if any(len(shape) < 6 or len(shape) % 2 for shape in shapes) or \
                sum(len(shape) for shape in shapes) > checks.MAX_POINTS:
            raise Bad(f"{where}'s polygon is not 3 or more (x, y) points, at most {checks.MAX_POINTS // 2:,} in all")
        for shape in shapes:
            checks.coordinates(shape, f"{where}'s polygon")
        return polygons.coco_fill_cropped(shapes, image_hw)
    if isinstance(value, dict):
        return _rle_mask(value, image_hw, where)
    raise Bad(f"{where}'s segmentation is neither polygons nor a run-length mask")


def _rle_mask(value: dict[str, object], image_hw: tuple[int, int], where: str) -> tuple[np.ndarray, PixelBox] | None:
    size = value.get("size")
    if not isinstance(size, list) or len(size) != 2 or tuple(size) != image_hw:
        raise Bad(f"{where}'s run-length size is not its image's {list(image_hw)}")
    counts = value.get("counts")
    try:
        if isinstance(counts, str):
            return rle.cropped_counts(rle.decode(counts, most=image_hw[0] * image_hw[1] + 1), image_hw)
        if isinstance(counts, list) and len(counts) <= image_hw[0] * image_hw[1] + 1:
            return rle.cropped_counts([checks.integer(c, f"{where}'s count") for c in counts], image_hw)
    except rle.RleRefused as exc:
        raise Bad(f"{where}'s run-length mask: {exc}") from None
    raise Bad(f"{where}'s run-length counts are neither COCO's string nor a list of counts")


def _best_first(items: list[Instance]) -> tuple[Instance, ...]:
    return tuple(sorted(items, key=lambda item: -item.score))
