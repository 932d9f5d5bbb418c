"""Correcting a mask: exact brush pixels, undo/redo bounded by deltas, flood fill; in the window, a stroke made with
synthetic mouse events, undo, and the corrected mask saved atomically into the review folder."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.ui.state.mask_edit import MaskEdit

TIMEOUT = 20_000


def brush_of_horizontal_stroke(shape, x0, x1, y, r) -> np.ndarray:
    """By hand: pixels within r of a centre (x, y), x0 ≤ x ≤ x1 — a row dy away reaches floor(√(r² − dy²))."""
    expected = np.zeros(shape, bool)
    for dy in range(-r, r + 1):
        reach = int(np.floor(np.sqrt(r * r - dy * dy)))
        expected[y + dy, x0 - reach : x1 + reach + 1] = True
    return expected


def test_a_stroke_paints_exactly_the_discs_along_it_and_undo_restores():
    edit = MaskEdit(np.zeros((40, 50), np.uint8))
    edit.begin_stroke(3, 2)
    edit.segment((10, 10), (20, 10))
    edit.segment((20, 10), (30, 10))
    assert edit.end_stroke() == (8, 8, 33, 13)
    np.testing.assert_array_equal(edit.mask == 3, brush_of_horizontal_stroke((40, 50), 10, 30, 10, 2))
    assert (edit.mask == 3).sum() == 21 + 23 + 25 + 23 + 21  # rows 8..12
    edit.undo()
    assert not edit.mask.any() and edit.can_redo
    edit.redo()
    assert (edit.mask == 3).sum() == 113


def test_undo_keeps_deltas_not_masks_and_at_most_max_steps():
    edit = MaskEdit(np.zeros((1080, 1920), np.uint8), max_steps=50)
    for i in range(60):
        edit.begin_stroke(1, 5)
        edit.segment((10 + 20 * i, 100), (10 + 20 * i, 200))
        edit.end_stroke()
    assert edit.can_undo
    assert edit.undo_bytes < 50 * 1200 * 6 + 1  # ~1,111 pixels a stroke × 6 bytes, not 50 × 2 MB
    for _ in range(50):
        assert edit.undo() is not None
    assert edit.undo() is None  # the 10 oldest strokes were dropped: their pixels stay
    assert (edit.mask == 1).any() and not edit.mask[:, 10 + 20 * 10 :].any()


def test_eraser_paints_background_and_fill_takes_a_connected_region():
    mask = np.zeros((20, 20), np.uint8)
    mask[2:8, 2:8] = 1  # one region
    mask[12:15, 12:15] = 1  # another, not touching
    edit = MaskEdit(mask)
    assert edit.fill((4, 4), 2) == (2, 2, 8, 8)
    assert (edit.mask == 2).sum() == 36 and (edit.mask == 1).sum() == 9
    edit.begin_stroke(0, 0)  # radius 0 → 1: a 3×3 plus, eraser
    edit.segment((13, 13), (13, 13))
    edit.end_stroke()
    assert (edit.mask == 1).sum() == 9 - 5
    assert edit.fill((4, 4), 2) is None  # already that label: no step


@pytest.fixture
def corrected_window(qtbot, make_main_window, models, tmp_path):
    model = models("binary_logits")
    root = tmp_path / "cases"
    (root / "sub").mkdir(parents=True)
    image = np.zeros((60, 80), np.uint8)
    image[:, 40:] = 255  # the model finds the right half
    Image.fromarray(image).save(root / "sub" / "case1.png")
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])
    window.viewer.actual_size()
    return window, root


def _at(viewer, x, y):
    from ui.test_smart import at  # the screen pixel showing image pixel (x, y)

    return at(viewer, x, y)


def test_brush_stroke_with_the_mouse_undo_and_atomic_save(qtbot, corrected_window):
    window, root = corrected_window
    viewer, editor = window.viewer, window.editor
    assert editor.start()
    window.panel.edit.set_radius(2)
    before = editor.mask.copy()
    assert before[:, 40:].all() and not before[:, :40].any()
    QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, _at(viewer, 10, 20))
    QTest.mouseMove(viewer.viewport(), _at(viewer, 30, 20))
    QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       _at(viewer, 30, 20))
    changed = editor.mask != before
    np.testing.assert_array_equal(changed, brush_of_horizontal_stroke(before.shape, 10, 30, 20, 2))
    overlay = window.viewer.overlay_item.pixmap().toImage()
    assert overlay.pixelColor(20, 20).alpha() == 255 and overlay.pixelColor(20, 30).alpha() == 0
    editor.undo()
    np.testing.assert_array_equal(editor.mask, before)
    editor.redo()
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(editor.saved, timeout=TIMEOUT) as saved:  # then compared with its new reference
        editor.save()
    written = saved.args[1]
    assert written.endswith("cases_review/sub/case1.png_mask.png")
    np.testing.assert_array_equal(np.asarray(Image.open(written)), editor.mask)
    assert not list((root.parent / "cases_review").rglob(".seglens-tmp-*"))  # nothing half-written left
    editor.stop()
    assert not viewer.editing
    view = window.state.shown  # the model's mask, measured against the correction: the stroke was missed
    np.testing.assert_array_equal(view.result.mask, before)
    assert view.scored.reference == written
    assert (view.scored.metrics.of(1).fn, view.scored.metrics.of(1).fp) == (113, 0)
    assert "case1.png_mask.png: IoU" in window.panel.decision.comparison_text()
    assert editor.start() and (editor.mask != before).sum() == 113  # editing again goes on from the correction
    editor.stop()


def test_closing_the_window_while_editing_saves_the_stroke(qtbot, corrected_window):
    """Leaving the picture or edit mode saves unsaved changes; closing the window leaves it too (was: lost)."""
    window, root = corrected_window
    viewer, editor = window.viewer, window.editor
    assert editor.start()
    window.panel.edit.set_radius(2)
    QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, _at(viewer, 10, 20))
    QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       _at(viewer, 10, 20))
    edited = editor.mask.copy()
    window.close()
    np.testing.assert_array_equal(np.asarray(Image.open(root.parent / "cases_review/sub/case1.png_mask.png")), edited)
