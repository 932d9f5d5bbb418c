"""The Smart tool in the window, through the real bundled prompt_demo pair (issue 28): a click previews a proposal,
Enter adds it to the class as an undoable step, Esc discards, Backspace takes back a point, a right click is a
negative point; the encoder runs once per picture however many prompts, going back costs none, and the next
picture is encoded ahead (then not again); grabCut boxes without a model; refused prompts are one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLineEdit

from app.ui.workers.prompt_worker import NO_MODEL

TIMEOUT = 20_000
NONE = Qt.KeyboardModifier.NoModifier


def disc(hw=(120, 160), centre=(50, 60), r=18) -> np.ndarray:
    yy, xx = np.mgrid[: hw[0], : hw[1]]
    return (xx - centre[0]) ** 2 + (yy - centre[1]) ** 2 <= r * r


def picture(path, centre=(50, 60)) -> None:
    """A dark disc on a bright ground: the binary test model's mask is the ground (class 1), not the disc."""
    image = np.full((120, 160), 200, np.uint8)
    image[disc(centre=centre)] = 20
    Image.fromarray(image).save(path)


@pytest.fixture
def smart_window(qtbot, make_main_window, models, tmp_path):
    root = tmp_path / "cases"
    root.mkdir()
    picture(root / "a.png")
    picture(root / "b.png", centre=(100, 50))
    window = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])
    window.viewer.actual_size()
    return window


def smart_on(qtbot, window):
    """S: the Smart tool in edit mode, once its prompt model is ready."""
    QTest.keyClick(window, Qt.Key.Key_S)
    smart = window.editor.smart
    assert window.editor.active and window.panel.edit.tool() == "smart"
    qtbot.waitUntil(lambda: smart.model_ready is not None, timeout=TIMEOUT)
    return smart


def at(viewer, x, y):
    """The screen pixel showing image pixel (x, y) (its centre's; mapFromScene rounds to the pixel's corner, the
    edge between two screen pixels at 100%)."""
    p = viewer.viewportTransform().map(QPointF(x + 0.5, y + 0.5))
    return QPoint(math.floor(p.x()), math.floor(p.y()))


def click(qtbot, window, x, y, button=Qt.MouseButton.LeftButton, modifiers=NONE, *, wait=True):
    viewer, smart = window.viewer, window.editor.smart
    if not wait:
        QTest.mouseClick(viewer.viewport(), button, modifiers, at(viewer, x, y))
        return None
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT) as shown:
        QTest.mouseClick(viewer.viewport(), button, modifiers, at(viewer, x, y))
    return shown.args


def drag(qtbot, window, a, b):
    viewer, smart = window.viewer, window.editor.smart
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, NONE, at(viewer, *a))
        QTest.mouseMove(viewer.viewport(), at(viewer, (a[0] + b[0]) // 2, (a[1] + b[1]) // 2))
        QTest.mouseMove(viewer.viewport(), at(viewer, *b))
        QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, NONE, at(viewer, *b))


def next_one(prefetched) -> bool:
    """b.png, the file after a.png, encoded ahead."""
    return prefetched.key is not None and prefetched.key.path.endswith("b.png") and not prefetched.message


def iou(a, b) -> float:
    return (a & b).sum() / max(1, (a | b).sum())


def test_a_click_previews_the_proposal_and_enter_adds_it_to_the_class_undoably(qtbot, smart_window):
    window = smart_window
    smart, editor = smart_on(qtbot, window), window.editor
    before = editor.mask.copy()
    assert not before[disc()].any()  # the model missed the disc
    with qtbot.waitSignal(smart.worker.prefetched, timeout=TIMEOUT, check_params_cb=next_one):
        request_id, ms = click(qtbot, window, 50, 60)
    assert request_id > 0 and ms > 0
    proposal = smart.proposal.mask
    assert iou(proposal, disc()) > 0.8 and smart.preview.marks == 1
    assert smart.preview.proposal_area == proposal.sum()
    assert window.panel.edit._iou.text().startswith("proposal: predicted IoU 0.")
    assert window.panel.edit._model_line.text() == "Prompt demo (SAM2 layout, synthetic) · CPU"  # the window's
    np.testing.assert_array_equal(editor.mask, before)  # previewed only
    QTest.keyClick(window, Qt.Key.Key_Return)
    expected = before.copy()
    expected[proposal] = 1
    np.testing.assert_array_equal(editor.mask, expected)
    assert smart.preview.marks == 0 and smart.preview.proposal_area == 0 and not smart.prompting
    overlay = window.viewer.overlay_item.pixmap().toImage()
    assert overlay.pixelColor(50, 60).alpha() == 255  # the overlay shows the class there now
    QTest.keyClick(window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # an ordinary undo step
    np.testing.assert_array_equal(editor.mask, before)
    assert smart.worker.model.encoder_runs == 2  # a.png, and b.png ahead


def test_right_click_is_negative_backspace_takes_back_a_point_esc_discards(qtbot, smart_window):
    window = smart_window
    smart, editor = smart_on(qtbot, window), window.editor
    before = editor.mask.copy()
    with qtbot.waitSignal(smart.worker.prefetched, timeout=TIMEOUT, check_params_cb=next_one):
        click(qtbot, window, 50, 60)
    click(qtbot, window, 58, 60, Qt.MouseButton.RightButton)
    click(qtbot, window, 44, 60, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.AltModifier)
    assert [(p.x, p.y, p.label) for p in smart._points] == [(50, 60, 1), (58, 60, 0), (44, 60, 0)]
    assert smart.preview.marks == 3
    assert window.worker_thread.isRunning() and smart.worker.model.decoder_runs >= 3
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.keyClick(window, Qt.Key.Key_Backspace)
    assert [(p.x, p.y, p.label) for p in smart._points] == [(50, 60, 1), (58, 60, 0)] and smart.preview.marks == 2
    note = window.panel.review.findChild(QLineEdit, "note")
    note.setFocus()
    qtbot.waitUntil(note.hasFocus)
    QTest.keyClick(note, Qt.Key.Key_Escape)  # typing in a text field: the keys are the field's
    assert smart.proposal is not None and smart.preview.marks == 2
    window.viewer.setFocus()
    qtbot.waitUntil(window.viewer.hasFocus)
    QTest.keyClick(window, Qt.Key.Key_Escape)
    assert smart.preview.marks == 0 and smart.proposal is None and smart.preview.proposal_area == 0
    np.testing.assert_array_equal(editor.mask, before)
    assert not editor.smart._actions[0].isEnabled()  # Enter is the other widgets' again
    assert smart.worker.model.encoder_runs == 2  # however many prompts: a.png once (and b.png ahead)


def test_the_next_picture_is_encoded_ahead_and_going_back_costs_no_encoder_run(qtbot, smart_window):
    window = smart_window
    smart = smart_on(qtbot, window)
    with qtbot.waitSignal(smart.worker.prefetched, timeout=TIMEOUT, check_params_cb=next_one) as ahead:
        click(qtbot, window, 50, 60)
    assert ahead.args[0].encode_ms > 0 and smart.worker.model.encoder_runs == 2
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.step(1)
    smart = smart_on(qtbot, window)
    click(qtbot, window, 100, 50)
    assert iou(smart.proposal.mask, disc(centre=(100, 50))) > 0.8
    assert smart.worker.model.encoder_runs == 2  # b.png was prefetched: not encoded again
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.step(-1)
    smart = smart_on(qtbot, window)
    click(qtbot, window, 50, 60)
    assert smart.worker.model.encoder_runs == 2  # back to a.png: cached


def test_grabcut_boxes_without_a_model_and_a_point_is_one_line(qtbot, smart_window):
    window = smart_window
    smart, editor = smart_on(qtbot, window), window.editor
    window.panel.edit.choose_prompt_model("grabcut")
    qtbot.waitUntil(lambda: smart.model_ready is not None, timeout=TIMEOUT)  # the worker's ready, taken
    assert NO_MODEL in window.panel.edit._model_line.text()
    click(qtbot, window, 50, 60, wait=False)
    assert window.status.currentMessage() == ("no prompt model: a point needs a model — draw a box (grabCut), or "
                                              "choose a prompt model")
    assert smart.preview.marks == 0
    drag(qtbot, window, (28, 38), (72, 82))
    assert iou(smart.proposal.mask, disc()) > 0.9
    assert window.panel.edit._iou.text() == "proposal (grabCut: no IoU)"
    QTest.keyClick(window, Qt.Key.Key_Return)
    assert editor.mask[disc()].all()


def test_refused_prompts_are_one_line_and_the_editor_goes_on(qtbot, smart_window, tmp_path):
    window = smart_window
    smart = smart_on(qtbot, window)
    click(qtbot, window, 170, 60, wait=False)  # right of the 160-pixel-wide image
    assert window.status.currentMessage() == ("point (170, 60) is outside the image (160×120 pixels: x from 0 to "
                                              "159, y from 0 to 119)")
    assert smart.preview.marks == 0
    QTest.keyClick(window, Qt.Key.Key_Return)  # nothing to add: the key is not taken, nothing happens
    with qtbot.waitSignal(smart.worker.failed, timeout=TIMEOUT):
        window.panel.edit.choose_prompt_model(str(tmp_path / "missing.yaml"))
    qtbot.waitUntil(lambda: smart.model_ready is not None, timeout=TIMEOUT)
    assert window.status.currentMessage().startswith("prompt model not loaded: ")
    assert "\n" not in window.status.currentMessage() and NO_MODEL in window.panel.edit._model_line.text()
    drag(qtbot, window, (28, 38), (72, 82))  # grabCut holds the fort
    assert smart.proposal is not None


def test_shift_enter_replaces_the_class_inside_the_box_and_the_correction_is_saved(qtbot, smart_window):
    window = smart_window
    smart, editor = smart_on(qtbot, window), window.editor
    before = editor.mask.copy()
    drag(qtbot, window, (28, 38), (72, 82))  # the box's edges: x 28..73, y 38..83
    proposal = smart.proposal.mask
    QTest.keyClick(window, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    inside = np.zeros(before.shape, bool)
    inside[38:83, 28:73] = True
    expected = before.copy()
    expected[inside & ~proposal & (before == 1)] = 0  # the class inside the box: replaced by the proposal
    expected[proposal] = 1
    np.testing.assert_array_equal(editor.mask, expected)
    assert (editor.mask[~inside] == before[~inside]).all() and (editor.mask[inside] == proposal[inside]).all()
    with qtbot.waitSignal(editor.saved, timeout=TIMEOUT) as saved:  # saved as brush edits are
        editor.stop()
    np.testing.assert_array_equal(np.asarray(Image.open(saved.args[1])), expected)
