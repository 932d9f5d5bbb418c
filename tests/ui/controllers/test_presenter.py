"""The Presenter driven with fake widgets (no window, no thread): what a view puts in the viewer, the side panel and
the status bar; window/level answers for another picture, or older than the pixels drawn, are ignored; a failed
picture leaves nothing of the one before."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtGui import QImage

from app.inference.model.spec import ClassInfo
from app.ui.controllers.presenter import Presenter
from app.ui.state.messages import BarePicture, ViewFailed, ViewKey, WindowedImage, WindowFailed
from app.ui.state.view_state import DisplayMode
from ui.controllers.fakes import FakeSidePanel, FakeStatus, FakeViewer, ready_state, seg_view

CLASSES = (ClassInfo("background", None), ClassInfo("lesion", (255, 0, 0)))
SPEC = SimpleNamespace(classes=CLASSES, path=Path("models") / "a.onnx")


@pytest.fixture
def rig(qtbot):
    viewer, panel, status = FakeViewer(), FakeSidePanel(), FakeStatus()
    state = ready_state(SPEC)
    presenter = Presenter(state, viewer=viewer, panel=panel, status=status)
    return SimpleNamespace(presenter=presenter, state=state, viewer=viewer, panel=panel, status=status)


def painted_labels(image: QImage) -> np.ndarray:
    """The class index of each pixel of an Indexed8 overlay image."""
    return np.array([[image.pixelIndex(x, y) for x in range(image.width())] for y in range(image.height())])


def test_a_view_puts_its_picture_overlay_verdict_and_facts_on_screen(qtbot, rig):
    judgement = SimpleNamespace(verdict=None, score=0.25)
    view = seg_view(judgement=judgement)
    with qtbot.waitSignal(rig.presenter.overlay_shown) as shown:
        rig.presenter.display(view)
    assert shown.args == ["data/a.png"]
    assert rig.viewer.called("set_image") == [((6, 4),)]  # (width, height) of the full-resolution picture
    [(overlay, outline)] = rig.viewer.called("set_overlay")
    assert outline is None and (painted_labels(overlay) == view.display_mask).all()
    assert rig.viewer.called("set_split") == [(None, None, ("", ""))]
    assert rig.panel.called("show_verdict") == [(judgement,)]
    assert rig.panel.called("show_comparison") == [(None, ["background", "lesion"], None, "")]
    assert rig.panel.called("show_image_info") == [(None, None, 0, 1)]
    assert rig.panel.called("show_busy") == [(None,)]  # the model's result is here: no "Running …" line
    assert rig.status.called("show_timings") == [({"inference": 1.5},)]
    assert rig.status.called("show_image_size") == [(6, 4, None)]
    assert rig.state.on_screen is view


def test_a_decision_update_repaints_the_overlay_but_not_the_picture(rig):
    rig.presenter.display(seg_view())
    rig.viewer.calls.clear()
    mask = np.zeros((4, 6), np.uint8)
    mask[0, 0] = 1
    again = seg_view(mask=mask)
    rig.presenter.update_decision(again)
    assert "set_image" not in rig.viewer.names()  # zoom, pan and pixels stay
    [(overlay, _)] = rig.viewer.called("set_overlay")
    assert painted_labels(overlay)[0, 0] == 1 and painted_labels(overlay).sum() == 1
    assert rig.state.on_screen is again


def test_contour_mode_and_hidden_classes_repaint_the_kept_mask(rig):
    rig.presenter.display(seg_view())
    rig.presenter.restyle(mode=DisplayMode.CONTOUR)
    rig.presenter.restyle(hidden={1})
    (filled, _), (contour, _), (hidden, _) = rig.viewer.called("set_overlay")
    assert contour is not filled and hidden is contour  # the kept contour image, with another colour table
    assert QImage(hidden).color(1) >> 24 == 0  # the hidden class is transparent
    assert rig.state.overlay.mode is DisplayMode.CONTOUR and rig.state.overlay.hidden == {1}


def test_opacity_and_visibility_go_to_the_viewer_and_the_state(rig):
    rig.presenter.set_opacity(0.3)
    rig.presenter.set_overlay_visible(False)
    assert rig.viewer.called("set_overlay_opacity") == [(0.3,)]
    assert rig.viewer.called("set_overlay_visible") == [(False,)]
    assert rig.state.overlay.opacity == 0.3 and rig.state.overlay.visible is False


def test_the_ab_split_names_model_b_as_the_comparer_said(rig):
    mask_b = np.ones((4, 6), np.uint8)
    rig.presenter.set_model_b(SimpleNamespace(spec=SimpleNamespace(path=Path("models") / "b.onnx")))
    rig.presenter.display(replace(seg_view(), display_mask_b=mask_b))
    rig.presenter.set_split("ab")
    mode, overlay_b, names = rig.viewer.called("set_split")[-1]
    assert mode == "ab" and names == ("A · a.onnx", "B · b.onnx")
    assert (painted_labels(overlay_b) == 1).all()  # B's side shows B's mask


def test_the_ab_split_is_off_while_no_model_b_mask_is_there(rig):
    rig.presenter.display(seg_view())
    rig.presenter.set_split("ab")
    assert rig.viewer.called("set_split")[-1] == (None, None, ("", ""))


def test_a_picture_that_failed_unread_leaves_an_empty_canvas_saying_why_and_a_class_toggle_paints_nothing(rig):
    rig.presenter.display(seg_view())
    rig.viewer.calls.clear()
    rig.presenter.failed(ViewFailed(2, "data/b.png", "data/b.png: not an image"))
    assert rig.viewer.calls == [("clear",), ("set_notice", "b.png: not an image", True)]
    assert rig.status.messages == ["Error: data/b.png: not an image"]
    assert ("clear_result",) in rig.panel.calls and rig.panel.calls[-1] == ("show_busy", None)
    rig.presenter.restyle(hidden={1})
    assert "set_overlay" not in rig.viewer.names()  # the old mask is not painted over nothing
    assert rig.state.on_screen is None


def test_a_series_that_failed_is_named_by_its_uids_last_digits_on_the_canvas_and_in_the_status_bar(rig):
    series = "data/ct3d/1.2.826.0.1.3680043.8.498.2450617965819701885"  # <folder>/<SeriesInstanceUID>
    rig.presenter.failed(ViewFailed(2, series, f"{series}: slice 3 cannot be decoded"))
    assert rig.viewer.called("set_notice") == [("…701885 (series): slice 3 cannot be decoded", True)]
    assert rig.status.messages == ["Error: …701885 (series): slice 3 cannot be decoded"]


def test_a_picture_that_failed_after_it_was_read_stays_on_the_canvas_without_the_previous_result(rig):
    rig.presenter.display(seg_view())
    rig.viewer.calls.clear()
    picture = BarePicture(ViewKey("data/b.png"), np.zeros((2, 3), np.uint8), (20, 30))
    line = "data/b.png: remote h:1/m: no answer within 30 s (tried 4 times) — check the server or use a local device"
    rig.presenter.failed(ViewFailed(2, "data/b.png", line, picture))
    assert "clear" not in rig.viewer.names() and rig.viewer.called("set_image") == [((30, 20),)]
    assert rig.viewer.called("set_detail") == [(None, None, 1.0)] and rig.viewer.called("set_split")[-1][0] is None
    assert rig.viewer.called("set_notice") == [(line.removeprefix("data/"), True)]
    assert rig.status.messages == ["Error: b.png: no result from h:1 after 4 tries — check the server or use a "
                                   "local device"]
    rig.presenter.restyle(hidden={1})
    assert "set_overlay" not in rig.viewer.names() and rig.state.on_screen is None
    rig.presenter.display(seg_view("data/b.png"))  # its result, later: the notice goes
    assert rig.viewer.called("set_notice")[-1] == ("", False)


def test_a_failed_retune_of_the_picture_on_screen_keeps_its_pixels_and_takes_its_overlay_off(rig):
    rig.presenter.display(seg_view())
    rig.viewer.calls.clear()
    rig.presenter.failed(ViewFailed(3, "data/a.png", "data/a.png: the scores are not finite"))
    assert "clear" not in rig.viewer.names() and "set_image" not in rig.viewer.names()
    assert ("clear_overlay",) in rig.viewer.calls
    assert rig.viewer.called("set_notice") == [("a.png: the scores are not finite", True)]


def test_the_previous_pictures_window_answer_is_not_drawn_over_the_picture_wanted(qtbot, rig):
    view = high_range_view()
    rig.presenter.display(view)
    rig.state.select(ViewKey("data/b.png"))  # the reader went on; that picture failed
    picture = BarePicture(ViewKey("data/b.png"), np.zeros((2, 3), np.uint8), (2, 3))
    rig.presenter.failed(ViewFailed(2, "data/b.png", "data/b.png: broken", picture))
    with qtbot.waitSignal(rig.presenter.window_requested) as asked:  # a drag of the window: still the first's
        rig.presenter.set_window((10.0, 20.0))
    rig.viewer.calls.clear()
    image = QImage(6, 4, QImage.Format.Format_Grayscale8)
    rig.presenter.on_windowed(WindowedImage(asked.args[0].request_id, view.key, (10.0, 20.0), image))
    assert rig.viewer.calls == [] and rig.state.on_screen is None


def test_switching_models_takes_the_old_overlay_counts_and_tiles_off_and_says_so(rig):
    rig.presenter.display(seg_view())
    rig.viewer.calls.clear()
    rig.presenter.model_switching("Loading b.onnx…")
    assert rig.viewer.calls == [("clear_overlay",), ("set_notice", "", False), ("set_split", None, None, ("", "")),
                                ("set_detail", None, None, 1.0)]
    assert rig.panel.calls[-2:] == [("clear_result",), ("show_busy", "Loading b.onnx…")]


def high_range_view():
    return seg_view(raw=np.zeros((4, 6), np.float32), window=(50.0, 100.0))


def test_a_new_window_goes_to_the_display_thread_and_its_answer_replaces_only_the_pixels(qtbot, rig):
    view = high_range_view()
    rig.presenter.display(view)  # the picture's own window: the worker's pixels are shown at once
    assert rig.viewer.called("set_image") == [((6, 4),)]
    with qtbot.waitSignal(rig.presenter.window_requested) as asked:
        rig.presenter.set_window((10.0, 20.0))
    request = asked.args[0]
    assert request.key == view.key and request.window == (10.0, 20.0)
    image = QImage(6, 4, QImage.Format.Format_Grayscale8)
    with qtbot.waitSignal(rig.presenter.window_shown) as shown:
        rig.presenter.on_windowed(WindowedImage(request.request_id, view.key, (10.0, 20.0), image))
    assert shown.args == [(10.0, 20.0)]
    assert rig.viewer.called("replace_image") == [(image,)] and len(rig.viewer.called("set_image")) == 1
    assert rig.status.called("show_image_size")[-1] == (6, 4, (10.0, 20.0))
    assert rig.state.display_window == (10.0, 20.0)


def test_window_answers_for_another_picture_or_older_than_the_pixels_drawn_are_ignored(qtbot, rig):
    view = high_range_view()
    rig.presenter.display(view)
    older = []
    rig.presenter.window_requested.connect(older.append)
    rig.presenter.set_window((10.0, 20.0))
    rig.presenter.set_window((30.0, 40.0))
    first, second = older
    image = QImage(6, 4, QImage.Format.Format_Grayscale8)
    rig.presenter.on_windowed(WindowedImage(second.request_id, view.key, (30.0, 40.0), image))
    rig.presenter.on_windowed(WindowedImage(first.request_id, view.key, (10.0, 20.0), image))  # came late
    rig.presenter.on_windowed(WindowedImage(second.request_id + 1, ViewKey("data/b.png"), (1.0, 2.0), image))
    assert len(rig.viewer.called("replace_image")) == 1
    assert rig.state.display_window == (30.0, 40.0)


def test_a_window_failure_is_said_in_the_status_bar(rig):
    rig.presenter.on_window_failed(WindowFailed(3, "the display window has no width"))
    assert rig.status.messages == ["Error: the display window has no width"]
