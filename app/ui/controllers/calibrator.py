"""Model ▸ Calibrate limits…: the dialog's intents to the calibration worker, its answers back, and what a write
changes in the viewer.

Made on first use (`calibrator_of`, from actions.py): nothing of it, its thread or the dialog exists before the
reader asks. The calibration is app.runs.calibrate.band.calibrate (seglens-cli calibrate's) on the worker's own thread
and session; the report is the CLI's lines. Write puts the limits into the sidecar as `--write` does
(app.runs.calibrate.sidecar, atomic, with provenance), forgets a score limit the reader dragged for this model (it
would hide the calibrated one), and reloads the model: the banner, the badges, the filters and — after a scores-only
Run on all when the folder's histogram was showing — the histogram use both new limits at once."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Signal

if TYPE_CHECKING:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QWidget

    from app.ui.state.calibrate_messages import Calibrated, CalibrateFailed, CalibrateProgress, Written
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.calibrate_dialog import CalibrateDialog
    from app.ui.workers.calibrate_worker import CalibrateWorker

log = logging.getLogger(__name__)
STATUS_MS = 15_000
_FOLDERS = ("calibrate/ok", "calibrate/ng")  # QSettings keys: the folders last calibrated with


def calibrator_of(window) -> Calibrator:
    """The window's calibrator, made on first use."""
    found = window.findChild(Calibrator)
    if found is not None:
        return found
    return Calibrator(window.state, settings=window.settings, status=window.status,
                      model_path=lambda: window.model_path, device=lambda: window.device,
                      runtime=lambda: str(window.settings.value("runtime", "", str)),
                      reload=window.open_model, folder_shown=lambda: not window.panel.folder.isHidden(),
                      rescore=lambda: window.run_all(None), model_changed=window.model_changed, closing=window,
                      parent=window)


def open_calibrate_dialog(window) -> CalibrateDialog | None:
    """Model ▸ Calibrate limits…: the dialog, or None and a status line when no model is loaded."""
    return calibrator_of(window).open_dialog()


class Calibrator(QObject):
    calibrate_requested = Signal(object)  # CalibrateRequest, to the worker
    write_requested = Signal(object)  # WriteRequest
    finished = Signal(str)  # a calibration ended: "" with a result, else its one line (tests, status)
    written = Signal(str)  # a write ended: what went where, or why not

    def __init__(self, state: ViewState, *, settings: QSettings, status, model_path: Callable[[], Path | None],
                 device: Callable[[], str], runtime: Callable[[], str], reload: Callable[[], None],
                 folder_shown: Callable[[], bool], rescore: Callable[[], None], model_changed,
                 closing: QWidget | None = None, worker: CalibrateWorker | None = None,
                 parent: QObject | None = None) -> None:
        """`reload`: rebuild the model's session (its new sidecar read); `folder_shown`: the folder's histogram
        is showing; `rescore`: fill it again (a scores-only Run on all); `closing`: the window, whose close
        cancels the calibration and stops the thread."""
        super().__init__(parent)
        from app.ui.workers.calibrate_worker import CalibrateWorker
        from app.ui.workers.threads import start_worker_thread

        self._state, self._settings, self._status = state, settings, status
        self._model_path, self._device, self._runtime = model_path, device, runtime
        self._reload, self._folder_shown, self._rescore = reload, folder_shown, rescore
        self._ids = itertools.count(1)
        self._running = self._writing = 0  # the request ids going on (0: none)
        self._shown: tuple[Calibrated, Path] | None = None  # the result on screen and the model it is for
        self._calibrating: Path | None = None  # the model the calibration going on scores with
        self._rescore_after_reload = False
        self._dialog: CalibrateDialog | None = None
        self.worker = worker or CalibrateWorker()
        self.calibrate_requested.connect(self.worker.calibrate)
        self.write_requested.connect(self.worker.write)
        self.worker.progress.connect(self._on_progress)  # bound methods: run on this thread
        self.worker.calibrated.connect(self._on_calibrated)
        self.worker.written.connect(self._on_written)
        self.worker.failed.connect(self._on_failed)
        model_changed.connect(self._on_model_changed)
        self.calibrate_thread = start_worker_thread(self.worker, name="calibrate", parent=self)
        self._closing = closing
        if closing is not None:
            closing.installEventFilter(self)

    @property
    def dialog(self) -> CalibrateDialog | None:
        return self._dialog

    def open_dialog(self) -> CalibrateDialog | None:
        """Show the dialog (made once, kept with its last result while the window lives)."""
        from app.runs.calibrate.band import CalibrationRefused, refuse_unscored

        model = self._state.model
        if model is None or self._model_path() is None:
            self._status.showMessage("Calibrate limits: load a model first (an anomaly or binary segmentation "
                                     "model)", STATUS_MS)
            return None
        try:
            refuse_unscored(model.spec.output.kind, model.spec.path.name)
        except CalibrationRefused as exc:
            self._status.showMessage(f"Calibrate limits: {exc}", STATUS_MS)
            return None
        dialog = self._dialog or self._make_dialog()
        dialog.set_model(model.spec.name)
        dialog.show()
        dialog.raise_()
        return dialog

    def _make_dialog(self) -> CalibrateDialog:
        from app.ui.widgets.calibrate_dialog import CalibrateDialog

        self._dialog = dialog = CalibrateDialog(self._closing)
        dialog.calibrate_requested.connect(self.calibrate)
        dialog.cancel_requested.connect(self.cancel)
        dialog.write_requested.connect(self.write)
        dialog.save_plot_requested.connect(self.save_plot)
        dialog.rejected.connect(self.cancel)  # closed: a calibration nobody will look at stops
        ok, ng = (str(self._settings.value(key, "", str)) for key in _FOLDERS)
        dialog.set_folders(ok, ng)
        return dialog

    def calibrate(self) -> None:
        """The dialog's folders and target to the worker; a missing field or model is one line."""
        from app.errors import SegLensError
        from app.runs.calibrate.band import Target
        from app.ui.state.calibrate_messages import CalibrateRequest

        dialog, path = self._dialog, self._model_path()
        assert dialog is not None
        ok, ng = dialog.folders()
        missing = "Choose the OK folder" if not ok else "Choose the NG folder" if not ng else ""
        if missing or path is None or self._state.model is None:
            dialog.say(missing or "Load a model first", error=True)
            return
        try:
            target = Target.chosen(**dialog.target())  # type: ignore[arg-type]
        except SegLensError as exc:
            dialog.say(str(exc), error=True)
            return
        for key, folder in zip(_FOLDERS, (ok, ng), strict=True):
            self._settings.setValue(key, folder)
        self._running, self._shown, self._calibrating = next(self._ids), None, path
        dialog.show_result([], None)
        dialog.set_running(True)
        dialog.say(f"Scoring the OK and NG folders with {path.name}…")
        self.calibrate_requested.emit(CalibrateRequest(self._running, str(path), self._device(), self._runtime(),
                                                       ok, ng, target, dialog.fraction(), dialog.seed()))

    def cancel(self) -> None:
        """Stop the calibration going on after the image being scored (nothing is chosen or written)."""
        if self._running:
            self.worker.cancel(self._running)

    def _on_progress(self, progress: CalibrateProgress) -> None:
        if progress.request_id == self._running and self._dialog is not None:
            self._dialog.set_progress(progress.done, progress.total)

    def _on_calibrated(self, done: Calibrated) -> None:
        if done.request_id != self._running:
            return
        self._running, path, result = 0, self._calibrating, done.result
        self._shown = (done, path) if path is not None else None
        lines = [*result.report(), *result.notes(), *(f"error: {line}" for line in result.errors)]
        if self._dialog is not None:
            self._dialog.set_running(False)
            self._dialog.show_result(lines, done.plot)
            self._dialog.say("Not written yet: Write to sidecar puts these limits into the model's sidecar")
        self.finished.emit("")

    def _on_failed(self, failed: CalibrateFailed) -> None:
        if failed.request_id == self._writing:
            self._writing = 0
            self._say(f"Not written: {failed.message}", error=True)
            self.written.emit(failed.message)
            return
        if failed.request_id != self._running:
            return
        self._running = 0
        if self._dialog is not None:
            self._dialog.set_running(False)
        self._say(failed.message, error=not failed.cancelled)
        self.finished.emit(failed.message)

    # -- write, save -------------------------------------------------------------------------------------

    def write(self) -> None:
        """The limits shown into their model's sidecar (on the worker: the model's SHA-256 is read there)."""
        from app.ui.state.calibrate_messages import WriteRequest

        if self._shown is None or self._running or self._writing:
            return
        done, path = self._shown
        self._writing = next(self._ids)
        self._say(f"Writing the limits into the sidecar of {path.name}…")
        self.write_requested.emit(WriteRequest(self._writing, str(path), done.result))

    def _on_written(self, written: Written) -> None:
        from app.ui.state import remembered

        if written.request_id != self._writing or self._shown is None:
            return
        self._writing = 0
        path = self._shown[1]
        line = f"Written: {written.line}; the model reloaded with them"
        self._say(line)
        self._status.showMessage(line, STATUS_MS)
        if self._model_path() == path and self._state.model is not None:
            remembered.save_score_limit(self._settings, self._state.model.sha256, None)  # the calibrated limit rules
            self._rescore_after_reload = self._folder_shown()
            self._reload()
        self.written.emit(line)

    def _on_model_changed(self, _summary) -> None:
        if self._rescore_after_reload:
            self._rescore_after_reload = False
            self._rescore()  # the histogram and its counts at the new limits

    def save_plot(self, path: str) -> None:
        """The plot on screen as a PNG (app.runs.calibrate.plot.write_plot: the figure --plot writes)."""
        import numpy as np

        from app.errors import one_line
        from app.runs.calibrate.plot import write_plot

        if self._shown is None:
            return
        target = Path(path) if path.lower().endswith(".png") else Path(f"{path}.png")
        result = self._shown[0].result
        try:
            write_plot(target, np.asarray(result.ok.scores), np.asarray(result.ng.scores), result.limits,
                       title=f"{result.name}: image scores")
        except OSError as exc:
            self._say(f"{target.name}: cannot write ({one_line(exc)})", error=True)
            return
        self._say(f"Plot saved: {target.name}")

    def _say(self, line: str, *, error: bool = False) -> None:
        if self._dialog is not None:
            self._dialog.say(line, error=error)

    # -- close -----------------------------------------------------------------------------------------------

    def eventFilter(self, watched, event) -> bool:
        if watched is self._closing and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """Cancel the calibration and join the thread (the window is closing)."""
        from app.ui.workers.threads import stop_thread

        self.cancel()
        if self._dialog is not None:
            self._dialog.close()
        stop_thread(self.calibrate_thread, timeout_ms=10_000)
