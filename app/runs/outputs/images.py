"""Write result images: masks, overlays, heatmaps and scores PNGs beside each input's output stem.

Every file appears whole or not at all (app.io.files.atomic_write). The CSV report is app.runs.outputs.report, what
--resume reads back app.runs.folder.resume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import numpy as np

from app.inference.image.pipeline import Result, probability_at_image_size
from app.inference.model.instances import Instances
from app.inference.model.spec import ModelSpec
from app.io.files import atomic_write, encode_png, png_with_text
from app.io.render import blend_overlay, heatmap
from app.runs.outputs.instance_images import instance_labels, instance_overlay

SAVE_KINDS = ("mask", "overlay", "heatmap", "scores")  # per image
LABEL_KINDS = ("coco", "yolo")  # per run: an instance model's objects as labels (app.runs.folder.label_exports)


def write_result_images(result: Result, spec: ModelSpec, out_stem: Path, save: Sequence[str],
                        image: np.ndarray | None = None,
                        texts: Mapping[str, Mapping[str, str]] | None = None,
                        root: Path | None = None) -> list[Path]:
    """Write `<stem>_mask.png` (`x.png_mask.png`: app.io.discover.output_stem), `_overlay.png`, `_heatmap.png`
    and/or `_scores.png` for a segmentation result.

    The heatmap and scores show the foreground probability (binary) or the winning class's (multi-class); a
    result without scores (a label-map output) simply has neither. `texts[kind]`: PNG text items for that kind
    (the run's provenance, app.runs.outputs.provenance.RunIdentity.png_texts), inserted after IHDR. `root`: the output
    folder the stem is under (--out, a station's out): the files are written beneath it by descriptor, no folder
    on the way followed if it is a link planted or swapped in (app.guard.shared.atomic_write).
    """
    if result.instances is not None:
        return _write_instances(result.instances, spec, out_stem, save, image, texts or {}, root)
    if result.mask is None:
        return []
    texts = texts or {}

    def write(kind: str, pixels: np.ndarray) -> Path:
        data = encode_png(pixels)
        return _write(out_stem, f"_{kind}.png", png_with_text(data, dict(texts[kind])) if texts.get(kind) else data,
                      root)

    written = []
    if "mask" in save:
        written.append(write("mask", result.mask))
    if "overlay" in save and image is not None:
        written.append(write("overlay", blend_overlay(image, result.mask, spec.classes)))
    probability = probability_at_image_size(result) if {"heatmap", "scores"} & set(save) else None
    if probability is not None and "heatmap" in save:
        written.append(write("heatmap", heatmap(probability)))
    if probability is not None and "scores" in save:
        written.append(write("scores", scores_uint16(probability)))
    return written


def _write_instances(instances: Instances, spec: ModelSpec, out_stem: Path, save: Sequence[str],
                     image: np.ndarray | None, texts: Mapping[str, Mapping[str, str]], root: Path | None) -> list[Path]:
    """An instance result's `_mask.png` (class index + 1 per pixel, the better score on top) and `_overlay.png`
    (app.runs.outputs.instance_images); it has no per-pixel scores, so no heatmap or scores PNG."""
    written = []
    for kind in ("mask", "overlay"):
        if kind not in save or (kind == "overlay" and image is None):
            continue
        pixels = instance_labels(instances, classes=len(spec.classes)) if kind == "mask" else \
            instance_overlay(cast(np.ndarray, image), instances, spec.classes)
        data = encode_png(pixels)
        written.append(_write(out_stem, f"_{kind}.png", png_with_text(data, dict(texts[kind])) if texts.get(kind)
                              else data, root))
    return written


def scores_uint16(probability: np.ndarray) -> np.ndarray:
    """The `_scores.png` pixel values: round(p × 65535), p clipped to 0–1."""
    levels: np.ndarray = np.rint(np.clip(probability, 0.0, 1.0) * 65535.0).astype(np.uint16)
    return levels


def _write(out_stem: Path, suffix: str, data: bytes, root: Path | None) -> Path:
    path = out_stem.with_name(out_stem.name + suffix)
    atomic_write(path, data, root=root)
    return path
