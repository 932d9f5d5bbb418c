"""Ground truth in the viewer: the difference layer's colours, the metrics in the panel, a notice (not a crash) for
a missing or mis-sized reference."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from app.inference.decide.metrics import FN, TP

TIMEOUT = 20_000


@pytest.fixture
def study(tmp_path):
    images, refs = tmp_path / "images", tmp_path / "refs"
    images.mkdir()
    refs.mkdir()
    picture = np.zeros((60, 80), np.uint8)
    picture[:, 40:] = 255  # the binary model finds columns 40..79
    for name in ("good", "small", "lost"):
        Image.fromarray(picture).save(images / f"{name}.png")
    truth = np.zeros((60, 80), np.uint8)
    truth[:, 30:] = 255  # 0/255 reference of a binary model: columns 30..79
    Image.fromarray(truth).save(refs / "good_mask.png")
    Image.fromarray(truth[:30]).save(refs / "small.png")  # another size
    return images, refs


def test_difference_layer_and_metrics_against_a_reference_folder(qtbot, make_main_window, models, study):
    images, refs = study
    window = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images])
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.set_reference_folder(refs)
    metrics = window.state.shown.scored.metrics
    assert (metrics.of(1).tp, metrics.of(1).fn, metrics.of(1).fp) == (40 * 60, 10 * 60, 0)
    assert metrics.iou == pytest.approx(0.8)
    assert window.panel.decision.comparison_text().startswith("vs good_mask.png: IoU 0.800 · Dice 0.889")
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.set_layer("difference")
    codes = window.state.shown.display_codes
    assert (codes[:, 30:40] == FN).all() and (codes[:, 40:] == TP).all() and not codes[:, :30].any()
    overlay = window.viewer.overlay_item.pixmap().toImage()
    blue, green = overlay.pixelColor(35, 10), overlay.pixelColor(60, 10)
    assert (blue.red(), blue.green(), blue.blue()) == (10, 132, 255)
    assert (green.red(), green.green(), green.blue()) == (52, 199, 89)
    assert overlay.pixelColor(10, 10).alpha() == 0
    notices = ((1, "No metrics: lost.png: no reference under"), (2, "No metrics: reference small.png is 80×30"))
    for row, expected in notices:
        with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
            window.files.setCurrentRow(row)
        assert window.panel.decision.comparison_text().startswith(expected)


def test_run_on_all_with_references_sorts_the_list_worst_first(qtbot, make_main_window, models, tmp_path):
    images, refs = tmp_path / "images", tmp_path / "refs"
    images.mkdir()
    refs.mkdir()
    picture = np.zeros((20, 40), np.uint8)
    picture[:, 20:] = 255  # found: columns 20..39
    for name, start in (("a", 20), ("b", 10), ("c", 16)):  # the truth starts at `start`: IoU 1, 0.667, 0.833
        Image.fromarray(picture).save(images / f"{name}.png")
        truth = np.zeros_like(picture)
        truth[:, start:] = 1
        Image.fromarray(truth).save(refs / f"{name}.png")
    window = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images])
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.set_reference_folder(refs)
    out = tmp_path / "out"
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(out, ("mask",))
    window.files.reorder(window.state.worst_first(window.files.paths()))
    assert [p.rsplit("/", 1)[1] for p in window.files.paths()] == ["b.png", "c.png", "a.png"]
    assert window.files.current_path().endswith("a.png")  # the picture shown stays selected
    report = (out / "seglens_report.csv").read_text()
    assert "iou" in report.splitlines()[0] and (out / "seglens_metrics.csv").is_file()
