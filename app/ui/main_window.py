"""The main window: menus, layout, status bar and the wiring to the inference worker. No pixel maths here."""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QThread, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QMainWindow, QSplitter

from app.ui.file_list import FileList
from app.ui.panels import SidePanel
from app.ui.status import StatusBar
from app.ui.viewer import ImageViewer
from app.ui.worker import InferenceWorker

log = logging.getLogger(__name__)
DEVICES = ("auto", "cpu", "cuda")
CACHE_SIZE = 8


class MainWindow(QMainWindow):
    load_requested = Signal(int, str, str, str)  # generation, model path, device, runtime options
    process_requested = Signal(int, str, int)  # request id, image path, frame
    run_all_requested = Signal(list, str, list)  # InputFiles, output folder, what to save
    overlay_shown = Signal(str)  # path, once its overlay (or top-k) is on screen
    image_failed = Signal(str, str)  # path, message
    model_changed = Signal(object)  # ModelSummary
    model_failed = Signal(str)  # message
    run_all_finished = Signal(object, str)  # RunSummary, report path or error

    def __init__(self, *, settings: QSettings, model_path: Path | None = None, device: str | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.persist_settings = True  # a self-test must not change the user's settings
        self.setWindowTitle("SegLens")
        self.setAcceptDrops(True)
        self._request_id = 0
        self._generation = 0
        self._summary = None  # ModelSummary of the loaded model
        self._cache: OrderedDict[tuple[str, int], object] = OrderedDict()  # (path, frame) -> ViewResult, LRU
        self._current_overlay = None  # app.ui.overlay.OverlayImage of the image shown
        self._view = None  # the ViewResult shown
        self._window: tuple[float, float] | None = None  # the display window of the image shown
        self._contour = False
        self._build_widgets()
        self._start_worker()
        self._restore_settings()
        saved_model = settings.value("model", "", str)
        self.model_path = model_path or (Path(saved_model) if saved_model else None)
        self.device = device or settings.value("device", "auto", str)
        self._build_menus()

    # -- construction ----------------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        self.files = FileList()
        self.viewer = ImageViewer()
        self.panel = SidePanel()
        splitter = QSplitter(Qt.Orientation.Horizontal)
        for widget, stretch in ((self.files, 0), (self.viewer, 1), (self.panel, 0)):
            splitter.addWidget(widget)
            splitter.setStretchFactor(splitter.count() - 1, stretch)
        splitter.setSizes([240, 1000, 280])
        self.splitter = splitter
        self.setCentralWidget(splitter)
        self.status = StatusBar()
        self.setStatusBar(self.status)
        self.files.current_path_changed.connect(self.show_path)
        controls = self.panel.controls
        controls.opacity_changed.connect(self._on_opacity)
        controls.contour_changed.connect(self._on_contour)
        controls.visible_changed.connect(self.viewer.set_overlay_visible)
        self.panel.legend.visibility_changed.connect(lambda _hidden: self._repaint_overlay())
        self.panel.image_info.frame_changed.connect(lambda frame: self.show_path(self.files.current_path(), frame))
        self.viewer.window_dragged.connect(self._on_window_drag)
        self.status.cancel.clicked.connect(self.cancel_run_all)

    def _start_worker(self) -> None:
        self.worker_thread = QThread(self)
        self.worker_thread.setObjectName("inference")
        self.worker = InferenceWorker()
        self.worker.moveToThread(self.worker_thread)
        self.worker_thread.finished.connect(self.worker.deleteLater)
        self.load_requested.connect(self.worker.load_model)
        self.process_requested.connect(self.worker.process)
        self.run_all_requested.connect(self.worker.run_all)
        self.worker.model_ready.connect(self._on_model_ready)
        self.worker.model_failed.connect(self._on_model_failed)
        self.worker.result_ready.connect(self._on_result)
        self.worker.failed.connect(self._on_failed)
        self.worker.batch_progress.connect(self._on_batch_progress)
        self.worker.batch_finished.connect(self._on_batch_finished)
        self.worker_thread.start()

    def _build_menus(self) -> None:
        from app.ui import actions

        actions.build_menus(self)
        self._peek = _PeekFilter(self)
        QApplication.instance().installEventFilter(self._peek)

    def _restore_settings(self) -> None:
        geometry = self.settings.value("geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self.resize(1500, 900)
        self.panel.controls.set_opacity(float(self.settings.value("opacity", 0.5)))
        contour = self.settings.value("contour", False, bool)
        self.panel.controls.mode.setCurrentIndex(1 if contour else 0)

    # -- model -----------------------------------------------------------------------------------------

    def open_model(self, path: str | Path | None = None, device: str | None = None) -> None:
        """(Re)build the session on the worker for `path` on `device` (either defaults to the current one)."""
        self.model_path = Path(path) if path else self.model_path
        self.device = device or self.device
        if not self.model_path:
            return
        self._generation += 1
        self._summary = None
        self._cache.clear()
        self.status.show_loading(self.model_path.stem)
        self.panel.model_label.setText(f"Loading {self.model_path.name} on {self.device}…")
        runtime = self.settings.value("runtime", "", str)  # "tensorrt=true;gpu_mem_limit_mb=4096", as --runtime
        self.load_requested.emit(self._generation, str(self.model_path), self.device, runtime)

    def _on_model_ready(self, generation: int, summary) -> None:
        if generation != self._generation:
            return
        self._summary = summary
        spec = summary.spec
        self.status.show_session(summary.info, spec.name)
        self.panel.model_label.setText(f"<b>{spec.name}</b><br>{spec.task} · {spec.path.name}")
        self.panel.show_task(spec.task)
        self.panel.legend.set_classes(spec.classes)
        self.panel.top_k.set_predictions(())
        self.setWindowTitle(f"SegLens — {spec.name}")
        self.model_changed.emit(summary)
        for path in self.files.paths():
            self.files.set_status(path, "pending")
        if self.files.current_path():
            self.show_path(self.files.current_path())

    def _on_model_failed(self, generation: int, message: str) -> None:
        if generation != self._generation:
            return
        log.error("model failed: %s", message)
        self.status.show_failure(message)
        self.status.showMessage(f"Model error: {message}", 15000)
        self.panel.model_label.setText(f"<b>Model error</b><br>{message}")
        self.model_failed.emit(message)

    @property
    def summary(self):
        return self._summary

    # -- images ----------------------------------------------------------------------------------------

    def add_paths(self, paths: list[str | Path]) -> None:
        """Load files and folders into the list (replacing it) and show the first."""
        from app.io.discover import discover

        models = [Path(p) for p in paths if str(p).lower().endswith(".onnx")]
        if models:
            self.open_model(models[0])
        inputs = discover([Path(p) for p in paths if not str(p).lower().endswith(".onnx")])
        if not inputs:
            if not models:
                self.status.showMessage("No images found in what was opened", 8000)
            return
        self._cache.clear()
        self.files.set_inputs(inputs)
        self.files.setCurrentRow(0)
        self.status.showMessage(f"{len(inputs)} image(s)", 5000)

    def show_path(self, path: str, frame: int = 0) -> None:
        if not path:
            return
        cached = self._cache.get((path, frame))
        if cached is not None:
            self._cache.move_to_end((path, frame))
            self._display(cached)
            return
        self._request_id += 1
        if self._summary is None:
            self.worker.note_image_waiting()
            return  # shown once the model is ready
        self.files.set_status(path, "running")
        self.worker.note_latest_request(self._request_id)
        self.process_requested.emit(self._request_id, path, frame)

    def cached_view(self, path: str, frame: int = 0):
        return self._cache.get((path, frame))

    def _on_result(self, request_id: int, view) -> None:
        path = str(view.path)
        self.files.set_status(path, "done")
        self._cache[(path, view.frame)] = view
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        if request_id == self._request_id and path == self.files.current_path():
            self._display(view)

    def _on_failed(self, request_id: int, path: str, message: str) -> None:
        log.warning("%s", message)
        self.files.set_status(path, "error", message)
        if path == self.files.current_path():
            self.viewer.clear()
            self.status.showMessage(f"Error: {message}", 15000)
            self.panel.legend.clear_counts()
        self.image_failed.emit(path, message)

    def _display(self, view) -> None:
        from app.ui.overlay import OverlayImage, image_to_qimage  # numpy: loaded after the window shows

        result = view.result
        height, width = result.image_hw
        same_image = self._view is not None and self._view.path == view.path
        if not same_image:  # a new image starts at its own window; another frame keeps the reader's
            self._window = view.window
        self._view = view
        pixels = view.display_pixels if self._window == view.window else self._windowed(view)
        self.viewer.set_image(image_to_qimage(pixels), (width, height))
        self.status.show_image_size(width, height, self._window if view.display_raw is not None else None)
        self.panel.image_info.show_info(view.info, self._window if view.display_raw is not None else None,
                                        view.frame, view.frame_count)
        self.status.show_timings(result.timings)
        if result.mask is not None:
            self._current_overlay = OverlayImage(view.display_mask, self._summary.spec.classes if self._summary
                                                 else ())
            self._repaint_overlay()
            self.panel.legend.set_counts(result.class_pixels(), width * height)
        else:
            self._current_overlay = None
            self.panel.top_k.set_predictions(result.predictions)
        self.overlay_shown.emit(str(view.path))

    # -- window / level --------------------------------------------------------------------------------

    def set_window(self, window: tuple[float, float] | None) -> None:
        """Display window (center, width) for high-range images; None = the image's own."""
        view = self._view
        if view is None or view.display_raw is None:
            return
        self._window = window or view.window
        from app.ui.overlay import image_to_qimage

        self.viewer.replace_image(image_to_qimage(self._windowed(view)))
        height, width = view.result.image_hw
        self.status.show_image_size(width, height, self._window)
        self.panel.image_info.show_info(view.info, self._window, view.frame, view.frame_count)

    def auto_window(self) -> None:
        if self._view is not None and self._view.display_raw is not None:
            from app.io.window import auto_window

            self.set_window(auto_window(self._view.display_raw))

    def _windowed(self, view):
        from app.io.window import apply_window

        return apply_window(view.display_raw, *self._window, invert=view.invert)

    def _on_window_drag(self, dx: float, dy: float) -> None:
        """Right-drag as in clinical viewers: horizontal = width (contrast), vertical = level (brightness)."""
        if self._view is None or self._view.display_raw is None or self._window is None:
            return
        center, width = self._window
        step = max(width, 1.0) / 256.0
        self.set_window((center + dy * step, max(1.0, width + dx * step)))

    def _repaint_overlay(self) -> None:
        if self._current_overlay is not None:
            hidden = self.panel.legend.hidden()
            self.viewer.set_overlay(self._current_overlay.image(hidden=hidden, contour=self._contour))

    def _on_opacity(self, opacity: float) -> None:
        self.viewer.set_overlay_opacity(opacity)

    def _on_contour(self, contour: bool) -> None:
        self._contour = contour
        self._repaint_overlay()

    # -- run on all ------------------------------------------------------------------------------------

    def run_all(self, out_dir: str | Path, save: tuple[str, ...] = ("mask", "overlay")) -> None:
        inputs = self.files.inputs()
        if not inputs or self._summary is None:
            self.status.showMessage("Nothing to run: open images and wait for the model", 8000)
            return
        self.status.progress.setRange(0, len(inputs))
        self.status.progress.setValue(0)
        self.status.progress.show()
        self.status.cancel.show()
        self.run_all_requested.emit(inputs, str(out_dir), list(save))

    def cancel_run_all(self) -> None:
        self.worker.cancel_batch()
        self.status.showMessage("Cancelling after the current image…", 5000)

    def _on_batch_progress(self, outcome, summary) -> None:
        path = str(outcome.input.path)
        self.files.set_status(path, "done" if outcome.error is None else "error", outcome.error or "")
        self.status.progress.setValue(summary.ok + summary.failed)

    def _on_batch_finished(self, summary, report: str) -> None:
        self.status.progress.hide()
        self.status.cancel.hide()
        state = "cancelled" if summary.cancelled else "done"
        self.status.showMessage(f"Run on all {state}: {summary.ok} ok, {summary.failed} failed — {report}", 20000)
        log.info("run on all %s: %s ok, %s failed, report %s", state, summary.ok, summary.failed, report)
        self.run_all_finished.emit(summary, report)

    # -- drag and drop, close --------------------------------------------------------------------------

    def dragEnterEvent(self, event) -> None:
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.add_paths(paths)

    def open_files_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Open images")
        if files:
            self.add_paths(files)

    def open_folder_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open folder")
        if folder:
            self.add_paths([folder])

    def open_model_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open ONNX model", str(self.model_path or ""),
                                              "ONNX models (*.onnx)")
        if path:
            self.open_model(path)

    def run_all_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export masks, overlays and report to")
        if folder:
            self.run_all(folder)

    def closeEvent(self, event) -> None:
        if self.persist_settings:
            self.save_settings()
        self.shutdown()
        super().closeEvent(event)

    def save_settings(self) -> None:
        self.settings.setValue("geometry", self.saveGeometry())
        self.settings.setValue("opacity", self.panel.controls.opacity.value() / 100.0)
        self.settings.setValue("contour", self._contour)
        self.settings.setValue("device", self.device)
        if self.model_path:
            self.settings.setValue("model", str(self.model_path))
        self.settings.sync()

    def shutdown(self) -> None:
        """Stop the worker thread and wait for it (a running inference finishes first)."""
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self._peek)
        if self.worker_thread.isRunning():
            self.worker.cancel_batch()
            self.worker_thread.quit()
            self.worker_thread.wait(30_000)


class _PeekFilter(QObject):
    """Hold Space to hide the overlay and see the raw image; release to bring it back (active window only)."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self._window = window

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        if (kind not in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease) or event.key() != Qt.Key.Key_Space
                or not self._window.isActiveWindow()):
            return False
        if not event.isAutoRepeat():
            overlay_wanted = self._window.panel.controls.visible.isChecked()
            self._window.viewer.set_overlay_visible(overlay_wanted and kind == QEvent.Type.KeyRelease)
        return True


def device_actions(window: MainWindow, menu) -> QActionGroup:
    group = QActionGroup(window)
    for device in DEVICES:
        action = QAction(device.upper() if device != "auto" else "Auto (GPU if it works)", window, checkable=True)
        action.setData(device)
        action.setChecked(device == window.device)
        action.triggered.connect(lambda _checked=False, d=device: window.open_model(device=d))
        group.addAction(action)
        menu.addAction(action)
    return group


def shortcut(action: QAction, *keys) -> QAction:
    action.setShortcuts([QKeySequence(k) for k in keys])
    return action
