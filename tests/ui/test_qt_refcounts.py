"""Guard against a PySide6 regression seen in 6.12.0 on Python 3.11: every signal emission dropped a reference
to True/None, and after a few thousand emissions the interpreter aborted ("deallocating None")."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal, Slot


class _Echo(QObject):
    ping = Signal(int)
    pong = Signal(int)

    @Slot(int)
    def answer(self, value: int) -> None:
        self.pong.emit(value)


def test_signal_emission_keeps_reference_counts(qapp):
    echo = _Echo()
    echo.ping.connect(echo.answer)
    echo.pong.connect(lambda _value: None)
    before = sys.getrefcount(None), sys.getrefcount(True), sys.getrefcount(False)
    for i in range(3000):
        echo.ping.emit(i)
    after = sys.getrefcount(None), sys.getrefcount(True), sys.getrefcount(False)
    assert all(abs(a - b) < 100 for a, b in zip(after, before, strict=True)), (before, after)
