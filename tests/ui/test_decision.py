"""Decide in the viewer: the live threshold repaints from kept scores (no model run), the probability layer is the
fixed LUT of the probability, verdict badges and their filter, the folder histogram's draggable score limit, and
the threshold remembered per model file."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from PySide6.QtWidgets import QPushButton

from app.io.render import HEATMAP_LUT, probability_levels

TIMEOUT = 20_000


def reset_button(group) -> QPushButton:
    """The group's Reset button (the threshold's or the score limit's), as the reader clicks it."""
    return group.findChild(QPushButton, "threshold_reset") or group.findChild(QPushButton, "limit_reset")


def gradient(height: int = 64) -> np.ndarray:
    """Gray columns 0..255: the binary factory model's probability is sigmoid(20·(col/255 − 0.5))."""
    return np.tile(np.arange(256, dtype=np.uint8), (height, 1))


@pytest.fixture
def binary(models):
    path = models("binary_logits")
    path.with_suffix(".yaml").write_text(
        "classes:\n  - {name: background}\n  - {name: defect, color: '#ff0000'}\n"
        "verdict:\n  fail_if:\n    - {class: defect, min_area_px: 1000}\n")
    return path


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    Image.fromarray(gradient()).save(root / "a_gradient.png")  # 128 columns × 64 rows of defect: NG
    Image.fromarray(np.full((64, 256), 20, np.uint8)).save(root / "b_dark.png")  # no defect: OK
    return root


def open_first(qtbot, window, root):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])


def retune(qtbot, window, action):
    """Do `action` (a reader's move on the decision panel) and wait for the picture decided again."""
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        action()


def foreground_columns(window) -> int:
    mask = window.state.shown.display_mask
    columns = np.flatnonzero(mask.any(axis=0))
    assert mask[:, columns].all(), "the mask is whole columns (the image is)"
    return len(columns)


def test_threshold_slider_repaints_from_kept_scores_without_a_model_run(qtbot, make_main_window, binary, folder,
                                                                         model_runs):
    window = make_main_window(binary)
    open_first(qtbot, window, folder)
    assert foreground_columns(window) == 128  # p > 0.5 ⇔ col > 127.5
    runs = len(model_runs)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.nudge(400)  # the slider: 0.5 → 0.9
    assert window.state.tuning.threshold == pytest.approx(0.9)
    assert foreground_columns(window) == 100  # p > 0.9 ⇔ 20·(col/255 − 0.5) > ln 9 ⇔ col > 155.5
    assert len(model_runs) == runs, "a threshold change must not run the model"
    assert "(model)" not in window.panel.decision.threshold_text()
    retune(qtbot, window, reset_button(window.panel.decision).click)  # Reset: the model's own value
    assert foreground_columns(window) == 128 and len(model_runs) == runs


def test_probability_layer_is_the_fixed_lut_of_the_probability(qtbot, make_main_window, binary, folder):
    window = make_main_window(binary)
    open_first(qtbot, window, folder)
    retune(qtbot, window, lambda: window.panel.decision.set_layer("probability"))
    view = window.state.shown
    columns = np.arange(256, dtype=np.float32)
    expected = probability_levels(1.0 / (1.0 + np.exp(-20.0 * (columns / 255.0 - 0.5))))
    np.testing.assert_allclose(view.display_levels[10].astype(int), expected.astype(int), atol=1)  # float16 kept
    overlay = window.viewer.overlay_item.pixmap().toImage()
    for x in (0, 120, 128, 140, 255):
        color = overlay.pixelColor(x, 10)
        assert (color.red(), color.green(), color.blue()) == tuple(HEATMAP_LUT[view.display_levels[10, x]])
    assert window.panel.decision.scale_marker() == pytest.approx(0.5)
    retune(qtbot, window, lambda: window.panel.decision.set_layer("uncertainty"))
    levels = window.state.shown.display_levels[10]
    assert levels[0] == 0 and levels[255] == 0 and levels[127] > 120  # sure at both ends, unsure in the middle


def test_verdict_badges_filter_and_reason(qtbot, make_main_window, binary, folder):
    window = make_main_window(binary)
    open_first(qtbot, window, folder)
    first, second = window.files.paths()
    assert window.files.verdict(first) == "ng"
    assert window.panel.decision.verdict_text().startswith("NG — defect component 8192 px >= 1000")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.setCurrentRow(1)
    assert window.files.verdict(second) == "ok" and window.panel.decision.verdict_text().startswith("OK")
    window.files.set_filter("ng")
    assert window.files.visible_paths() == [first]
    window.files.set_filter("ok")
    assert window.files.visible_paths() == [second]
    window.files.set_filter("all")
    # a stricter threshold: the shown file is decided again, the other's badge is marked out of date
    retune(qtbot, window, lambda: window.panel.decision.nudge(490))  # 0.5 → 0.99
    assert window.state.badge(first)[1] is True and window.state.badge(second)[1] is False


def test_threshold_is_remembered_per_model_file_and_reset(qtbot, make_main_window, binary, folder, models):
    window = make_main_window(binary, settings="kept.ini")
    open_first(qtbot, window, folder)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.nudge(-200)  # 0.5 → 0.3
    window.close()
    again = make_main_window(binary, settings="kept.ini")
    assert again.state.tuning.threshold == pytest.approx(0.3)
    assert again.panel.decision.threshold() == pytest.approx(0.3)
    other = make_main_window(models("binary_logits", name="other"), settings="kept.ini")
    assert other.state.tuning.threshold is None  # another model file starts at its own value
    reset_button(again.panel.decision).click()
    assert again.state.tuning.threshold is None
    third = make_main_window(binary, settings="kept.ini")
    assert third.state.tuning.threshold is None


def test_run_on_all_histogram_limit_rejudges_every_file(qtbot, make_main_window, models, tmp_path):
    model = models("anomaly_named")  # score = the image's brightest pixel / 255; NG at score >= 0.5
    root = tmp_path / "parts"
    root.mkdir()
    for name, level in (("p1", 40), ("p2", 100), ("p3", 150), ("p4", 230)):
        Image.fromarray(np.full((32, 32), level, np.uint8)).save(root / f"{name}.png")
    window = make_main_window(model)
    open_first(qtbot, window, root)
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(tmp_path / "out")
    paths = window.files.paths()
    assert [window.files.verdict(p) for p in paths] == ["ok", "ok", "ng", "ng"]
    scores = sorted(window.state.folder_scores())
    assert scores == pytest.approx([40 / 255, 100 / 255, 150 / 255, 230 / 255], abs=1e-3)
    panel = window.panel.folder
    assert panel.isVisibleTo(window.panel) and panel.histogram.limit() == pytest.approx(0.5)
    assert panel.counts_text().startswith("2 OK · 2 NG")
    panel.histogram.limit_moved.emit(0.35)  # what a drag emits
    assert [window.files.verdict(p) for p in paths] == ["ok", "ng", "ng", "ng"]
    assert panel.counts_text().startswith("1 OK · 3 NG")
    assert window.files.item(1).toolTip().endswith("NG: score 0.3922 >= 0.35")


def test_run_on_all_uses_the_readers_threshold_and_records_it(qtbot, make_main_window, binary, folder, tmp_path):
    import json

    from app.io.files import png_text

    window = make_main_window(binary)
    open_first(qtbot, window, folder)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.nudge(400)  # 0.5 → 0.9
    out = tmp_path / "out"
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(out, ("mask",))
    mask = np.asarray(Image.open(out / "a_gradient.png_mask.png"))
    assert np.flatnonzero(mask.any(axis=0)).tolist() == list(range(156, 256))  # p > 0.9, as on screen
    record = json.loads((out / "seglens_report.csv.run.json").read_text())
    assert record["threshold"] == pytest.approx(0.9) and record["thresholds"]["threshold"] == pytest.approx(0.9)
    stamped = json.loads(png_text(out / "a_gradient.png_mask.png")["SegLens"])
    assert stamped["thresholds"]["threshold"] == pytest.approx(0.9)
    assert window.state.badge(str(folder / "a_gradient.png"))[1] is False  # decided at the threshold now set


def test_an_argmax_on_the_device_leaves_no_scores_and_the_panel_says_so(qtbot, make_main_window, models, tmp_path):
    """The viewer keeps scores (device argmax off) unless the user asks for the argmax on the device: then there is
    nothing to decide again from, and the threshold and probability layers are not offered."""
    model = models("rgb_classes")
    window = make_main_window(model)
    assert window.summary.spec.output.kind == "scores" and window.panel.decision.threshold_kind() == "min_confidence"
    window.settings.setValue("runtime", "device_argmax=on")
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        window.open_model()
    assert window.summary.spec.output.kind == "labels"
    decision = window.panel.decision
    assert decision.threshold_kind() is None and "probability" not in decision.offered_layers()
