"""What a labels file holds: the class names and, per image (its path relative to the folder, '/'-separated), the
instances found or drawn in it; the one error a labels file that cannot be read raises; and the image ids COCO
files give each image, derived from its relative path alone so they stay the same whatever else the folder holds."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from app.errors import SegLensError
from app.inference.model.instances import Instances


class LabelsError(SegLensError):
    """A labels file cannot be written or read: one line naming the file and the problem."""


@dataclass(frozen=True)
class LabelledImage:
    """One image's instances; `name` is its path relative to the folder, with '/' between folders; `coco_id` the
    id a COCO file gave it (None: not read from one; SegLens's own is `image_id(name)`)."""

    name: str
    instances: Instances
    coco_id: int | None = None

    @property
    def order(self) -> int:
        """Where COCOeval puts this image among the others (ascending image id)."""
        return image_id(self.name) if self.coco_id is None else self.coco_id


@dataclass(frozen=True)
class LabelSet:
    """The class names (index = `Instance.class_index`) and the images, in the order they were given."""

    names: tuple[str, ...]
    images: tuple[LabelledImage, ...]

    def by_name(self) -> dict[str, Instances]:
        """Each image's instances under its relative path."""
        return {image.name: image.instances for image in self.images}


def image_id(name: str) -> int:
    """COCO's image id for the image at relative path `name`: 53 bits of its SHA-256 (a JSON number every reader
    keeps exactly), plus one so it is never 0."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) + 1


def safe_relative(name: str) -> tuple[str, ...] | None:
    """The folders and file name of a relative '/'-separated path, or None when it is not one: empty, absolute,
    with `.` or `..`, a backslash, a NUL or another control character."""
    if not name or name.startswith("/") or "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return None
    parts = tuple(name.split("/"))
    if any(part in ("", ".", "..") for part in parts) or (len(parts[0]) > 1 and parts[0][1] == ":"):
        return None
    return parts
