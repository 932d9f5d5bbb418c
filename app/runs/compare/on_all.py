"""The viewer's Compare on all: both models on every listed input, for the file list's agreement column and its sort
(a volume measured over every voxel, as `seglens-cli compare`: app.runs.compare.agreement). An input that cannot be
read is skipped and counted; one a model failed on is counted with its line; Cancel stops between images and slices.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.errors import ImageError, SegLensError, error_line, unexpected_error_line
from app.inference.image.pipeline import Stopped
from app.logs import file_ref, log_exception, private
from app.runs.compare.agreement import image_agreement, volume_agreement
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.model.session import ModelSession
    from app.io.discover import InputFile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompareOutcome:
    """How Compare on all ended: `completed` (not cancelled), and its one-line summary or why it stopped."""

    completed: bool
    message: str


def compare_all(model_a: ModelSession, model_b: ModelSession, inputs: Sequence[InputFile], *,
                measured: Callable[[InputFile, float, int], None],
                should_stop: Callable[[], bool] = lambda: False) -> CompareOutcome:
    """B's mean IoU against A on each input, said through `measured(input, iou, done)` as it goes."""
    failed, unreadable, first = 0, 0, ""
    for done, item in enumerate(inputs, 1):
        cancelled = CompareOutcome(False, f"cancelled after {done - 1} of {counted(len(inputs), 'image')}")
        if should_stop():
            return cancelled
        try:
            agreement = volume_agreement(model_a, model_b, item.volume, should_stop=should_stop) \
                if item.volume is not None else image_agreement(model_a, model_b, item)
        except Stopped:  # Cancel inside a volume
            return cancelled
        except Exception as exc:
            line = failure_line(item, exc)
            private(log, logging.WARNING, item.path, f"compare: {line}")
            if isinstance(exc, ImageError):  # the input itself: not something either model did
                unreadable += 1
            else:  # a model failed on it (B's NaN output): said with its line, not as "could not be read"
                failed, first = failed + 1, first or line
            continue
        measured(item, agreement.metrics.iou, done)
    return CompareOutcome(True, compare_summary(len(inputs), unreadable, failed, first))


def failure_line(item: InputFile, exc: Exception) -> str:
    """The input's one line; an unexpected error also goes to the log in full (its path only at DEBUG)."""
    if isinstance(exc, SegLensError):
        return error_line(item.path, exc)
    log_exception(log, logging.ERROR, f"comparing {file_ref(item.path)} failed", exc)
    log.debug("%s is %s", file_ref(item.path), item.path)
    return unexpected_error_line(item.path, exc)


def compare_summary(total: int, unreadable: int, failed: int, first: str) -> str:
    """`3 images compared, 1 could not be read, 1 failed: <the first failure's line>` (Compare all's last word)."""
    text = f"{counted(total - unreadable - failed, 'image')} compared"
    if unreadable:
        text += f", {unreadable} could not be read"
    if failed:
        text += f", {failed} failed (the first: {first})" if failed > 1 else f", {failed} failed: {first}"
    return text
