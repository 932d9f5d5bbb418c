"""seglens-cli calibrate --plot: a PNG of the score distributions (OK and NG histograms, the limits drawn) and the
ROC, drawn with OpenCV (no plotting library: matplotlib is not a dependency)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from app.io.files import atomic_write, encode_png
from app.runs.calibrate.band import Limits

PLOT_HW = (480, 1120)  # the PNG's height and width
_OK, _NG, _REVIEW, _FAIL = (46, 160, 67), (214, 39, 40), (240, 150, 0), (150, 0, 0)  # RGB
_INK, _GRID, _BINS = (40, 40, 40), (225, 225, 225), 40
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def write_plot(path: Path, ok: np.ndarray, ng: np.ndarray, limits: Limits, *, title: str) -> None:
    """The histograms (left) and the ROC (right) of all the scores, written to `path` atomically."""
    atomic_write(path, encode_png(plot_image(ok, ng, limits, title=title)))


def plot_image(ok: np.ndarray, ng: np.ndarray, limits: Limits, *, title: str) -> np.ndarray:
    """The plot write_plot writes, as an RGB array of PLOT_HW (the viewer shows it as it is)."""
    canvas = np.full((*PLOT_HW, 3), 255, np.uint8)
    _histograms(canvas, ok, ng, limits, (40, 60, 660, 400))
    _roc(canvas, ok, ng, limits, (740, 60, 1080, 400))
    _text(canvas, title[:110], (40, 30), 0.55)
    return canvas


def _histograms(canvas: np.ndarray, ok: np.ndarray, ng: np.ndarray, limits: Limits,
                box: tuple[int, int, int, int]) -> None:
    x0, y0, x1, y1 = box
    everything = np.concatenate([ok, ng])
    low, high = float(everything.min()), float(everything.max())
    marks = [limits.fail, *([limits.review] if limits.review is not None else [])]
    low, high = min(low, *marks), max(high, *marks)
    high = high if high > low else low + 1.0
    edges = np.linspace(low, high, _BINS + 1)
    counts = [np.histogram(values, edges)[0] for values in (ok, ng)]
    tallest = max(1, max(int(c.max()) for c in counts))
    _frame(canvas, box)
    width = (x1 - x0) / _BINS
    for values, color, offset in ((counts[0], _OK, 0.0), (counts[1], _NG, 0.5)):
        for i, count in enumerate(values):
            if count:
                left = int(x0 + (i + offset) * width)
                top = int(y1 - count / tallest * (y1 - y0 - 10))
                cv2.rectangle(canvas, (left, top), (int(left + width / 2) - 1, y1 - 1), color, -1)

    def at(score: float) -> int:
        return round(x0 + (score - low) / (high - low) * (x1 - x0))

    if limits.review is not None:
        cv2.line(canvas, (at(limits.review), y0), (at(limits.review), y1), _REVIEW, 2)
        _text(canvas, f"review {limits.review:.4g}", (at(limits.review) + 4, y0 + 16), 0.45, _REVIEW)
    cv2.line(canvas, (at(limits.fail), y0), (at(limits.fail), y1), _FAIL, 2)
    _text(canvas, f"fail {limits.fail:.4g}", (at(limits.fail) + 4, y0 + 34), 0.45, _FAIL)
    _text(canvas, f"{low:.4g}", (x0, y1 + 20), 0.45)
    _text(canvas, f"{high:.4g}", (x1 - 60, y1 + 20), 0.45)
    _text(canvas, "image score", ((x0 + x1) // 2 - 50, y1 + 40), 0.5)
    _text(canvas, f"OK ({len(ok)})", (x0 + 10, y0 + 16), 0.5, _OK)
    _text(canvas, f"NG ({len(ng)})", (x0 + 10, y0 + 36), 0.5, _NG)


def _roc(canvas: np.ndarray, ok: np.ndarray, ng: np.ndarray, limits: Limits, box: tuple[int, int, int, int]) -> None:
    """TPR (NG above a limit) against FPR (OK above it) over every limit; the chosen limits as dots."""
    x0, y0, x1, y1 = box
    _frame(canvas, box)
    cv2.line(canvas, (x0, y1), (x1, y0), _GRID, 1)
    limits_all = np.concatenate([[np.inf], np.sort(np.concatenate([ok, ng]))[::-1], [-np.inf]])
    points = [(float(np.mean(ok > t)), float(np.mean(ng > t))) for t in limits_all]

    def at(fpr: float, tpr: float) -> tuple[int, int]:
        return round(x0 + fpr * (x1 - x0)), round(y1 - tpr * (y1 - y0))

    cv2.polylines(canvas, [np.array([at(*p) for p in points], np.int32)], False, _INK, 2)
    for limit, color in ((limits.review, _REVIEW), (limits.fail, _FAIL)):
        if limit is not None:
            cv2.circle(canvas, at(float(np.mean(ok > limit)), float(np.mean(ng > limit))), 6, color, -1)
    _text(canvas, "ROC", (x0, y0 - 10), 0.55)  # above the box: inside, the curve runs through its corner
    _text(canvas, "FPR (OK called NG)", (x0 + 80, y1 + 40), 0.45)
    _text(canvas, "0", (x0 - 14, y1 + 16), 0.45)
    _text(canvas, "1", (x1 - 4, y1 + 20), 0.45)
    _text(canvas, "TPR", (x0 - 36, y0 + 12), 0.45)


def _frame(canvas: np.ndarray, box: tuple[int, int, int, int]) -> None:
    cv2.rectangle(canvas, box[:2], box[2:], _INK, 1)


def _text(canvas: np.ndarray, text: str, origin: tuple[int, int], scale: float,
          color: tuple[int, int, int] = _INK) -> None:
    cv2.putText(canvas, text.encode("ascii", "replace").decode(), origin, _FONT, scale, color, 1, cv2.LINE_AA)
