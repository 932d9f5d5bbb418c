"""StatusBar.showMessage takes what QStatusBar.showMessage takes."""

from __future__ import annotations

from app.ui.widgets.status import StatusBar


def test_show_message_with_timeout_none_shows_the_message_until_the_next(qtbot):
    # QStatusBar's timeout may be None; the notice compared None > 0 (TypeError) and showed nothing
    bar = StatusBar()
    qtbot.addWidget(bar)

    bar.showMessage("Run on all finished", None)

    assert bar.currentMessage() == "Run on all finished"
