"""How a YOLO head's predictions are kept: the confidence limit, the NMS IoU, how many at most, NMS across classes or
per class, and the classes to keep — Ultralytics' predictor's defaults (conf 0.25, iou 0.7, max_det 300, per
class, all classes), overridden by the sidecar's `detect:` section (app.inference.model.sidecar).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import SidecarError


@dataclass(frozen=True)
class YoloOptions:
    """Ultralytics' predict arguments of the same names; `classes` the class indices kept (None: all)."""

    conf: float = 0.25
    iou: float = 0.7
    max_det: int = 300
    agnostic: bool = False
    classes: tuple[int, ...] | None = None


SIDECAR_KEYS = {"conf": "detect.conf", "iou": "detect.iou", "max_det": "detect.max_det",
                "agnostic": "detect.agnostic"}


def options_from_sidecar(values: Mapping[str, Any], names: Sequence[str], *, sidecar: Path | None = None,
                         ) -> tuple[YoloOptions, dict[str, str]]:
    """The options with the sidecar's `detect.*` values (checked by the sidecar's parser) over the defaults, and
    each option's source ("sidecar" | "default"). `detect.classes` names or indexes the model's classes; one that
    is not the model's is a SidecarError naming the file and the class."""
    chosen: dict[str, Any] = {}
    sources = {key: "default" for key in (*SIDECAR_KEYS, "classes")}
    for key, sidecar_key in SIDECAR_KEYS.items():
        if sidecar_key in values:
            chosen[key], sources[key] = values[sidecar_key], "sidecar"
    if "detect.classes" in values:
        chosen["classes"] = _class_indices(values["detect.classes"], names, sidecar)
        sources["classes"] = "sidecar"
    return YoloOptions(**chosen), sources


def _class_indices(wanted: Sequence[str | int], names: Sequence[str], sidecar: Path | None) -> tuple[int, ...]:
    indices: list[int] = []
    for item in wanted:
        if isinstance(item, int) and 0 <= item < len(names):
            indices.append(item)
        elif isinstance(item, str) and item in names:
            indices.append(list(names).index(item))
        else:
            where = f"{sidecar}: " if sidecar is not None else ""
            raise SidecarError(f"{where}'detect.classes' names {item!r}, which is not one of the model's "
                               f"{len(names)} classes ({', '.join(names[:8])}{', ...' if len(names) > 8 else ''})")
    return tuple(sorted(set(indices)))
