"""The records between Model ▸ Calibrate limits… and its worker thread: a calibration asked for, its progress, its
result (app.runs.calibrate.band's Calibration with its plot's pixels), a write into the sidecar and what it wrote, and a
failure's one line. Each carries the request's id: an answer to an older request is ignored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.runs.calibrate.band import Calibration, Target

FOLDER_NAMES = ("OK folder", "NG folder")  # the dialog's words for the folders in a refusal (the CLI: --ok, --ng)


@dataclass(frozen=True)
class CalibrateRequest:
    """Score `ok` and `ng` through the model at `model_path` (on `device`, with the viewer's runtime options)."""

    request_id: int
    model_path: str
    device: str
    runtime: str  # "tensorrt=true;gpu_mem_limit_mb=4096", as the viewer's settings hold them
    ok: str
    ng: str
    target: Target
    fraction: float
    seed: int


@dataclass(frozen=True)
class CalibrateProgress:
    request_id: int
    done: int  # images scored (or failed) so far, of both folders
    total: int


@dataclass(frozen=True)
class Calibrated:
    """The calibration and its plot (RGB, app.runs.calibrate.plot.PLOT_HW: the figure `--plot` writes)."""

    request_id: int
    result: Calibration
    plot: np.ndarray


@dataclass(frozen=True)
class WriteRequest:
    """Write `result`'s limits, with their provenance, into the sidecar of the model at `model_path`."""

    request_id: int
    model_path: str
    result: Calibration


@dataclass(frozen=True)
class Written:
    request_id: int
    line: str  # what went where (app.runs.calibrate.sidecar.written_line)


@dataclass(frozen=True)
class CalibrateFailed:
    """A refusal, a cancel or an unexpected failure: its one line."""

    request_id: int
    message: str
    cancelled: bool = False
