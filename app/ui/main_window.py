"""The main window: layout and wiring.

What is shown lives in a ViewState (plain Python), the Presenter puts it on screen, inference runs on the worker
thread and window/level pixels on the display thread; widgets are driven through their intents. No pixel maths
here: this file connects those and passes records between them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from app.ui import actions, input_filters
from app.ui import settings as remembered
from app.ui.controllers.presenter import Presenter
from app.ui.recent import RecentList
from app.ui.state.view_state import ViewState
from app.ui.toolbar import build_toolbar, show_icons
from app.ui.widgets.file_list import FileList
from app.ui.widgets.panels import PanelArea, SidePanel
from app.ui.widgets.slices import SliceBar
from app.ui.widgets.status import StatusBar
from app.ui.widgets.viewer import ImageViewer
from app.ui.window_parts import WindowParts
from app.ui.workers.threads import start_worker_thread, stop_thread

if TYPE_CHECKING:
    from app.ui.state.messages import ModelSummary, ViewResult, Window


class MainWindow(WindowParts):
    # paths travel as `object`: a QString drops a file name's non-UTF-8 bytes (file_list._path)
    overlay_shown = Signal(object)  # path, once its overlay (or top-k) is on screen
    window_shown = Signal(object)  # (center, width): pixels through this display window are on screen
    image_failed = Signal(object, str)  # path, message
    model_changed = Signal(object)  # ModelSummary
    model_failed = Signal(str)  # message
    run_all_finished = Signal(object, str)  # RunSummary, report path or error

    def __init__(self, *, settings: QSettings, model_path: Path | None = None, device: str | None = None,
                 finish_later: bool = False) -> None:
        super().__init__()
        self.settings = settings
        self.persist_settings = True  # a self-test must not change the user's settings
        self.setWindowTitle("SegLens")
        self.setAcceptDrops(True)
        self.state = ViewState()
        self._build_widgets()
        remembered.restore(self, settings)
        self._wanted = model_path or remembered.model(settings), device or remembered.device(settings)
        self.recent_inputs = RecentList(settings, "recent/inputs", writable=lambda: self.persist_settings)
        self.recent_models = RecentList(settings, "recent/models", writable=lambda: self.persist_settings)
        self.toolbar = build_toolbar(self)  # added to the window; its icons come with finish()
        self.toolbar.setVisible(cast(bool, settings.value("toolbar", True, bool)))  # converted to the type asked
        self._menus, self._finished = actions.menu_bar(self), False
        if not finish_later:
            self.finish()

    def finish(self) -> None:
        """What the first paint does not need (hidden groups, controllers, threads, menus): app/ui/first_paint.py."""
        if self._finished:
            return
        self._finished = True
        self.panel.add_hidden_groups()
        self._start_threads()
        self.loader.path, self.loader.device = self._wanted
        actions.build_menus(self, self._menus)
        show_icons(self.toolbar)
        self._peek, self._drops = input_filters.PeekFilter(self), input_filters.FileDrops(self)  # drops open
        self.overlay_shown.connect(self._peek.arm)  # nothing to peek under before the first overlay

    def _build_widgets(self) -> None:
        self.files = FileList()
        self.viewer = ImageViewer()
        self.slices = SliceBar()
        self.panel = SidePanel(groups_later=True)  # MainWindow.finish adds them
        self.splitter = QSplitter()  # horizontal
        file_side = QWidget()
        column = QVBoxLayout(file_side)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.files.filter_box)
        column.addWidget(self.files)
        side = PanelArea(self.panel)  # as wide as the panel needs, scrolling on a short screen
        image_side = QWidget()  # the picture, with the slice bar under it for volumes
        image_column = QVBoxLayout(image_side)
        image_column.setContentsMargins(0, 0, 0, 0)
        image_column.setSpacing(0)
        image_column.addWidget(self.viewer, 1)
        image_column.addWidget(self.slices)
        for widget, stretch in ((file_side, 0), (image_side, 1), (side, 0)):
            self.splitter.addWidget(widget)
            self.splitter.setStretchFactor(self.splitter.count() - 1, stretch)
        self.splitter.setSizes([240, 1000, 280])
        self.setCentralWidget(self.splitter)
        self.status = StatusBar()
        self.setStatusBar(self.status)
        self.presenter = Presenter(self.state, viewer=self.viewer, panel=self.panel, status=self.status, parent=self)
        self.presenter.overlay_shown.connect(self.overlay_shown)
        self.presenter.window_shown.connect(self.window_shown)
        self.files.current_path_changed.connect(self.show_path)
        self.panel.split_changed.connect(self.presenter.set_split)
        self.panel.opacity_changed.connect(self.presenter.set_opacity)
        self.panel.visible_changed.connect(self.presenter.set_overlay_visible)
        self.panel.mode_changed.connect(lambda mode: self.presenter.restyle(mode=mode))
        self.panel.hidden_changed.connect(lambda hidden: self.presenter.restyle(hidden=hidden))
        self.panel.frame_changed.connect(lambda frame: self.show_path(self.files.current_path(), frame))
        self.viewer.window_dragged.connect(self.presenter.drag_window)

    def _start_threads(self) -> None:
        """Bound methods only for what comes back: a lambda would run on the sending thread, not on this one."""
        from app.ui.controllers.comparer import Comparer  # these modules load after the first paint (finish)
        from app.ui.controllers.editor import Editor
        from app.ui.controllers.instances import InstanceController
        from app.ui.controllers.loader import ModelLoader
        from app.ui.controllers.pictures import Pictures
        from app.ui.controllers.references import References
        from app.ui.controllers.reporter import ReportExporter
        from app.ui.controllers.reviewer import Reviewer
        from app.ui.controllers.run_all import RunOnAll
        from app.ui.controllers.tuner import Tuner
        from app.ui.controllers.volume3d import Volume3D
        from app.ui.controllers.volume_view import VolumeView
        from app.ui.workers.windowing import WindowingWorker
        from app.ui.workers.worker import InferenceWorker
        self.tuner = Tuner(self.state, presenter=self.presenter, decision=self.panel.decision, folder=self.panel.folder,
                           files=self.files, settings=self.settings, parent=self)
        self.worker = InferenceWorker(latest=self.state.latest, latest_tune=self.state.latest_tune)
        self.editor = Editor(self.state, viewer=self.viewer, presenter=self.presenter, panel=self.panel.edit,
                             files=self.files, slice_masks=self.worker.slice_masks, parent=self)
        self.reviewer = Reviewer(self.state, files=self.files, panel=self.panel.review, status=self.status, parent=self)
        self.instances = InstanceController(self.state, presenter=self.presenter, viewer=self.viewer, panel=self.panel,
            reviewer=self.reviewer, files=self.files, status=self.status, smart=lambda: self.editor.smart, parent=self)
        self.references = References(self.state, files=self.files, status=self.status, tuner=self.tuner,
                                     reviewer=self.reviewer, parent=self)
        self.editor.destination = self.references.destination
        self.editor.saved.connect(self.references.on_corrected)
        self.editor.refused.connect(lambda message: self.status.showMessage(message, 15000))
        self.editor.mask_changed.connect(self.panel.show_mask_counts)
        self.tuner.retune_requested.connect(self.worker.retune)
        self.worker.retuned.connect(self.tuner.on_retuned)
        self.volumes = VolumeView(self.state, files=self.files, viewer=self.viewer, slices=self.slices,
            panel=self.panel, worker=self.worker, status=self.status, presenter=self.presenter, parent=self)
        self.pictures = Pictures(self.state, files=self.files, status=self.status, presenter=self.presenter,
            tuner=self.tuner, reviewer=self.reviewer, editor=self.editor, volumes=self.volumes, worker=self.worker,
            open_model=self.open_model, remember=lambda path: self.recent_inputs.add(path), parent=self)
        self.pictures.image_failed.connect(self.image_failed)
        self.loader = ModelLoader(self.state, files=self.files, status=self.status, panel=self.panel, tuner=self.tuner,
                                  presenter=self.presenter, editor=self.editor, reviewer=self.reviewer,
                                  worker=self.worker, loaded=lambda path, _: self.recent_models.add(path),
                                  runtime=lambda: remembered.runtime(self.settings),
                                  refresh=lambda: self.show_path(self.files.current_path()), parent=self)
        self.loader.model_changed.connect(self.model_changed)
        self.loader.model_failed.connect(self.model_failed)
        self.volumes.slice_wanted.connect(self.show_path)
        self.presenter.overlay_shown.connect(self.volumes.count)
        self.runner = RunOnAll(self.state, files=self.files, status=self.status, worker=self.worker,
                               tuner=self.tuner, parent=self)
        self.runner.finished.connect(self.run_all_finished)
        self.volume3d = Volume3D(self.state, files=self.files, status=self.status, panel=self.panel, viewer=self.viewer,
            worker=self.worker, volumes=self.volumes, loader=self.loader, show_slice=self.show_path, parent=self)
        self.comparer = Comparer(self.state, files=self.files, status=self.status, decision=self.panel.decision,
                                 worker=self.worker, refresh=lambda: self.show_path(self.files.current_path()),
                                 parent=self)
        self.comparer.model_b_changed.connect(self.presenter.set_model_b)  # B's name on its side of the split
        self.reporter = ReportExporter(self.state, reviewer=self.reviewer, status=self.status, worker=self.worker,
                                       parent=self)
        self.windowing = WindowingWorker(latest=self.state.latest_window)
        self.presenter.window_requested.connect(self.windowing.render)
        self.windowing.rendered.connect(self.presenter.on_windowed)
        self.windowing.failed.connect(self.presenter.on_window_failed)
        self.worker_thread = start_worker_thread(self.worker, name="inference", parent=self)
        self.display_thread = start_worker_thread(self.windowing, name="display", parent=self)

    # -- model -----------------------------------------------------------------------------------------

    def open_model(self, path: str | Path | None = None, device: str | None = None) -> None:
        """(Re)build the session on the worker for `path` on `device` (either defaults to the current one)."""
        self.loader.open(path, device)

    @property
    def model_path(self) -> Path | None:
        return self.loader.path

    @property
    def device(self) -> str:
        return self.loader.device

    @property
    def summary(self) -> ModelSummary | None:
        return self.state.model

    # -- images ----------------------------------------------------------------------------------------

    def add_paths(self, paths: list[str | Path]) -> None:
        """Load files and folders into the list (replacing it) and show the first."""
        self.pictures.add_paths(paths)

    def show_path(self, path: str | None, frame: int = 0) -> None:
        self.pictures.show(path, frame)

    def cached_view(self, path: str | Path, frame: int = 0) -> ViewResult | None:
        return self.pictures.cached_view(path, frame)

    @property
    def display_window(self) -> Window | None:
        """The display window (center, width) last asked for; None for an 8-bit picture."""
        return self.state.display_window

    def open_model_b(self, path: str | Path | None) -> None:
        """Compare with a second model (None: stop comparing): it runs on the same worker, on the same images."""
        self.comparer.open(path, device=self.device, runtime=remembered.runtime(self.settings))

    def compare_all(self) -> None:
        self.comparer.compare_all()

    def export_review_report(self, path: str | Path | None = None, *, anonymize: bool | None = None) -> None:
        self.reporter.export(path, anonymize=anonymize)

    def set_reference_folder(self, folder: str | Path | None) -> None:
        self.references.set_folder(folder)

    def run_all(self, out_dir: str | Path | None, save: tuple[str, ...] = ("mask", "overlay"), *,
                volumes: dict | None = None) -> None:
        """Run on all listed images, exporting into `out_dir` (None: scores and verdicts only, nothing written;
        volumes as `volumes` says: VolumeOptions' fields); run_all_finished tells when it is done."""
        self.runner.start(out_dir, save, volumes=volumes)

    # -- close ---------------------------------------------------------------------------------------

    def closeEvent(self, event) -> None:
        self.finish()  # closed before its first paint was done: its threads start and stop as ever
        if self.persist_settings:
            self.save_settings()
        self.shutdown()
        super().closeEvent(event)

    def save_settings(self) -> None:
        remembered.save(self, self.settings)

    def shutdown(self) -> None:
        """Stop the worker threads and wait for them (a running inference or model load finishes first)."""
        self.hide()  # gone at once, even while a long model load (a TensorRT build) is waited for
        self._peek.remove()
        self.worker.cancel_batch()
        self.editor.shutdown()  # the Smart tool's prompt thread; its propagated slices saved on the inference one
        stop_thread(self.worker_thread, timeout_ms=30_000)
        stop_thread(self.display_thread, timeout_ms=10_000)
