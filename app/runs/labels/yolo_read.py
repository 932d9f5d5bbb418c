"""YOLO txt labels, read back as a reference: each label file and the data.yaml are someone else's files, read
through the reading gates (a size limit, regular files only; data.yaml through the one YAML loader), every line
checked (a class of the names, finite numbers inside [0, 1], at most MAX_INSTANCES lines) and each refusal one line
naming the file and the line (`LabelsError`).

A line of five numbers is a box, of nine an oriented box when the set is one (`obb`), else a polygon (filled as
Ultralytics fills it: the pixels whose centre it holds). YOLO txt has no score: each instance scores 1. An image
with no label file has no instances (Ultralytics' background image).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from app.guard.names import PathEscape, join_under
from app.guard.untrusted import read_untrusted
from app.guard.yaml_load import YAMLRefused, read_yaml
from app.inference.model.instances import Instance, Instances
from app.runs.labels import checks, polygons
from app.runs.labels.checks import Bad
from app.runs.labels.records import LabelledImage, LabelsError, LabelSet
from app.runs.labels.yolo import LABELS, label_parts

LABEL_FILE_LIMIT = 16 << 20
MAX_NAMES = 100_000


def read_data_yaml(path: Path, *, root: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """The class names of a data.yaml (`names` as a list, or a mapping from 0, 1, … to names)."""
    try:
        document = read_yaml(path, what="data.yaml", root=root)
    except YAMLRefused as exc:
        raise LabelsError(str(exc)) from None
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read the data.yaml ({exc.strerror or exc})") from None
    try:
        return _names(document.get("names") if isinstance(document, dict) else None)
    except Bad as exc:
        raise LabelsError(f"{path}: {exc}") from None


def _names(value: object) -> tuple[str, ...]:
    if isinstance(value, dict):
        if sorted(value) != list(range(len(value))) or any(isinstance(key, bool) for key in value):
            raise Bad("'names' is not numbered 0, 1, 2, …")
        value = [value[index] for index in range(len(value))]
    if not isinstance(value, list) or not value or len(value) > MAX_NAMES:
        raise Bad(f"'names' is not a list of 1 to {MAX_NAMES:,} class names")
    return tuple(checks.text(name, f"class {index}'s name") for index, name in enumerate(value))


def read_yolo_folder(folder: Path, sizes: Mapping[str, tuple[int, int]], names: tuple[str, ...], *,
                     obb: bool = False) -> LabelSet:
    """The instances of each image of `sizes` (its relative path → (h, w)) from `folder/labels/`, read with `folder`
    as the root no link may lead out of."""
    images = []
    for name, image_hw in sizes.items():
        path = label_path(folder, name)
        found = read_yolo_labels(path, image_hw=image_hw, names=names, obb=obb, root=folder) \
            if os.path.lexists(path) else Instances((), image_hw)
        images.append(LabelledImage(name, found))
    return LabelSet(names, tuple(images))


def label_path(folder: Path, name: str) -> Path:
    """The label file of the image at relative path `name`, proven to lie under `folder/labels/` (LabelsError for a
    name that is not a relative path inside the folder, or a link on the way out of it)."""
    try:
        return join_under(folder, LABELS, *label_parts(name))
    except PathEscape as exc:
        raise LabelsError(f"{folder}: {exc}") from None


def read_yolo_labels(path: Path, *, image_hw: tuple[int, int], names: tuple[str, ...], obb: bool = False,
                     root: str | os.PathLike[str] | None = None) -> Instances:
    """One image's label file as its instances, in pixels of an image of `image_hw` (h, w)."""
    try:
        text = read_untrusted(path, limit=LABEL_FILE_LIMIT, root=root).decode("utf-8-sig")
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read the label file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise LabelsError(f"{path}: not UTF-8 text") from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) > checks.MAX_INSTANCES:
        raise LabelsError(f"{path}: {len(lines):,} instances, more than {checks.MAX_INSTANCES:,}")
    try:
        checks.image_size(image_hw[1], image_hw[0])
        found, pixels = [], 0
        for number, line in lines:
            found.append(_instance(line, number, image_hw, names, obb))
            pixels = checks.mask_pixels(pixels, found[-1], f"line {number}: the image")
    except Bad as exc:
        raise LabelsError(f"{path}: {exc}") from None
    return Instances(tuple(found), image_hw)


def _instance(line: str, number: int, image_hw: tuple[int, int], names: tuple[str, ...], obb: bool) -> Instance:
    words = line.split()
    if len(words) > checks.MAX_POINTS:
        raise Bad(f"line {number} holds {len(words):,} numbers")
    class_index = _class(words[0], number, names)
    values = [_normalised(word, number) for word in words[1:]]
    h, w = image_hw
    if len(values) == 4:
        cx, cy, bw, bh = values
        box = ((cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h)
        return Instance(class_index, names[class_index], 1.0, box)
    if len(values) < 6 or len(values) % 2:
        raise Bad(f"line {number} is neither a box (4 numbers) nor a polygon (3 or more x y points)")
    points = [v * (w if i % 2 == 0 else h) for i, v in enumerate(values)]
    if obb and len(points) == 8:
        return _oriented(class_index, names[class_index], points)
    return _polygon(class_index, names[class_index], points, image_hw)


def _class(word: str, number: int, names: tuple[str, ...]) -> int:
    try:
        value = float(word)
    except ValueError:
        raise Bad(f"line {number}: the class {word[:20]!r} is not a number") from None
    if not value.is_integer() or not 0 <= value < len(names):
        raise Bad(f"line {number}: class {word[:20]} is not one of the {len(names)} classes")
    return int(value)


def _normalised(word: str, number: int) -> float:
    try:
        value = float(word)
    except ValueError:
        raise Bad(f"line {number}: {word[:20]!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise Bad(f"line {number}: {word[:20]} is not a normalised coordinate (0 to 1)")
    return value


def _oriented(class_index: int, name: str, points: list[float]) -> Instance:
    p = np.asarray(points, dtype=np.float64).reshape(4, 2)
    centre = p.mean(axis=0)
    across, up = (p[0] - p[3]) / 2, (p[0] - p[1]) / 2
    width, height = 2 * float(np.hypot(*across)), 2 * float(np.hypot(*up))
    angle = math.atan2(float(across[1]), float(across[0]))
    box = (float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max()))
    rotated = (float(centre[0]), float(centre[1]), width, height, angle)
    return Instance(class_index, name, 1.0, box, angle=angle, rotated=rotated)


def _polygon(class_index: int, name: str, points: list[float], image_hw: tuple[int, int]) -> Instance:
    cropped = polygons.fill_cropped([points], image_hw)
    if cropped is None:  # a polygon holding no pixel centre: its bounds as the box, no mask
        xs, ys = points[0::2], points[1::2]
        return Instance(class_index, name, 1.0, (min(xs), min(ys), max(xs), max(ys)))
    mask, (x0, y0, x1, y1) = cropped
    return Instance(class_index, name, 1.0, (float(x0), float(y0), float(x1), float(y1)), mask=mask,
                    mask_box=(x0, y0, x1, y1))
