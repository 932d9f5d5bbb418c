"""Run on all: every listed image through the worker's batch run and the CLI's writer, with progress in the status
bar and the file list, and Cancel after the current image."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from app.ui.controllers.tuner import Tuner
    from app.ui.state.messages import BatchFinished, BatchProgress, Tuning
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.status import StatusBar
    from app.ui.workers.worker import InferenceWorker

log = logging.getLogger(__name__)


class RunOnAll(QObject):
    requested = Signal(object)  # messages.RunAllRequest, to the worker's run_all
    finished = Signal(object, str)  # RunSummary, report path or error
    refused = Signal(str)  # why the chosen output folder cannot take the outputs (nothing was started)

    def __init__(self, state: ViewState, *, files: FileList, status: StatusBar, worker: InferenceWorker,
                 tuner: Tuner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._tuner = tuner
        self._tuning: Tuning | None = None  # the Tuning the run was started with
        self._state = state
        self._files = files
        self._status = status
        self._worker = worker
        self.requested.connect(worker.run_all)
        status.cancel_requested.connect(self.cancel)
        worker.batch_progress.connect(self.on_progress)  # bound methods: run on this thread, not the worker's
        worker.batch_finished.connect(self.on_finished)

    def start(self, out_dir: str | Path | None, save: tuple[str, ...] = ("mask", "overlay"), *,
              volumes: dict | None = None) -> None:
        """Run on all, exporting into `out_dir` (None: the folder's scores and verdicts only, nothing written)."""
        from app.runs.outputs.safety import output_folder_problem

        inputs = self._files.inputs()
        if not inputs or self._state.model is None:
            self._status.showMessage("Nothing to run: open images and wait for the model", 8000)
            return
        refused = output_folder_problem(Path(out_dir), inputs, inside_ok=False) if out_dir else None
        if refused:
            log.warning("run on all refused: the output folder cannot take the outputs")  # the why names folders
            log.debug("run on all refused: %s", refused)
            self._status.showMessage(f"Run on all not started: {refused}", 20000)
            self.refused.emit(refused)
            return
        self._status.start_run(len(inputs))
        self._tuning = self._state.tuning  # the reader's threshold and score limit, as --threshold would
        from app.runs.folder.volumes import VolumeOptions
        from app.ui.state.messages import RunAllRequest

        self.requested.emit(RunAllRequest(tuple(inputs), str(out_dir) if out_dir else "",
                                          tuple(save) if out_dir else (), self._tuning,
                                          VolumeOptions(**volumes) if volumes else None))

    def cancel(self) -> None:
        self._worker.cancel_batch()  # read by the worker between images: no signal, it is busy running
        self._status.showMessage("Cancelling after the current image…", 5000)

    def on_progress(self, progress: BatchProgress) -> None:
        outcome, summary, judgement = progress.outcome, progress.summary, progress.judgement
        path = str(outcome.input.path)
        self._files.set_status(path, "done" if outcome.error is None else "error", outcome.error or "")
        if judgement is not None:
            self._tuner.judged_in_run(path, judgement, self._tuning.threshold if self._tuning else None)
        scored = outcome.scored
        if scored is not None and scored.metrics is not None:
            self._state.ious[path] = scored.metrics.iou
        self._status.run_progress(summary.ok + summary.failed)

    def on_finished(self, finished: BatchFinished) -> None:
        summary, report = finished.summary, finished.report_path or finished.error
        self._status.end_run()
        state = "cancelled" if summary.cancelled else "done"
        written = bool(finished.report_path)
        where = report or "scores only, nothing written"
        self._status.showMessage(f"Run on all {state}: {summary.ok} ok, {summary.failed} failed — {where}", 20000,
                                 folder=Path(report).parent if written else None)
        log.info("run on all %s: %s ok, %s failed%s", state, summary.ok, summary.failed,
                 ", report written" if written else "")  # its path (or why not) names folders: at DEBUG
        log.debug("run on all report: %s", report)
        self._tuner.show_folder()
        self.finished.emit(summary, report)
