"""What the viewer remembers per model between runs (QSettings): the reader's pixel threshold and verdict score
limit, keyed by the model's SHA-256. No widget here: the Tuner (app.ui.controllers.tuner) reads and writes it."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from PySide6.QtCore import QSettings

log = logging.getLogger(__name__)

# The reader's decision settings are kept per model *content* (its SHA-256, hashed on the worker when the model
# loads), never per path: a retrained model copied over the old file starts at its own values, the same model
# moved or renamed keeps them, and the key holds no file name (a path is no QSettings key, nor private enough).
_THRESHOLDS, _SCORE_LIMITS = "thresholds", "score_limits"


def threshold(settings: QSettings, model_sha256: str) -> float | None:
    """The pixel threshold (or minimum confidence) the reader last set for this model; None: the model's own."""
    return _remembered(settings, _THRESHOLDS, model_sha256, "threshold", in_range=True)


def save_threshold(settings: QSettings, model_sha256: str, value: float | None) -> None:
    """Remember the reader's threshold for this model; None (Reset) forgets it."""
    _remember(settings, _THRESHOLDS, model_sha256, value)


def score_limit(settings: QSettings, model_sha256: str) -> float | None:
    """The verdict's image-score limit the reader last dragged to for this model; None: the model's own."""
    return _remembered(settings, _SCORE_LIMITS, model_sha256, "score limit", in_range=False)


def save_score_limit(settings: QSettings, model_sha256: str, value: float | None) -> None:
    """Remember the reader's score limit for this model; None (Reset) forgets it."""
    _remember(settings, _SCORE_LIMITS, model_sha256, value)


def _remembered(settings: QSettings, group: str, model_sha256: str, what: str, *, in_range: bool) -> float | None:
    """A stored value, or None when there is none — or it is no finite number (in 0–1 for a threshold): a settings
    file edited by hand or by an older version must not set a NaN threshold, which would pass every pixel."""
    if not model_sha256:
        return None
    stored = cast(str, settings.value(f"{group}/{model_sha256}", "", str))
    if not stored:
        return None
    try:
        value = float(stored)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (in_range and not 0.0 <= value <= 1.0):
        log.warning("the remembered %s %r for model sha256 %s is ignored: not a %s", what, stored[:40],
                    model_sha256[:12], "number from 0 to 1" if in_range else "finite number")
        return None
    return value


def _remember(settings: QSettings, group: str, model_sha256: str, value: float | None) -> None:
    if not model_sha256:  # the model file could not be hashed: nothing to key it by
        return
    if value is None or not math.isfinite(value):
        settings.remove(f"{group}/{model_sha256}")
    else:
        settings.setValue(f"{group}/{model_sha256}", f"{value:.10g}")  # a score may be 1e-5 or 1e4
