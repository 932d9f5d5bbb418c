"""The toolbar for the mouse-first reader: open folder, open model, previous / next, filled ⇄ contour, opacity and
Run on all, with the platform's standard icons and their names beside them. View ▸ Toolbar hides it; the choice
is remembered (app/ui/settings.py).

The icons come one frame late: built with the window, each button holds a blank icon, which lays it out as the icon
will (a tool button sizes itself by the toolbar's icon size for any non-null icon); `show_icons`, called by
MainWindow.finish after the first paint, puts the style's standard icons in. Before the window shows, the QStyle type
(~4 ms of enums) and the icon theme's first lookup (~4.5 ms) were a sixth of SegLens's start-up over a bare window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QColor, QIcon, QPixmap
from PySide6.QtWidgets import QLabel, QSlider, QToolBar

from app.ui.state.view_state import DisplayMode
from app.ui.widgets.lazy_qt import set_enum

if TYPE_CHECKING:
    from app.ui.window_parts import WindowParts


def build_toolbar(window: WindowParts) -> QToolBar:
    from app.ui import actions

    bar = QToolBar("Toolbar", window)
    bar.setObjectName("main_toolbar")
    bar.setMovable(False)
    set_enum(bar, "toolButtonStyle", "ToolButtonTextBesideIcon")
    blank = _blank_icon()
    for text, slot, tip in (
            ("Open folder", lambda: actions.open_folder_dialog(window),
             "Open a folder of images or a DICOM series (Ctrl+Shift+O)"),
            ("Open model", lambda: actions.open_model_dialog(window), "Open an ONNX model (Ctrl+M)"),
            ("Previous", lambda: window.files.step(-1), "Previous image (←)"),
            ("Next", lambda: window.files.step(1), "Next image (→)")):
        action = bar.addAction(blank, text)
        action.setToolTip(tip)
        action.triggered.connect(lambda _checked=False, s=slot: s())
    bar.addSeparator()
    bar.addAction(_contour_action(window, bar))
    bar.addWidget(QLabel(" Opacity "))
    bar.addWidget(_opacity_slider(window))
    bar.addSeparator()
    run = bar.addAction(blank, "Run on all…")
    run.setToolTip("Run the model on every listed image: export masks, overlays and the report, or the scores "
                   "only (Ctrl+E)")
    run.triggered.connect(lambda _checked=False: actions.run_all_dialog(window))
    window.addToolBar(bar)
    return bar


# the buttons that have an icon, by their text, and the style's standard icon each shows
STANDARD_ICONS = {"Open folder": "SP_DirOpenIcon", "Open model": "SP_FileIcon", "Previous": "SP_ArrowBack",
                  "Next": "SP_ArrowForward", "Run on all…": "SP_MediaPlay"}


def show_icons(bar: QToolBar) -> None:
    """The style's standard icons on the buttons that hold a blank one (after the first paint: module docstring)."""
    from PySide6.QtWidgets import QStyle

    style = bar.style()
    for action in bar.actions():
        name = STANDARD_ICONS.get(action.text())
        if name is not None:
            action.setIcon(style.standardIcon(getattr(QStyle.StandardPixmap, name)))


def _blank_icon() -> QIcon:
    """A transparent icon, not null, so the button is laid out with room for the icon to come; larger than any
    toolbar's icon size, as the text beside it is placed after the pixmap drawn (an icon is scaled down, not up)."""
    pixmap = QPixmap(128, 128)
    pixmap.fill(QColor(0, 0, 0, 0))
    return QIcon(pixmap)


def _contour_action(window: WindowParts, bar: QToolBar) -> QAction:
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


def _opacity_slider(window: WindowParts) -> QSlider:
    """The overlay's opacity, in step with the panel's slider (and the [ ] keys) both ways."""
    controls = window.panel.controls
    slider = QSlider()
    set_enum(slider, "orientation", "Horizontal")
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
