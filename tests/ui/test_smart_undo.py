"""Propagate and the edit's history (issue 28): a proposal accepted and then undone is not carried to the next
slices (it was: the slices got an object the slice it came from no longer has); redo brings it back; and the
slices are given the class it was accepted in, not the one chosen since."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QComboBox

from ui import test_smart_volume

volume_window = test_smart_volume.volume_window
CTRL = Qt.KeyboardModifier.ControlModifier


def test_an_undone_proposal_is_not_propagated_and_redo_brings_it_back(qtbot, volume_window):
    window, _path = volume_window
    smart = test_smart_volume.accept_on_slice(qtbot, window)
    down = window.panel.edit._down
    assert down.isVisible() and down.isEnabled()
    QTest.keyClick(window, Qt.Key.Key_Z, CTRL)
    assert not down.isEnabled()
    QTest.keyClick(window, Qt.Key.Key_PageDown, Qt.KeyboardModifier.AltModifier)
    assert smart.propagation is None or not smart.propagation.running
    QTest.keyClick(window, Qt.Key.Key_Z, CTRL | Qt.KeyboardModifier.ShiftModifier)
    assert down.isVisible() and down.isEnabled()


def test_the_slices_get_the_class_the_proposal_was_accepted_in(qtbot, volume_window):
    window, _path = volume_window
    smart = test_smart_volume.accept_on_slice(qtbot, window)
    window.panel.edit.findChildren(QComboBox)[0].setCurrentIndex(0)  # background chosen after
    assert window.editor.label() == 0
    QTest.keyClick(window, Qt.Key.Key_PageDown, Qt.KeyboardModifier.AltModifier)
    propagation = smart.propagation
    assert propagation.running and propagation._label == 1
    propagation.stop()
    qtbot.waitUntil(lambda: not propagation.running, timeout=60_000)
    qtbot.waitUntil(lambda: not propagation.pending, timeout=60_000)
