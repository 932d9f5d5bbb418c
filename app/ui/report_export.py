"""File ▸ Export review report: every listed image through the model once more (on the inference worker), drawn as
a small overlay and put beside its verdict, its metrics against the reference and its review
(app.runs.review_report writes the self-contained HTML file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from app.inference import pipeline
from app.inference.tuning import judge, with_score_limit
from app.io.files import encode_png
from app.io.render import blend_overlay
from app.runs.review_report import ReportItem

SIDE = 640  # the overlay is drawn at most this big; the report shrinks it further


def report_items(model, entries: list[tuple[str, str]], tuning, reviews: dict, *, references: dict,
                 min_confidence: float | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> list[ReportItem]:
    """A ReportItem per (path, rel); an image that cannot be read or run still gets its row (no picture)."""
    from app.ui.ground_truth import compare

    spec = with_score_limit(model.spec, tuning.score_limit)
    items = []
    for path, rel in entries:
        if should_stop():
            break
        try:
            image, _ = pipeline.decode(path)
            result = pipeline.run_image(model, image)
        except Exception as exc:  # the row says why; the report goes on
            items.append(ReportItem(rel, None, "", f"not processed: {str(exc).splitlines()[0]}", None,
                                    reviews.get(rel)))
            continue
        if min_confidence is not None:
            result = pipeline.relabel(result, spec=spec, min_confidence=min_confidence)
        verdict = judge(spec, result).verdict
        scored, _ = compare(path, result.mask, tuning, spec, references) if result.mask is not None else (None, None)
        metrics = {"iou": scored.metrics.iou, "dice": scored.metrics.dice} \
            if scored is not None and scored.metrics is not None else None
        items.append(ReportItem(rel, _overlay(image.display(), result.mask, spec.classes),
                                "" if verdict is None else "ok" if verdict.ok else "ng",
                                "" if verdict is None else verdict.reason, metrics, reviews.get(rel)))
    return items


def _overlay(pixels: np.ndarray, mask: np.ndarray | None, classes) -> bytes:
    scale = SIDE / max(pixels.shape[:2])
    if scale < 1:
        size = (max(1, round(pixels.shape[1] * scale)), max(1, round(pixels.shape[0] * scale)))
        pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
        mask = None if mask is None else cv2.resize(mask, size, interpolation=cv2.INTER_NEAREST)
    rgb = cv2.cvtColor(pixels, cv2.COLOR_GRAY2RGB) if pixels.ndim == 2 else pixels
    return encode_png(rgb if mask is None else blend_overlay(rgb, mask, classes))


def default_report_name(_folder: Path) -> str:
    return "seglens_review_report.html"
