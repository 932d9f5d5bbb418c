"""A trained-model folder dropped on the window (or opened with the pictures): an nnU-Net v2 trained-model folder is
imported into SegLens's models folder in the user's data on the import worker's thread, with what it is doing in
the status bar, then opened as the model — as if the reader had opened the ONNX file it became. Nothing is asked:
every fold with checkpoint_final.pth is imported (app.runs.imports.nnunet.layout.default_folds), and a folder
imported before (the same files by their SHA-256) opens the model kept then. A refusal is the importer's one line in
the status bar; the model shown stays.

Made on first use (`importer_of`): nothing of it or its thread exists before a folder is dropped."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Signal

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from app.ui.state.import_messages import ImportDone, ImportFailed, ImportStep
    from app.ui.widgets.status import StatusBar

log = logging.getLogger(__name__)
STATUS_MS = 15_000


def importer_of(window) -> ModelImporter:
    """The window's importer, made on first use."""
    found = window.findChild(ModelImporter)
    if found is not None:
        return found
    return ModelImporter(status=window.status, open_model=window.open_model, closing=window, parent=window)


class ModelImporter(QObject):
    import_requested = Signal(object)  # ImportRequest, to the worker
    finished = Signal(str)  # an import ended: "" with its model handed to the loader, else its one line

    def __init__(self, *, status: StatusBar, open_model: Callable[[Path], None], closing: QWidget | None = None,
                 parent: QObject | None = None) -> None:
        """`open_model(path)`: load the model the import kept; `closing`: the window, whose close stops the
        thread (after the import going on: a half-made import is never left)."""
        super().__init__(parent)
        from app.ui.workers.import_worker import ImportWorker
        from app.ui.workers.threads import start_worker_thread

        self._status, self._open_model = status, open_model
        self._ids = itertools.count(1)
        self._running = 0  # the request going on (0: none); a newer drop's answer is the one that counts
        self._folder = ""
        self.worker = ImportWorker()
        self.import_requested.connect(self.worker.import_folder)
        self.worker.step.connect(self._on_step)  # bound methods: run on this thread
        self.worker.done.connect(self._on_done)
        self.worker.failed.connect(self._on_failed)
        self.import_thread = start_worker_thread(self.worker, name="import", parent=self)
        self._closing = closing
        if closing is not None:
            closing.installEventFilter(self)

    def start(self, folder: Path) -> None:
        """Import `folder` (an nnU-Net trained-model folder) on the worker, then open its model."""
        from app.ui.state.import_messages import ImportRequest

        self._running, self._folder = next(self._ids), folder.name
        self._status.showMessage(f"Importing the nnU-Net model {folder.name}…")
        self.import_requested.emit(ImportRequest(self._running, str(folder)))

    def _on_step(self, step: ImportStep) -> None:
        if step.request_id == self._running:
            self._status.showMessage(f"Importing the nnU-Net model: {step.line}…")

    def _on_done(self, done: ImportDone) -> None:
        if done.request_id != self._running:
            return
        self._running = 0
        model = Path(done.model)
        self._status.showMessage(done_line(done, self._folder), STATUS_MS, folder=model.parent)
        self._open_model(model)
        self.finished.emit("")

    def _on_failed(self, failed: ImportFailed) -> None:
        if failed.request_id != self._running:
            return
        self._running = 0
        self._status.showMessage(f"Not imported: {failed.message}", STATUS_MS)
        self.finished.emit(failed.message)

    # -- close -----------------------------------------------------------------------------------------------

    def eventFilter(self, watched, event) -> bool:
        if watched is self._closing and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """Join the thread (the window is closing): the import going on finishes first, whole."""
        from app.ui.workers.threads import stop_thread

        self._running = 0
        stop_thread(self.import_thread, timeout_ms=10_000)


def done_line(done: ImportDone, folder: str) -> str:
    """The status line once the model is kept: imported now (with how many notes on what is not yet exact) or
    found from an earlier import."""
    from app.spelling import counted

    folds = f"fold {done.folds[0]}" if len(done.folds) == 1 else f"folds {', '.join(done.folds)}"
    if done.reused:
        return f"{folder}: imported before ({folds}); opening {Path(done.model).name}"
    notes = f"; {counted(done.gaps, 'note')} on what is not yet exact in its sidecar" if done.gaps else ""
    return f"{folder}: imported ({folds}) as {Path(done.model).name}{notes}"
