"""A dialog the window opens is gone once closed: parented to the window (so never a stray top-level widget, which
the window fixture fails on) and deleted, not kept hidden under the window for as long as it lives."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtGui import QAction

from app.ui.widgets.dialogs import DiagnosticsDialog


def _about_action(window):
    return next(action for action in window.findChildren(QAction) if action.text() == "About / Diagnostics…")


def test_about_dialog_is_deleted_once_closed(qtbot, make_main_window):
    win = make_main_window()
    about = _about_action(win)
    for _ in range(2):  # each About opens a new one
        about.trigger()
        dialogs = win.findChildren(DiagnosticsDialog)
        assert len(dialogs) == 1 and dialogs[0].isVisible()
        assert dialogs[0].parent() is win
        dialogs[0].close()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        assert win.findChildren(DiagnosticsDialog) == []
