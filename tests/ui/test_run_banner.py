"""The canvas's run banner: Cancel while the 3D model runs, Run again once it was stopped (with one volume open
there is no other file to leave it for and come back)."""

from __future__ import annotations

from PySide6.QtWidgets import QPushButton, QWidget

from app.ui.widgets.run_banner import RunBanner


def test_the_button_cancels_a_run_and_runs_a_stopped_one_again(qtbot):
    canvas = QWidget()
    qtbot.addWidget(canvas)
    banner = RunBanner(canvas)
    button = banner.findChild(QPushButton)
    cancelled, rerun = [], []
    banner.cancel_requested.connect(lambda: cancelled.append(1))
    banner.rerun_requested.connect(lambda: rerun.append(1))
    banner.show_progress("3D model: patch 3 / 45")
    button.click()
    assert (cancelled, rerun, banner.cancel_text()) == ([1], [], "Cancel")
    banner.show_stopped("3D model: cancelled")
    assert (banner.text(), banner.cancel_text()) == ("3D model: cancelled", "Run again")
    button.click()
    assert (cancelled, rerun) == ([1], [1])
    banner.show_progress("3D model: patch 1 / 45")
    assert banner.cancel_text() == "Cancel"
