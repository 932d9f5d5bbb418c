"""The toolbar for the mouse-first reader: open folder, open model, previous / next, filled ⇄ contour, opacity and
Run on all, with the platform's standard icons and their names beside them. View ▸ Toolbar hides it; the choice
is remembered (app/ui/settings.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QSlider, QStyle, QToolBar

from app.ui.state.view_state import DisplayMode

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow


def build_toolbar(window: MainWindow) -> QToolBar:
    from app.ui import actions

    bar = QToolBar("Toolbar", window)
    bar.setObjectName("main_toolbar")
    bar.setMovable(False)
    bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    style = window.style()
    icon = style.standardIcon
    for text, standard, slot, tip in (
            ("Open folder", QStyle.StandardPixmap.SP_DirOpenIcon, lambda: actions.open_folder_dialog(window),
             "Open a folder of images or a DICOM series (Ctrl+Shift+O)"),
            ("Open model", QStyle.StandardPixmap.SP_FileIcon, lambda: actions.open_model_dialog(window),
             "Open an ONNX model (Ctrl+M)"),
            ("Previous", QStyle.StandardPixmap.SP_ArrowBack, lambda: window.files.step(-1), "Previous image (←)"),
            ("Next", QStyle.StandardPixmap.SP_ArrowForward, lambda: window.files.step(1), "Next image (→)")):
        action = bar.addAction(icon(standard), text)
        action.setToolTip(tip)
        action.triggered.connect(lambda _checked=False, s=slot: s())
    bar.addSeparator()
    bar.addAction(_contour_action(window, bar))
    bar.addWidget(QLabel(" Opacity "))
    bar.addWidget(_opacity_slider(window))
    bar.addSeparator()
    run = bar.addAction(icon(QStyle.StandardPixmap.SP_MediaPlay), "Run on all…")
    run.setToolTip("Run the model on every listed image: export masks, overlays and the report, or the scores "
                   "only (Ctrl+E)")
    run.triggered.connect(lambda _checked=False: actions.run_all_dialog(window))
    return bar


def _contour_action(window: MainWindow, bar: QToolBar) -> QAction:
    """Checked = outlines, unchecked = filled; follows the panel's mode (and the C key) both ways."""
    controls = window.panel.controls
    action = QAction("Contour", bar)
    action.setCheckable(True)
    action.setChecked(window.state.overlay.mode is DisplayMode.CONTOUR)
    action.setToolTip("Filled regions or outlines (C)")
    action.toggled.connect(lambda on: controls.set_mode(DisplayMode.CONTOUR if on else DisplayMode.FILLED))

    def follow(mode) -> None:
        action.blockSignals(True)
        action.setChecked(DisplayMode(mode) is DisplayMode.CONTOUR)
        action.blockSignals(False)

    controls.mode_changed.connect(follow)
    return action


def _opacity_slider(window: MainWindow) -> QSlider:
    """The overlay's opacity, in step with the panel's slider (and the [ ] keys) both ways."""
    controls = window.panel.controls
    slider = QSlider(Qt.Orientation.Horizontal)
    slider.setRange(0, 100)
    slider.setFixedWidth(110)
    slider.setValue(round(window.state.overlay.opacity * 100))
    slider.setToolTip("Overlay opacity ([ and ])")
    slider.valueChanged.connect(lambda value: controls.set_opacity(value / 100.0))

    def follow(opacity: float) -> None:
        slider.blockSignals(True)
        slider.setValue(round(opacity * 100))
        slider.blockSignals(False)

    controls.opacity_changed.connect(follow)
    return slider
