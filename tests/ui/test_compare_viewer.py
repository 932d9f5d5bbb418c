"""Model A against model B in the window: the second session on the same worker, agreement metrics, the
disagreement layer's colours, the split view and its draggable divider."""

from __future__ import annotations

import pytest
from conftest import stripes
from PIL import Image
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest

from app.inference.decide.metrics import BOTH_DIFFERENT, ONLY_A, ONLY_B

TIMEOUT = 20_000


@pytest.fixture
def compared(qtbot, make_main_window, models, tmp_path):
    """A = rgb_classes (red 0, green 1, blue 2); B = permuted_classes (red 1, green 2, blue 0)."""
    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(stripes(40, 60)).save(folder / "s.png")
    window = make_main_window(models("rgb_classes"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(models("permuted_classes"))
    return window


def pixel(window, x, y):
    color = window.viewer.render_scene().pixelColor(x, y)
    return color.red(), color.green(), color.blue()


def test_second_model_runs_on_the_same_worker_with_its_agreement(qtbot, compared):
    window = compared
    view = window.state.shown
    assert view.result_b is not None and window.worker.session_threads[-1] == window.worker.session_threads[0]
    assert view.agreement.iou == 0.0  # B's classes are all elsewhere
    assert "model B permuted_classes.onnx vs A: IoU 0.000" in window.panel.decision.comparison_text()
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.set_layer("disagreement")
    codes = window.state.shown.display_codes
    assert (codes[:, :20] == ONLY_B).all() and (codes[:, 20:40] == BOTH_DIFFERENT).all()
    assert (codes[:, 40:] == ONLY_A).all()
    overlay = window.viewer.overlay_item.pixmap().toImage()
    assert [overlay.pixelColor(x, 5).name() for x in (5, 30, 50)] == ["#00ffff", "#ffff00", "#ff00ff"]


def test_split_view_shows_a_left_and_b_right_of_a_draggable_divider(qtbot, compared):
    window, viewer = compared, compared.viewer
    window.panel.decision.set_split("ab")
    assert viewer.split == "ab"
    raw_blue = (0, 0, 200)
    viewer.set_split_at(0.9)  # the blue third (A: class 2, B: background) left of the divider: A's colour
    assert pixel(window, 50, 32) != raw_blue
    viewer.set_split_at(0.5)  # now right of it: model B, which paints nothing there
    assert pixel(window, 50, 32) == raw_blue
    viewer.fit_to_window()
    start = viewer.mapFromScene(QPointF(30, 20))
    QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    QTest.mouseMove(viewer.viewport(), viewer.mapFromScene(QPointF(45, 20)))
    QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       viewer.mapFromScene(QPointF(45, 20)))
    assert viewer.split_at == pytest.approx(45 / 60, abs=0.02)
    window.panel.decision.set_split("raw")  # raw image left, the overlay right
    assert pixel(window, 5, 32) == (200, 0, 0)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(None)
    assert "ab" not in window.panel.decision.offered_splits()
    assert window.state.shown.result_b is None and viewer.split == "raw"  # shown again, without model B


def test_compare_all_gives_every_image_an_agreement_for_the_sort(qtbot, compared, tmp_path):
    window = compared
    folder = tmp_path / "images"
    same = stripes(40, 60)
    same[:, :, :] = 0
    same[:, :, 1] = 200  # all green: A class 1, B class 2 → IoU 0
    Image.fromarray(same).save(folder / "t.png")
    empty = stripes(40, 60) * 0  # all black: both background everywhere → agreement 1
    Image.fromarray(empty).save(folder / "u.png")
    (folder / "v.png").write_bytes(b"not an image")
    window.add_paths([folder])
    with qtbot.waitSignal(window.comparer.compare_finished, timeout=TIMEOUT) as finished:
        window.compare_all()
    assert finished.args == [True, "3 images compared, 1 could not be read"]
    names = {p.rsplit("/", 1)[1]: v for p, v in window.state.agreements.items()}
    assert names["u.png"] == 1.0 and names["s.png"] == 0.0 and names["t.png"] == 0.0 and "v.png" not in names
    window.files.reorder(window.state.worst_first(window.files.paths(), by="agreements"))
    assert [p.rsplit("/", 1)[1] for p in window.files.paths()] == ["s.png", "t.png", "u.png", "v.png"]


def test_split_view_of_the_disagreement_layer_paints_nothing_where_the_models_agree(qtbot, make_main_window, models,
                                                                                    tmp_path):
    """Identical A and B (IoU 1.000): the disagreement layer is empty on both sides of the divider; B's side used
    to show B's mask in its class colours (orange and sky blue), read as the key's "only B"."""
    folder = tmp_path / "same"
    folder.mkdir()
    Image.fromarray(stripes(40, 60)).save(folder / "s.png")
    window = make_main_window(models("rgb_classes"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(models("permuted_classes", "same_classes", order=(0, 1, 2)))
    assert window.state.shown.agreement.iou == 1.0
    window.panel.decision.set_split("ab")
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.set_layer("disagreement")
    assert window.viewer.split == "ab" and not window.state.shown.display_codes.any()
    raw = stripes(40, 60)
    for share in (0.25, 0.75):  # dividers at x 15 and 45
        window.viewer.set_split_at(share)
        for x in (5, 30, 50):
            assert pixel(window, x, 32) == tuple(int(v) for v in raw[32, x]), (share, x)
