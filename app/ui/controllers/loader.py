"""The model: (re)building its session on the worker for a path and a device, and what the window shows once it is
ready (the session, the panel, the tuning remembered for it, the review log) or why it failed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from app.logs import private

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.inference.remote.session import RemoteTarget
    from app.ui.controllers.editor import Editor
    from app.ui.controllers.presenter import Presenter
    from app.ui.controllers.reviewer import Reviewer
    from app.ui.controllers.tuner import Tuner
    from app.ui.state.messages import ModelFailed, ModelSummary
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.status import StatusBar
    from app.ui.workers.worker import InferenceWorker

log = logging.getLogger(__name__)


# each bundled model's own samples (resources/samples/<folder>, models/README.md): what the viewer opens it with
BUNDLED_SAMPLES = {"surface_defects": "surface", "nuclei": "nuclei", "nuclei_fp16": "nuclei",
                   "defect_type": "defect_crops", "surface_anomaly": "anomaly", "ct_demo": "ct", "ct3d_demo": "ct3d",
                   "surface_instances": "surface"}


def window_title(shown: str) -> str:
    """`nuclei — SegLens`: what the window shows, then the application's name. Qt appends the display name to a
    title that does not end with it (X11, Wayland, Windows): "SegLens — nuclei" read "… — SegLens" twice."""
    return f"{shown} — SegLens"


def bundled_samples(model: Path | None) -> Path | None:
    """The sample folder made for `model` when it is one of the bundled models (`ct_demo` → resources/samples/ct/,
    a CT series), else None: a model of the same name elsewhere is not the bundled one."""
    from app.paths import models_dir, samples_dir

    folder = BUNDLED_SAMPLES.get(model.stem) if model is not None and model.suffix.lower() == ".onnx" else None
    if model is None or folder is None or model.resolve().parent != models_dir().resolve():
        return None
    return samples_dir() / folder if (samples_dir() / folder).is_dir() else None


def own_samples(model: Path | None, listed: list[str]) -> Path | None:
    """The bundled `model`'s own samples, to open with it while the list holds nothing the reader opened (nothing,
    or bundled samples only: `ct_demo` chosen over the surface photos shows the CT series); None otherwise."""
    from app.paths import samples_dir

    samples = bundled_samples(model)
    if samples is None:
        return None
    root = samples_dir().resolve()
    return samples if all(Path(path).resolve().is_relative_to(root) for path in listed) else None


class ModelLoader(QObject):
    load_requested = Signal(object)  # messages.LoadRequest, to the worker's load_model
    model_changed = Signal(object)  # ModelSummary
    model_failed = Signal(str)  # message

    def __init__(self, state: ViewState, *, files: FileList, status: StatusBar, panel: SidePanel,
                 presenter: Presenter, editor: Editor, tuner: Tuner, reviewer: Reviewer, worker: InferenceWorker,
                 runtime: Callable[[], str], loaded: Callable[[Path, str], None], refresh: Callable[[], None],
                 parent: QObject | None = None) -> None:
        """`runtime`: the runtime options now set; `loaded(path, name)`: a model loaded from `path` (the window
        offers it again); `refresh`: show the current picture again."""
        super().__init__(parent)
        self._state, self._files, self._status, self._panel = state, files, status, panel
        self._presenter, self._editor, self._tuner, self._reviewer = presenter, editor, tuner, reviewer
        self._runtime, self._loaded, self._refresh = runtime, loaded, refresh
        self.path: Path | None = None  # the last local model file
        self.device = "cpu"  # the last local device (what the settings remember)
        self.remote: RemoteTarget | None = None  # the server's model, while it is the device
        self.last_remote: RemoteTarget | None = None  # the last one used (Model ▸ Device offers it again)
        self.remote_sidecar: Path | None = None  # its local sidecar, if one was given
        self.load_requested.connect(worker.load_model)
        self._cancel_remote = worker.cancel_remote  # called here, on the GUI thread: the worker may be waiting
        worker.model_ready.connect(self._on_model_ready)  # bound methods: run on this thread, not the worker's
        worker.model_failed.connect(self._on_model_failed)

    def open(self, path: str | Path | None = None, device: str | None = None) -> None:
        """(Re)build the session on the worker for `path` on `device` (either defaults to the current one): a
        local device, so a remote session gives way to the last local model file."""
        self.path = Path(path) if path else self.path
        self.device = device or self.device
        if not self.path:
            return
        self.remote = None
        from app.ui.state.messages import LoadRequest

        self._start(self.path.stem, self.path.name, self.device)
        self.load_requested.emit(LoadRequest(self._state.generation, str(self.path), self.device,
                                             self._runtime()))

    def open_remote(self, target: RemoteTarget, *, sidecar: Path | None = None) -> None:
        """The model on a server as the device (Model ▸ Device ▸ Remote server…): opened on the worker's thread
        with app.inference.remote.session.open_remote_session; the last local model file and device stay for going
        back."""
        from app.inference.remote.graph import remote_path
        from app.ui.state.remote_messages import RemoteLoad

        self.remote = self.last_remote = target
        self.remote_sidecar = sidecar
        self._start(target.model, target.where, "the server")
        self.load_requested.emit(RemoteLoad(self._state.generation, str(remote_path(target.host, target.model)),
                                            "remote", self._runtime(), target, str(sidecar or "")))

    def _start(self, stem: str, name: str, device: str) -> None:
        self._editor.stop()
        self._state.begin_model()
        # a remote session's request (a silent server's, its retries) ends now, not after its timeouts: the new
        # session's load, queued behind it on the inference thread, starts at once
        self._cancel_remote()
        self._status.show_loading(stem)
        self._panel.show_model_loading(name, device)
        self._presenter.model_switching(f"Loading {name}…")  # no old overlay under the new title

    def _on_model_ready(self, summary: ModelSummary) -> None:
        if not self._state.model_ready(summary.generation, summary) or (self.path is None and self.remote is None):
            return
        spec = summary.spec
        remote = self.remote
        if isinstance(window := self.parent(), QWidget):
            window.setWindowTitle(window_title(spec.name if remote is None else f"{spec.name} on {remote.where}"))
        if remote is None and self.path is not None:  # a remote model is not a file: nothing for the recent models
            self._loaded(self.path, spec.name)  # loaded from it: worth offering again (a failed one: not)
        self._status.show_session(summary.info, spec.name)
        self._panel.show_model(spec)
        self._panel.show_busy(f"Running {spec.name}…" if self._files.current_path() else None)
        self._tuner.model_ready(summary.sha256, spec)  # remembered by the model's content, not its path
        self._reviewer.model_path = self.path if self.remote is None else spec.path
        self._reviewer.model_sha256 = summary.sha256
        self._reviewer.open()
        self.model_changed.emit(summary)
        for path in self._files.paths():
            self._files.set_status(path, "pending")
        self._refresh()

    def _on_model_failed(self, failed: ModelFailed) -> None:
        if not self._state.model_failed(failed.generation):
            return
        message = failed.message
        private(log, logging.ERROR, self.path, f"model failed: {message}")  # its folder only at DEBUG
        self._status.show_failure(message)
        self._status.showMessage(f"Model error: {message}", 15000)
        self._panel.show_model_error(message)
        self.model_failed.emit(message)
