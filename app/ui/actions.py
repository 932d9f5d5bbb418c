"""Menus, actions and keyboard shortcuts of the main window."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence

from app.io.presets import CT_PRESETS
from app.ui.main_window import MainWindow, device_actions, shortcut


def build_menus(window: MainWindow) -> None:
    bar = window.menuBar()
    viewer, files, controls = window.viewer, window.files, window.panel.controls

    def add(menu, text: str, slot, *keys) -> QAction:
        action = shortcut(QAction(text, window), *keys)
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        return action

    file_menu = bar.addMenu("&File")
    add(file_menu, "Open images…", window.open_files_dialog, QKeySequence.StandardKey.Open)
    add(file_menu, "Open folder…", window.open_folder_dialog, "Ctrl+Shift+O")
    file_menu.addSeparator()
    add(file_menu, "Run on all and export…", window.run_all_dialog, "Ctrl+E")
    file_menu.addSeparator()
    add(file_menu, "Open log folder", _open_log_folder)
    add(file_menu, "Quit", window.close, QKeySequence.StandardKey.Quit)

    view_menu = bar.addMenu("&View")
    add(view_menu, "Next image", lambda: files.step(1), "Right", "PgDown", "N")
    add(view_menu, "Previous image", lambda: files.step(-1), "Left", "PgUp", "P")
    view_menu.addSeparator()
    add(view_menu, "Fit to window", viewer.fit_to_window, "F")
    add(view_menu, "Actual pixels (1:1)", viewer.actual_size, "1")
    add(view_menu, "Zoom in", lambda: viewer.zoom_by(1.25), QKeySequence.StandardKey.ZoomIn, "+", "=")
    add(view_menu, "Zoom out", lambda: viewer.zoom_by(0.8), QKeySequence.StandardKey.ZoomOut, "-")
    view_menu.addSeparator()
    add(view_menu, "Show / hide overlay", controls.visible.toggle, "O")
    add(view_menu, "Filled / contour", lambda: controls.mode.setCurrentIndex(1 - controls.mode.currentIndex()), "C")
    add(view_menu, "More opaque", lambda: controls.opacity.setValue(controls.opacity.value() + 10), "]")
    add(view_menu, "More transparent", lambda: controls.opacity.setValue(controls.opacity.value() - 10), "[")
    window_menu = view_menu.addMenu("Window / level")
    add(window_menu, "The image's own window", lambda: window.set_window(None), "W")
    add(window_menu, "Automatic (0.5–99.5 %)", window.auto_window, "Shift+W")
    window_menu.addSeparator()
    for name, preset in CT_PRESETS.items():
        add(window_menu, f"{name}  (L {preset[0]:g} / W {preset[1]:g})", lambda p=preset: window.set_window(p))

    model_menu = bar.addMenu("&Model")
    add(model_menu, "Open model…", window.open_model_dialog, "Ctrl+M")
    bundled = model_menu.addMenu("Bundled models")
    for path in _bundled_models():
        action = QAction(path.stem, window)
        action.triggered.connect(lambda _checked=False, p=path: window.open_model(p))
        bundled.addAction(action)
    device_menu = model_menu.addMenu("Device")
    window.device_group = device_actions(window, device_menu)

    help_menu = bar.addMenu("&Help")
    add(help_menu, "About / Diagnostics…", lambda: _show_diagnostics(window))


def _bundled_models():
    from app.paths import models_dir

    folder = models_dir()
    return sorted(folder.glob("*.onnx")) if folder.is_dir() else []


def _open_log_folder() -> None:
    from app.logs import log_dir

    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))


def _show_diagnostics(window: MainWindow) -> None:
    from app.ui.dialogs import DiagnosticsDialog

    DiagnosticsDialog(window.summary, window).show()
