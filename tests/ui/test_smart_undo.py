"""Propagate and the edit's history (issue 28): a proposal accepted and then undone is not carried to the next
slices (it was: the slices got an object the slice it came from no longer has); redo brings it back; and the
slices are given the class it was accepted in, not the one chosen since."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QComboBox

from ui import test_smart_volume

volume_window = test_smart_volume.volume_window
TIMEOUT = 20_000
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


def test_leaving_the_slice_while_propagating_takes_the_prompt_s_marks_with_it(qtbot, volume_window):
    """end() / begin() / another prompt model discard the prompt even while a propagation runs (Esc then only
    stops the propagation): the points of the slice left were painted on the next picture."""
    from ui.test_smart import at

    window, path = volume_window
    smart = test_smart_volume.accept_on_slice(qtbot, window)
    QTest.keyClick(window, Qt.Key.Key_PageDown, Qt.KeyboardModifier.AltModifier)
    propagation = smart.propagation
    assert propagation.running
    QTest.mouseClick(window.viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     at(window.viewer, 60, 30))
    assert smart.preview.marks == 1
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.show_path(path, test_smart_volume.CENTRE - 6)
    assert smart.preview.marks == 0 and not smart._points and smart.proposal is None
    qtbot.waitUntil(lambda: not propagation.running, timeout=60_000)
    qtbot.waitUntil(lambda: not propagation.pending, timeout=60_000)
