"""What the viewer remembers between runs (QSettings) about its window: geometry, overlay opacity and mode, toolbar,
model and device. What it remembers per model (the reader's threshold and score limit) is app.ui.state.remembered."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from app.paths import setting_path, setting_text
from app.ui.state.view_state import DisplayMode

if TYPE_CHECKING:
    from PySide6.QtCore import QSettings

    from app.ui.window_parts import WindowParts

DEFAULT_SIZE = (1500, 900)


def restore(window: WindowParts, settings: QSettings) -> None:
    """Geometry and overlay controls as they were (the controls tell the window, as when the reader moves them)."""
    geometry = settings.value("geometry")
    if geometry is not None:
        window.restoreGeometry(geometry)
    else:
        window.resize(*first_size(_available(window)))
    window.panel.controls.set_opacity(float(cast(float, settings.value("opacity", 0.5))))  # a number, or its text
    contour = settings.value("contour", False, bool)
    window.panel.controls.set_mode(DisplayMode.CONTOUR if contour else DisplayMode.FILLED)


def first_size(available: tuple[int, int] | None) -> tuple[int, int]:
    """The window's size on a first start: the default, shrunk to the screen's free area where that is smaller (on a
    1280×720 laptop the 1500×900 default put the side panel off the screen)."""
    if available is None:
        return DEFAULT_SIZE
    return min(DEFAULT_SIZE[0], available[0]), min(DEFAULT_SIZE[1], available[1])


def _available(window: WindowParts) -> tuple[int, int] | None:
    from PySide6.QtGui import QGuiApplication

    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return None
    free = screen.availableGeometry()
    frame = window.frameGeometry().size() - window.geometry().size()  # title bar and borders, once shown
    return free.width() - max(frame.width(), 0), free.height() - max(frame.height(), 40)


def model(settings: QSettings) -> Path | None:
    value = cast(str, settings.value("model", "", str))  # QSettings converts to the type asked for
    return Path(setting_path(value)) if value else None


def device(settings: QSettings) -> str:
    return cast(str, settings.value("device", "auto", str))


def runtime(settings: QSettings) -> str:
    """The runtime options: "tensorrt=true;gpu_mem_limit_mb=4096", as --runtime."""
    return cast(str, settings.value("runtime", "", str))  # converted to the type asked


def save(window: WindowParts, settings: QSettings) -> None:
    overlay = window.state.overlay
    settings.setValue("geometry", window.saveGeometry())
    settings.setValue("opacity", overlay.opacity)
    settings.setValue("contour", overlay.mode is DisplayMode.CONTOUR)  # the key predates other modes
    settings.setValue("device", window.device)
    settings.setValue("toolbar", window.toolbar.toggleViewAction().isChecked())
    if window.model_path:
        settings.setValue("model", setting_text(window.model_path))  # a path that is not UTF-8 kept whole
    settings.sync()
