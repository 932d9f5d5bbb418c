"""The calibration worker: Model ▸ Calibrate limits… scores the OK and NG folders on its own QThread (the worker
pattern: a parentless QObject moved onto a long-lived thread; one record in, records out with the request's id; a
failure is a `failed` record with one line, never a dead thread).

Its own thread, not the inference worker's: scoring a few hundred images takes a while, and the reader goes on
looking at pictures meanwhile (the inference worker would answer none until it ended). Its own session too, opened
here for the calibration and released after it (no memory held once it is done); the loop over the images is
app.runs.calibrate.band.calibrate's, the same one seglens-cli calibrate calls. Cancel is read between images: `cancel()`
is called from the GUI thread (a plain attribute write) and `should_stop` reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

if TYPE_CHECKING:
    from app.ui.state.calibrate_messages import CalibrateRequest, WriteRequest

log = logging.getLogger(__name__)


class CalibrateWorker(QObject):
    progress = Signal(object)  # CalibrateProgress
    calibrated = Signal(object)  # Calibrated
    written = Signal(object)  # Written
    failed = Signal(object)  # CalibrateFailed

    def __init__(self) -> None:
        super().__init__()
        self._stopped = 0  # the request id Cancel was pressed for (0: none)

    def cancel(self, request_id: int) -> None:
        """Called from the GUI thread: stop that calibration after the image being scored."""
        self._stopped = request_id

    @Slot(object)
    def calibrate(self, request: CalibrateRequest) -> None:
        self._guarded(request.request_id, lambda: self._calibrate(request))

    @Slot(object)
    def write(self, request: WriteRequest) -> None:
        self._guarded(request.request_id, lambda: self._write(request))

    def _calibrate(self, request: CalibrateRequest) -> None:
        import numpy as np

        from app.inference.model.builder import load_spec
        from app.inference.model.runtime_options import parse_runtime_arguments
        from app.inference.runtime.session import open_session
        from app.runs.calibrate.band import calibrate, refuse_unscored
        from app.runs.calibrate.plot import plot_image
        from app.ui.state.calibrate_messages import FOLDER_NAMES, Calibrated, CalibrateProgress

        rid = request.request_id
        spec = load_spec(request.model_path)
        refuse_unscored(spec.output.kind, spec.path.name)  # before a session is opened for nothing
        options = parse_runtime_arguments([p for p in request.runtime.split(";") if p.strip()])
        model = open_session(spec, request.device, runtime=options)

        def scored(done: int, total: int) -> None:
            self.progress.emit(CalibrateProgress(rid, done, total))

        result = calibrate(model, Path(request.ok), Path(request.ng), target=request.target,
                           fraction=request.fraction, seed=request.seed, names=FOLDER_NAMES, scored=scored,
                           should_stop=lambda: self._stopped == rid)
        del model  # released now, not when the next calibration replaces it
        plot = plot_image(np.asarray(result.ok.scores), np.asarray(result.ng.scores), result.limits,
                          title=f"{spec.name}: image scores")
        self.calibrated.emit(Calibrated(rid, result, plot))

    def _write(self, request: WriteRequest) -> None:
        from app.inference.model.builder import load_spec
        from app.runs.calibrate.sidecar import provenance, write_limits, written_line
        from app.ui.state.calibrate_messages import Written

        spec = load_spec(request.model_path)
        path = write_limits(spec, request.result.limits, provenance(request.result, spec.path))
        self.written.emit(Written(request.request_id, written_line(Path(path.name), request.result.limits)))

    def _guarded(self, request_id: int, job: Callable[[], None]) -> None:
        """Run `job`; a refusal, a cancel or any failure becomes one `failed` line (the thread lives on)."""
        from app.errors import SegLensError, one_line, unexpected_error_line
        from app.logs import log_exception
        from app.runs.calibrate.band import CalibrationCancelled
        from app.ui.state.calibrate_messages import CalibrateFailed

        try:
            job()
        except CalibrationCancelled as exc:
            self.failed.emit(CalibrateFailed(request_id, str(exc), cancelled=True))
        except (SegLensError, ValueError) as exc:  # a refusal's or a bad runtime option's one line
            self.failed.emit(CalibrateFailed(request_id, one_line(exc, most=400)))
        except Exception as exc:  # anything a library raises: one line, the traceback in the log
            log_exception(log, logging.ERROR, "calibration failed", exc)
            self.failed.emit(CalibrateFailed(request_id, unexpected_error_line("calibration", exc)))
