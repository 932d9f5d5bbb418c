"""Model B: a second model on the same worker and the same pictures (the decision panel shows where the two
disagree), and Compare on all, which measures both on every listed image and volume for Sort by agreement."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.ui.state.messages import AgreementMeasured, CompareFinished, ModelBFailed
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.decision import DecisionControls
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.status import StatusBar
    from app.ui.workers.worker import InferenceWorker


class Comparer(QObject):
    model_b_requested = Signal(object)  # messages.ModelBRequest, to the worker's load_model_b
    model_b_changed = Signal(object)  # ModelSummary of model B, None when comparing ended
    model_b_failed = Signal(str)
    compare_all_requested = Signal(object)  # messages.CompareAllRequest, to the worker's compare_all
    compare_finished = Signal(bool, str)  # completed?, a one-line summary or why it stopped

    def __init__(self, state: ViewState, *, files: FileList, status: StatusBar, decision: DecisionControls,
                 worker: InferenceWorker, refresh: Callable[[], None], parent: QObject | None = None) -> None:
        """`refresh`: show the current picture again (with or without model B)."""
        super().__init__(parent)
        self._state = state
        self._files = files
        self._status = status
        self._decision = decision
        self._refresh = refresh
        # bound methods only for what comes back: a lambda would run on the worker's thread, not on this one
        self.model_b_requested.connect(worker.load_model_b)
        self.compare_all_requested.connect(worker.compare_all)
        worker.model_b_ready.connect(self._on_model_b)
        worker.model_b_failed.connect(self._on_model_b_failed)
        worker.agreement_ready.connect(self._on_agreement)
        worker.compare_finished.connect(self._on_compared)

    def open(self, path: str | Path | None, *, device: str, runtime: str) -> None:
        """Compare with the model at `path` on `device` (None: stop comparing)."""
        if path:
            self._status.showMessage(f"Loading {Path(path).name} to compare with…")
        from app.ui.state.messages import ModelBRequest

        self.model_b_requested.emit(ModelBRequest(str(path) if path else "", device, runtime))

    def compare_all(self) -> None:
        """Both models on every listed image and volume (View ▸ Sort by agreement then covers the whole folder)."""
        from app.ui.state.messages import CompareAllRequest, ListedInput

        paths = self._files.paths()
        if paths:
            self._status.start_run(len(paths))
            self.compare_all_requested.emit(CompareAllRequest(tuple(
                ListedInput(p, self._files.root_and_rel(p)[1], self._files.volume(p)) for p in paths)))

    def _on_model_b(self, summary) -> None:
        self._decision.set_model_b(summary.spec.path.name if summary else None)
        self._state.invalidate_views()  # every picture again, with (or without) model B
        if summary is not None:
            info = summary.info
            where = info.provider_label + (f" (fell back: {info.fallback_reason})" if info.fallback_warns else "")
            self._status.showMessage(f"Comparing with {summary.spec.path.name} on {where}", 15000)
        self.model_b_changed.emit(summary)
        self._refresh()

    def _on_model_b_failed(self, failed: ModelBFailed) -> None:
        message = failed.message
        self._status.showMessage(f"Not comparing: {message}", 20000)
        self.model_b_failed.emit(message)

    def _on_agreement(self, measured: AgreementMeasured) -> None:
        self._state.agreements[measured.path] = measured.iou
        self._status.run_progress(measured.done)

    def _on_compared(self, finished: CompareFinished) -> None:
        completed, message = finished.completed, finished.message
        self._status.end_run()
        self._status.showMessage(f"Compare on all: {message}", 15000)
        self.compare_finished.emit(completed, message)
