"""What the viewer remembers between runs (QSettings): window geometry, overlay opacity and mode, model, device."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.ui.view_state import DisplayMode

if TYPE_CHECKING:
    from PySide6.QtCore import QSettings

    from app.ui.main_window import MainWindow

DEFAULT_SIZE = (1500, 900)


def restore(window: MainWindow, settings: QSettings) -> None:
    """Geometry and overlay controls as they were (the controls tell the window, as when the reader moves them)."""
    geometry = settings.value("geometry")
    if geometry is not None:
        window.restoreGeometry(geometry)
    else:
        window.resize(*DEFAULT_SIZE)
    window.panel.controls.set_opacity(float(settings.value("opacity", 0.5)))
    contour = settings.value("contour", False, bool)
    window.panel.controls.set_mode(DisplayMode.CONTOUR if contour else DisplayMode.FILLED)


def model(settings: QSettings) -> Path | None:
    value = settings.value("model", "", str)
    return Path(value) if value else None


def device(settings: QSettings) -> str:
    return settings.value("device", "auto", str)


def save(window: MainWindow, settings: QSettings) -> None:
    overlay = window.state.overlay
    settings.setValue("geometry", window.saveGeometry())
    settings.setValue("opacity", overlay.opacity)
    settings.setValue("contour", overlay.mode is DisplayMode.CONTOUR)  # the key predates other modes
    settings.setValue("device", window.device)
    settings.setValue("toolbar", window.toolbar.toggleViewAction().isChecked())
    if window.model_path:
        settings.setValue("model", str(window.model_path))
    settings.sync()


def _threshold_key(model_path: str | Path) -> str:
    """Per model file (its absolute path, hashed: a path is no QSettings key)."""
    import hashlib

    digest = hashlib.sha1(str(Path(model_path).resolve()).encode("utf-8")).hexdigest()[:16]
    return f"thresholds/{digest}"


def threshold(settings: QSettings, model_path: str | Path) -> float | None:
    """The threshold the reader last set for this model file; None: the model's own."""
    value = settings.value(_threshold_key(model_path), "", str)
    try:
        return float(value) if value else None
    except ValueError:
        return None


def save_threshold(settings: QSettings, model_path: str | Path, value: float | None) -> None:
    """Remember the reader's threshold for this model file; None (Reset) forgets it."""
    if value is None:
        settings.remove(_threshold_key(model_path))
    else:
        settings.setValue(_threshold_key(model_path), f"{value:.4f}")
