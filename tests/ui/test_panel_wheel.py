"""The wheel over the side panel always scrolls the panel: a combo box, slider or spin box under it keeps its value,
focused or not (the Show box jumped to "Difference vs reference" with no reference loaded, and to "Probability" at
the first notch after being picked from its list); the keyboard still changes a focused one."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QComboBox, QScrollArea, QSlider


def _wheel(widget, steps: int = -1) -> QWheelEvent:
    event = QWheelEvent(QPointF(5, 5), QPointF(widget.mapToGlobal(QPoint(5, 5))), QPoint(0, 0),
                        QPoint(0, 120 * steps), Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)
    return event


def _short_window(make_main_window, qtbot):
    window = make_main_window(load=False)
    window.finish()
    window.panel.decision.show()
    window.resize(900, 300)  # the panel scrolls
    qtbot.waitUntil(lambda: _area(window).verticalScrollBar().maximum() > 0)
    return window


def _area(window) -> QScrollArea:
    return window.panel.parentWidget().parentWidget()


def test_the_wheel_over_a_combo_box_scrolls_the_panel_and_leaves_the_box(make_main_window, qtbot):
    window = _short_window(make_main_window, qtbot)
    combos = [c for c in window.panel.findChildren(QComboBox) if c.isVisibleTo(window.panel) and c.count() > 1]
    assert combos
    bar = _area(window).verticalScrollBar()
    for combo in combos:
        before = combo.currentIndex()
        bar.setValue(0)
        _wheel(combo)
        assert combo.currentIndex() == before, combo.toolTip()
        assert bar.value() > 0, "the panel did not scroll"


def test_the_wheel_over_a_slider_leaves_its_value(make_main_window, qtbot):
    window = _short_window(make_main_window, qtbot)
    sliders = [s for s in window.panel.findChildren(QSlider) if s.isVisibleTo(window.panel)]
    assert sliders
    for slider in sliders:
        slider.setValue((slider.minimum() + slider.maximum()) // 2)
        before = slider.value()
        _wheel(slider)
        assert slider.value() == before, slider.toolTip()


def test_a_combo_box_focused_by_a_click_still_leaves_the_wheel_to_the_panel(make_main_window, qtbot):
    """Pick Show from the list, then wheel down to read on: the box keeps its value, the panel scrolls."""
    window = _short_window(make_main_window, qtbot)
    window.activateWindow()
    combos = [c for c in window.panel.findChildren(QComboBox) if c.isVisibleTo(window.panel) and c.count() > 1]
    assert combos
    bar = _area(window).verticalScrollBar()
    for combo in combos:
        combo.setFocus(Qt.FocusReason.MouseFocusReason)
        qtbot.waitUntil(combo.hasFocus)
        before = combo.currentIndex()
        bar.setValue(0)
        _wheel(combo, steps=-1 if before == 0 else 1)
        assert combo.currentIndex() == before, combo.toolTip()
        assert bar.value() > 0, "the panel did not scroll"


def test_a_focused_slider_and_spin_box_leave_the_wheel_to_the_panel(make_main_window, qtbot):
    window = _short_window(make_main_window, qtbot)
    window.activateWindow()
    takers = [w for w in window.panel.findChildren(QSlider) + window.panel.findChildren(QAbstractSpinBox)
              if w.isVisibleTo(window.panel)]
    assert takers
    for taker in takers:
        if isinstance(taker, QSlider):
            taker.setValue((taker.minimum() + taker.maximum()) // 2)
        taker.setFocus(Qt.FocusReason.TabFocusReason)
        qtbot.waitUntil(taker.hasFocus)
        before = taker.value() if isinstance(taker, QSlider) else taker.text()
        _wheel(taker)
        assert (taker.value() if isinstance(taker, QSlider) else taker.text()) == before, taker.toolTip()


def test_the_keyboard_still_changes_a_focused_combo_box(make_main_window, qtbot):
    window = _short_window(make_main_window, qtbot)
    combo = window.panel.controls.findChild(QComboBox)
    window.activateWindow()
    combo.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.waitUntil(combo.hasFocus)
    before = combo.currentIndex()
    qtbot.keyClick(combo, Qt.Key.Key_Down if before == 0 else Qt.Key.Key_Up)
    assert combo.currentIndex() != before
