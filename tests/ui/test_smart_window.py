"""The Smart tool and the reader's display window (issue 28): a window changed while the Smart tool is on (a preset,
W, a drag with another tool) is what the encoder sees at the next click — a new PromptKey, never the embedding of
the window shown before; and a click at image pixel (x, y) reaches the model at (x, y) at any zoom."""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest
from waiting import round_trip

from ui import test_smart_volume
from ui.test_smart import at

volume_window = test_smart_volume.volume_window  # the NIfTI ball (its own window 113/204)

TIMEOUT = 20_000


def smart_on(qtbot, window):
    QTest.keyClick(window, Qt.Key.Key_S)
    smart = window.editor.smart
    qtbot.waitUntil(lambda: smart.model_ready is not None, timeout=TIMEOUT)
    return smart


def click(qtbot, window, x, y):
    viewer, smart = window.viewer, window.editor.smart
    sent = []
    smart.decode_requested.connect(sent.append)
    try:
        with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
            QTest.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                             at(viewer, x, y))
    finally:
        smart.decode_requested.disconnect(sent.append)
    return sent[-1]


def test_a_window_changed_while_the_smart_tool_is_on_is_what_the_encoder_sees(qtbot, volume_window):
    window, _path = volume_window
    smart = smart_on(qtbot, window)
    first = click(qtbot, window, 40, 48)
    before = first.image.key.window
    assert before == window.state.display_window
    with qtbot.waitSignal(window.presenter.window_shown, timeout=TIMEOUT):
        window.presenter.set_window((60.0, 80.0))
    assert window.state.display_window == (60.0, 80.0)
    QTest.keyClick(window, Qt.Key.Key_Escape)
    runs = smart.worker.model.encoder_runs
    second = click(qtbot, window, 40, 48)
    assert second.image.key.window == (60.0, 80.0)  # a new key: the embedding of the old window is not reused
    shown = window.viewer._image_item.pixmap().toImage()
    pixels = second.image.encoder_pixels()
    assert int(pixels[48, 40]) == shown.pixelColor(40, 48).red()  # the pixels the reader sees
    assert smart.worker.model.encoder_runs == runs + 1


def test_a_click_reaches_the_model_at_the_image_pixel_under_the_mouse_at_any_zoom(qtbot, volume_window):
    """The pixel under the mouse is the one whose square [x, x+1) holds the centre of the screen pixel clicked;
    at 100% every screen pixel is one image pixel (half of them went to the pixel on their left: round(x - 0.5)
    rounds half to even)."""
    window, _path = volume_window
    smart, viewer = smart_on(qtbot, window), window.viewer
    for zoom in (0.37, 1.0, 3.3, 11.0):
        viewer.resetTransform()
        viewer.scale(zoom, zoom)
        viewer.centerOn(QPointF(40, 48))
        for dx in range(3):
            QTest.keyClick(window, Qt.Key.Key_Escape)
            where = at(viewer, 41, 47) + QPoint(dx, dx)
            centre = QPointF(where) + QPointF(0.5, 0.5)  # the screen pixel's centre
            scene = viewer.viewportTransform().inverted()[0].map(centre)
            expected = (float(math.floor(scene.x())), float(math.floor(scene.y())))
            sent = []
            smart.decode_requested.connect(sent.append)
            with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
                QTest.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, where)
            smart.decode_requested.disconnect(sent.append)
            assert [(p.x, p.y) for p in sent[-1].points] == [expected], (zoom, dx)
            mark = smart.preview._marks[0].pos()
            assert (mark.x(), mark.y()) == (expected[0] + 0.5, expected[1] + 0.5), zoom  # on that pixel's centre
    assert np.isfinite(smart.proposal.iou)


def test_a_class_chosen_while_a_proposal_is_shown_recolours_it_and_enter_adds_it_there(qtbot, volume_window):
    """The proposal is previewed in the colour of the class Enter adds it to: choosing another class while it is
    shown repaints it (it stayed in the first class's colour, and Enter painted another)."""
    from PySide6.QtWidgets import QComboBox

    window, _path = volume_window
    smart = smart_on(qtbot, window)
    click(qtbot, window, 40, 48)
    assert _shown(smart) == _near(window.editor.class_rgb())
    combo = window.panel.edit.findChildren(QComboBox)[0]  # Class
    combo.setCurrentIndex(0)
    assert window.panel.edit.label() == 0
    assert _shown(smart) == _near(window.editor.class_rgb())  # background's colour now
    assert smart.proposal is not None  # still shown: Enter adds it to the class chosen


def _shown(smart):
    """The preview's colour at the clicked pixel (40, 48), to the nearest 8."""
    item = smart.preview._proposal
    colour = item.pixmap().toImage().pixelColor(40 - int(item.pos().x()), 48 - int(item.pos().y()))
    return _near((colour.red(), colour.green(), colour.blue()))


def _near(rgb):
    return tuple(round(v / 8) for v in rgb)


def test_a_press_that_becomes_a_drag_takes_its_point_s_proposal_back_too(qtbot, volume_window):
    """While a box is drawn, the proposal of the press's point (taken back: a drag, not a click) is not shown,
    nor the one still on its way; with an earlier point, that point's proposal is shown again."""
    window, _path = volume_window
    smart, viewer = smart_on(qtbot, window), window.viewer
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         at(viewer, 30, 38))
    assert smart.preview.proposal_area > 0 and len(smart._points) == 1
    QTest.mouseMove(viewer.viewport(), at(viewer, 45, 50))
    QTest.mouseMove(viewer.viewport(), at(viewer, 52, 60))
    assert smart._points == [] and smart.proposal is None and smart.preview.proposal_area == 0
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                           at(viewer, 52, 60))
    assert smart._box is not None and smart.proposal is not None
    QTest.keyClick(window, Qt.Key.Key_Escape)
    first = click(qtbot, window, 40, 48)  # a point, then a press that becomes a drag
    QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     at(viewer, 30, 38))
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.mouseMove(viewer.viewport(), at(viewer, 52, 60))
    assert [(p.x, p.y) for p in smart._points] == [(40.0, 48.0)]
    assert [(p.x, p.y) for p in first.points] == [(40.0, 48.0)]
    QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       at(viewer, 52, 60))


def test_esc_during_a_drag_ends_the_box(qtbot, volume_window):
    window, _path = volume_window
    smart, viewer = smart_on(qtbot, window), window.viewer
    QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at(viewer, 30, 38))
    QTest.mouseMove(viewer.viewport(), at(viewer, 45, 50))
    QTest.mouseMove(viewer.viewport(), at(viewer, 52, 60))
    assert smart.preview._box.isVisible()
    QTest.keyClick(window, Qt.Key.Key_Escape)
    assert not smart.preview._box.isVisible()
    QTest.mouseMove(viewer.viewport(), at(viewer, 60, 66))
    QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       at(viewer, 60, 66))
    assert smart._box is None and not smart.prompting and not smart.preview._box.isVisible()


def test_a_proposal_on_its_way_is_not_painted_on_the_next_slice(qtbot, volume_window):
    window, path = volume_window
    smart, viewer = smart_on(qtbot, window), window.viewer
    shown = []
    smart.proposal_shown.connect(lambda *args: shown.append(args))
    with qtbot.waitSignal(smart.decode_requested, timeout=TIMEOUT):
        QTest.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         at(viewer, 40, 48))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.show_path(path, test_smart_volume.CENTRE + 5)
    round_trip(qtbot, through=smart.worker)  # the slice's proposal has come back (or not: it must not show either way)
    assert smart.proposal is None and smart.preview.proposal_area == 0 and smart.preview.marks == 0
    if window.editor.active and smart.view is not None:
        assert smart.view.frame == test_smart_volume.CENTRE + 5


def test_a_box_drawn_from_outside_the_image_is_no_point_outside_it(qtbot, volume_window):
    """A box started in the margin (to reach an object at the edge) is a box: no 'point … is outside the image'
    line for its press; a click there still says it, once the button is up."""
    window, _path = volume_window
    smart, viewer = smart_on(qtbot, window), window.viewer
    window.status.clearMessage()
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         at(viewer, -4, 30))
        QTest.mouseMove(viewer.viewport(), at(viewer, 20, 45))
        QTest.mouseMove(viewer.viewport(), at(viewer, 50, 60))
        QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                           at(viewer, 50, 60))
    assert smart._box is not None and smart.proposal is not None
    assert "outside the image" not in window.status.currentMessage()
    QTest.keyClick(window, Qt.Key.Key_Escape)
    QTest.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at(viewer, -4, 30))
    assert window.status.currentMessage() == ("point (-4, 30) is outside the image (96×96 pixels: x from 0 to 95, "
                                              "y from 0 to 95)")
    window.panel.edit.choose_prompt_model("grabcut")  # no model: a box's press is no "a point needs a model"
    qtbot.waitUntil(lambda: smart.model_ready is not None and not smart.model_ready.points, timeout=TIMEOUT)
    window.status.clearMessage()
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         at(viewer, 25, 33))
        QTest.mouseMove(viewer.viewport(), at(viewer, 40, 48))
        QTest.mouseMove(viewer.viewport(), at(viewer, 56, 64))
        QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                           at(viewer, 56, 64))
    assert window.status.currentMessage() == ""


def test_fast_clicks_show_only_newer_proposals_and_end_on_the_last(qtbot, volume_window):
    window, _path = volume_window
    smart, viewer = smart_on(qtbot, window), window.viewer
    shown = []
    smart.proposal_shown.connect(lambda request_id, _ms: shown.append(request_id))
    for k in range(15):
        QTest.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         at(viewer, 34 + k % 5 * 3, 42 + k // 5 * 3))
    qtbot.waitUntil(lambda: smart.proposal is not None and smart.proposal.request_id == smart.latest.value,
                    timeout=TIMEOUT)
    assert shown == sorted(set(shown)) and shown[-1] == smart.latest.value  # never an older one after a newer
    assert smart.preview.marks == 15 and len(smart._points) == 15


def test_enter_in_the_review_note_keeps_the_note_and_accepts_nothing(qtbot, volume_window):
    from PySide6.QtWidgets import QLineEdit

    window, _path = volume_window
    smart = smart_on(qtbot, window)
    before = window.editor.mask.copy()
    click(qtbot, window, 40, 48)
    note = window.panel.review.findChild(QLineEdit, "note")
    note.setFocus()
    qtbot.waitUntil(note.hasFocus)
    QTest.keyClicks(note, "rim missed")
    QTest.keyClick(note, Qt.Key.Key_Return)
    np.testing.assert_array_equal(window.editor.mask, before)  # not accepted
    assert smart.proposal is not None and note.text() == "rim missed"
    QTest.keyClick(note, Qt.Key.Key_Backspace)  # the field's: a letter goes, not the point
    assert note.text() == "rim misse" and len(smart._points) == 1
