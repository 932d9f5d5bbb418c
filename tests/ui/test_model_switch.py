"""Switching the model: the old model's overlay leaves the screen at once, the panel says the new model is busy,
and the new model's overlay (and only it) appears when its result arrives."""

from __future__ import annotations

from conftest import stripes
from PIL import Image

TIMEOUT = 20_000


def test_the_old_overlay_is_gone_and_the_panel_says_busy_until_the_new_result(qtbot, make_main_window, models,
                                                                              tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(stripes(40, 60)).save(folder / "s.png")
    window = make_main_window(models("rgb_classes"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    overlay = window.viewer.overlay_item
    assert not overlay.pixmap().isNull() and not window.panel.busy_text()

    when_sent = []  # the screen at the moment the new model's request goes to the worker
    window.pictures.view_requested.connect(lambda _request: when_sent.append(
        (overlay.pixmap().isNull(), window.panel.busy_text(), window.panel.legend.count_text(1),
         window.status.latency.text())))
    window.open_model(models("permuted_classes", "other_model"))
    assert overlay.pixmap().isNull(), "the old model's overlay is still on screen while the new one loads"
    assert window.panel.busy_text() == "Loading other_model.onnx…"
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        pass  # the new model loads, the picture is asked for again and shown
    assert when_sent == [(True, "Running other model…", "–", "")]  # no old counts or timings either
    assert not overlay.pixmap().isNull() and not window.panel.busy_text()
    assert window.state.on_screen.result.mask[5, 5] == 1  # permuted_classes: red is class 1 (rgb_classes: 0)
