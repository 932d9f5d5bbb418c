"""The HTML review report of the listed images: the request is built here from the review log and the reader's
tuning, written on the worker (workers/worker_batch.py; its rows are app.runs.review.items'), and its outcome said
in the status bar."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from app.spelling import counted

if TYPE_CHECKING:
    from app.ui.controllers.reviewer import Reviewer
    from app.ui.state.messages import ReportFinished
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.status import StatusBar
    from app.ui.workers.worker import InferenceWorker


class ReportExporter(QObject):
    report_requested = Signal(object)  # a ReportRequest, to the worker's export_report
    report_finished = Signal(bool, str)  # written?, the review report's path or the error

    def __init__(self, state: ViewState, *, reviewer: Reviewer, status: StatusBar, worker: InferenceWorker,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._reviewer = reviewer
        self._status = status
        self.report_requested.connect(worker.export_report)
        worker.report_finished.connect(self._on_report)  # a bound method: run on this thread, not the worker's

    def export(self, path: str | Path | None = None, *, anonymize: bool | None = None) -> None:
        """Write the review report of the listed images (default: beside the review log); report_finished.
        `anonymize`: rows by their pseudonyms, no patient or folder name (None: on when a volume is listed)."""
        log_ = self._reviewer.log
        if log_ is None:
            self._status.showMessage("No review log: open images and wait for the model", 8000)
            return
        from app.runs.review.items import REPORT_NAME

        target = Path(path) if path else log_.folder / REPORT_NAME
        request = self._reviewer.report_request(target, self._state.tuning, anonymize=anonymize)
        if request is not None:
            de_identified = ", de-identified" if request.anonymize else ""
            self._status.showMessage(
                f"Writing the review report of {counted(len(request.entries), 'image')}{de_identified}…")
            self.report_requested.emit(request)

    def _on_report(self, finished: ReportFinished) -> None:
        ok, message = finished.written, finished.report_path or finished.error
        self._status.showMessage(f"Review report written: {message}" if ok else f"Review report not written: "
                                 f"{message}", 20000, folder=Path(message).parent if ok else None)
        self.report_finished.emit(ok, message)
