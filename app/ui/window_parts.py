"""What the main window offers the shell's other modules — the menus and keys (actions), the toolbar, the input
filters and the settings it remembers: its parts and its public methods, declared on the QMainWindow that
MainWindow (app/ui/main_window.py) builds and fills in.

Those modules take a WindowParts, not a MainWindow: the window imports them to dress itself, and none of them
imports the window, so the shell has no import circle (pyproject.toml's `acyclic-siblings`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMainWindow

if TYPE_CHECKING:
    from pathlib import Path

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QToolBar

    from app.ui.controllers.editor import Editor
    from app.ui.controllers.instances import InstanceController
    from app.ui.controllers.loader import ModelLoader
    from app.ui.controllers.presenter import Presenter
    from app.ui.controllers.reviewer import Reviewer
    from app.ui.controllers.volume_view import VolumeView
    from app.ui.recent import RecentList
    from app.ui.state.messages import ModelSummary
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.status import StatusBar
    from app.ui.widgets.viewer import ImageViewer
    from app.ui.workers.worker import InferenceWorker


class WindowParts(QMainWindow):
    """The window's parts, made with it (before its first paint) or by MainWindow.finish (after it)."""

    settings: QSettings
    persist_settings: bool  # a self-test must not change the user's settings
    state: ViewState
    files: FileList
    viewer: ImageViewer
    panel: SidePanel
    status: StatusBar
    presenter: Presenter
    toolbar: QToolBar
    recent_inputs: RecentList
    recent_models: RecentList
    # made by finish(), after the first paint
    editor: Editor
    instances: InstanceController
    reviewer: Reviewer
    volumes: VolumeView
    loader: ModelLoader
    worker: InferenceWorker

    @property
    def model_path(self) -> Path | None:
        raise NotImplementedError

    @property
    def device(self) -> str:
        raise NotImplementedError

    @property
    def summary(self) -> ModelSummary | None:
        """ModelSummary of the loaded model, None while none is ready."""
        raise NotImplementedError

    def open_model(self, path: str | Path | None = None, device: str | None = None) -> None:
        raise NotImplementedError

    def open_model_b(self, path: str | Path | None) -> None:
        raise NotImplementedError

    def compare_all(self) -> None:
        raise NotImplementedError

    def add_paths(self, paths: list[str | Path]) -> None:
        raise NotImplementedError

    def run_all(self, out_dir: str | Path | None, save: tuple[str, ...] = ("mask", "overlay"), *,
                volumes: dict[str, object] | None = None) -> None:
        raise NotImplementedError

    def export_review_report(self, path: str | Path | None = None, *, anonymize: bool | None = None) -> None:
        raise NotImplementedError

    def set_reference_folder(self, folder: str | Path | None) -> None:
        raise NotImplementedError
