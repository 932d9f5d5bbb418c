"""The window title as a title bar shows it: "SegLens" once, whatever the window shows.

Qt appends the application's display name to a window title on X11, Wayland and Windows unless the title already
ends with it (QPlatformWindow::formatWindowTitle); the viewer sets that name (app.ui.app.set_app_identity), so a
title "SegLens — nuclei" was shown as "SegLens — nuclei — SegLens"."""

from __future__ import annotations

import pytest
from onnx_factory import class_metadata
from PySide6.QtGui import QGuiApplication

from app.ui.app import set_app_identity

TIMEOUT = 20_000  # ms: a model load on a slow CI machine


def as_shown(title: str) -> str:
    """`title` as Qt's platform windows show it (QPlatformWindow::formatWindowTitle, separator " — ")."""
    name = QGuiApplication.applicationDisplayName()
    return title if not name or title.endswith(name) else (f"{title} — {name}" if title else name)


@pytest.fixture
def identity(qapp):
    set_app_identity(qapp)
    assert QGuiApplication.applicationDisplayName() == "SegLens"


def test_the_title_says_seglens_once_before_and_after_a_model(identity, qtbot, make_main_window, models):
    window = make_main_window(None)
    assert as_shown(window.windowTitle()) == "SegLens"
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        window.open_model(models("rgb_classes", name="other", metadata=class_metadata(["bg", "a"])))
    shown = as_shown(window.windowTitle())
    assert shown.count("SegLens") == 1 and "other" in shown


def test_the_about_dialog_says_seglens_once(identity, qtbot, make_main_window):
    from app.ui.widgets.dialogs import DiagnosticsDialog

    window = make_main_window(None)
    dialog = DiagnosticsDialog(None, window)
    qtbot.addWidget(dialog)
    assert as_shown(dialog.windowTitle()).count("SegLens") == 1
