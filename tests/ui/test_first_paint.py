"""Start-up asks for the model once the window is painted (app.ui.first_paint): a timer posted right after show()
ran before the X server's expose arrived, and the worker's imports then kept the window black ~0.1 s."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget
from waiting import round_trip

from app.ui.first_paint import after_first_paint


class Recorded(QWidget):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def paintEvent(self, event) -> None:
        self.events.append("paint")
        super().paintEvent(event)


def test_the_work_waits_for_the_first_paint_and_runs_once(qtbot) -> None:
    events: list[str] = []
    widget = Recorded(events)
    qtbot.addWidget(widget)
    widget.show()
    after_first_paint(widget, lambda: events.append("then"), wait_ms=5_000)
    assert events == []  # nothing before the event loop runs
    qtbot.waitUntil(lambda: "then" in events, timeout=5_000)
    assert events.index("paint") < events.index("then")
    widget.update()
    qtbot.waitUntil(lambda: events.count("paint") >= 2, timeout=5_000)  # painted again
    round_trip(qtbot)  # and what that paint would have posted has run
    assert events.count("then") == 1


def test_a_window_that_is_not_shown_does_not_hold_the_work_back(qtbot) -> None:
    events: list[str] = []
    widget = Recorded(events)
    qtbot.addWidget(widget)
    after_first_paint(widget, lambda: events.append("then"), wait_ms=5_000)
    qtbot.waitUntil(lambda: "then" in events, timeout=1_000)
    assert events == ["then"]
