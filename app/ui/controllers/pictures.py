"""The pictures: what was opened goes into the file list, the current one is shown from the cache or asked of the
worker, and each result, skip, failure and tile count the worker sends back lands in the list, the status bar and
the presenter."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from app.logs import private
from app.spelling import counted

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.ui.controllers.editor import Editor
    from app.ui.controllers.presenter import Presenter
    from app.ui.controllers.reviewer import Reviewer
    from app.ui.controllers.tuner import Tuner
    from app.ui.controllers.volume_view import VolumeView
    from app.ui.state.messages import TileProgress, ViewFailed, ViewResult, ViewSkipped
    from app.ui.state.remote_messages import RemoteRetrying
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.status import StatusBar
    from app.ui.workers.worker import InferenceWorker

log = logging.getLogger(__name__)


class Pictures(QObject):
    view_requested = Signal(object)  # messages.ViewRequest, to the inference worker
    image_failed = Signal(object, str)  # path, message

    def __init__(self, state: ViewState, *, files: FileList, status: StatusBar, presenter: Presenter, tuner: Tuner,
                 reviewer: Reviewer, editor: Editor, volumes: VolumeView, worker: InferenceWorker,
                 open_model: Callable[[Path], None], remember: Callable[[Path], None],
                 parent: QObject | None = None) -> None:
        """`open_model`: load the model at a path dropped or opened with the pictures (a trained-model folder,
        nnU-Net's, is imported first by the window's importer: app.ui.controllers.model_import); `remember`: add an
        opened file or folder to the recent list. `parent`: the window."""
        super().__init__(parent)
        self._state, self._files, self._status = state, files, status
        self._presenter, self._tuner, self._reviewer, self._editor = presenter, tuner, reviewer, editor
        self._volumes, self._worker = volumes, worker
        self._open_model, self._remember = open_model, remember
        self.view_requested.connect(worker.process_view)
        # bound methods only for what comes back: a lambda would run on the worker's thread, not on this one
        worker.result_ready.connect(self._on_result)
        worker.failed.connect(self._on_failed)
        worker.skipped.connect(self._on_skipped)
        worker.tile_progress.connect(self._on_tile_progress)
        worker.remote_retrying.connect(self._on_retrying)

    def add_paths(self, paths: list[str | Path]) -> None:
        """Load files and folders into the list (replacing it) and show the first; an .onnx file among them opens
        as the model, else an nnU-Net trained-model folder is imported and opened as the model."""
        from app.io.discover import discover
        from app.runs.imports.nnunet.layout import looks_like_nnunet_folder

        models = [Path(p) for p in paths if str(p).lower().endswith(".onnx")]
        trained = [Path(p) for p in paths if not models and looks_like_nnunet_folder(p)]
        if models:
            self._open_model(models[0])
        elif trained:
            from app.ui.controllers.model_import import importer_of

            importer_of(self.parent()).start(trained[0])  # imported on its own thread, then opened
        opened = [Path(p) for p in paths if not str(p).lower().endswith(".onnx") and Path(p) not in trained]
        for path in reversed(opened):  # the first opened ends up on top
            self._remember(path)
        inputs = discover(opened)
        if not inputs:
            if not models and not trained:
                self._status.showMessage("No images found in what was opened", 8000)
            return
        self._editor.stop()  # a correction in progress is saved while its picture is listed (names its review file)
        self._state.cache.clear()
        self._files.set_inputs(inputs)
        self._tuner.tune(input_root=str(self._files.root_and_rel(str(inputs[0].path))[0]))
        self._reviewer.open()
        self._files.setCurrentRow(0)
        self._status.showMessage(counted(len(inputs), "image"), 5000)

    def show(self, path: str | None, frame: int = 0) -> None:
        """Show `path` (its `frame`): from the cache when it is there, else asked of the worker."""
        if not path:
            return
        self._editor.stop()  # another picture: a correction in progress is saved first
        from app.ui.state.messages import ViewKey  # loaded once a picture is asked for: not before the window shows

        key = ViewKey(path, frame)
        volume = self._volumes.show(path, frame)
        cached = self._state.select(key)
        if cached is not None:
            if self._tuner.ensure_tuned(cached):  # else shown once decided at the current threshold
                self._presenter.display(cached)
            return
        request = self._state.request(key)
        if request is None:
            self._worker.note_image_waiting(key if volume is None else None)
            return  # shown once the model is ready
        if volume is not None:
            request = replace(request, volume=volume)
        self._files.set_status(path, "running")
        self.view_requested.emit(request)

    def cached_view(self, path: str | Path, frame: int = 0) -> ViewResult | None:
        from app.ui.state.messages import ViewKey

        return self._state.cache.peek(ViewKey(str(path), frame))

    def _on_result(self, view: ViewResult) -> None:
        if not self._state.keep(view):
            return  # made by a model that has since been replaced
        self._files.set_status(str(view.path), "done")
        self._tuner.judged(view)
        if self._state.should_show(view.request_id, view) and self._tuner.ensure_tuned(view):
            self._presenter.display(view)

    def _on_tile_progress(self, tiles: TileProgress) -> None:
        path, done, total = tiles.path, tiles.done, tiles.total
        if self._state.is_wanted_path(path):  # stepping to another image stops the rest of the tiles
            self._status.showMessage(f"{self._files.name_of(path)}: tile {done} of {total}" if done < total else "", 0)

    def _on_skipped(self, skipped: ViewSkipped) -> None:
        path = skipped.path
        if not self._state.is_wanted_path(path) and self._files.status(path) == "running":
            self._files.set_status(path, "pending")  # passed over unprocessed: the reader moved on

    def _on_failed(self, failed: ViewFailed) -> None:
        path, message = failed.path, failed.message
        private(log, logging.WARNING, path, message)
        self._files.set_status(path, "error", message)
        if self._state.is_wanted_path(path):
            self._presenter.failed(failed)
        self.image_failed.emit(path, message)

    def _on_retrying(self, retrying: RemoteRetrying) -> None:
        """The server is tried again for the picture wanted: the canvas shows that picture, waiting."""
        if retrying.picture is not None and retrying.picture.key == self._state.wanted:
            self._presenter.waiting(retrying)
