"""A model with a REVIEW band (verdict.review_if) in the viewer: the banner says REVIEW in amber with its reason, as
the CLI's report does (not NG, which a reader of `ok` alone would show), the file list's badge and filters know it,
the folder counts count it apart and the histogram draws both limits (the fail limit stays the one dragged)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from app.ui.widgets.charts import NG_COLOR, OK_COLOR, REVIEW_COLOR

TIMEOUT = 20_000
BAND = "verdict:\n  review_if: {score_above: 0.3}\n"  # the anomaly model's own fail rule: score >= 0.5 NG


@pytest.fixture
def parts(models, tmp_path):
    """The factory anomaly model (score = the brightest pixel / 255) with a band, and three parts: OK, REVIEW, NG."""
    model = models("anomaly_named")
    model.with_suffix(".yaml").write_text(BAND)
    root = tmp_path / "parts"
    root.mkdir()
    for name, level in (("p1_ok", 40), ("p2_review", 100), ("p3_ng", 230)):
        Image.fromarray(np.full((32, 32), level, np.uint8)).save(root / f"{name}.png")
    return model, root


def run_all(qtbot, make_main_window, parts, tmp_path):
    model, root = parts
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(tmp_path / "out")
    return window


def test_a_score_in_the_band_is_review_on_screen_in_amber_with_its_reason(qtbot, make_main_window, parts, tmp_path):
    window = run_all(qtbot, make_main_window, parts, tmp_path)
    ok, review, ng = window.files.paths()
    assert [window.files.verdict(p) for p in (ok, review, ng)] == ["ok", "review", "ng"]
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.select_path(review)
    decision = window.panel.decision
    assert decision.verdict_text() == "REVIEW — score 0.3922 > 0.3\nimage score 0.3922"
    assert f"color: {REVIEW_COLOR.name()}" in decision._verdict.styleSheet()
    assert window.files.item(1).toolTip().endswith("REVIEW: score 0.3922 > 0.3")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.select_path(ng)
    assert decision.verdict_text().startswith("NG — score 0.902 >= 0.5")
    assert f"color: {NG_COLOR.name()}" in decision._verdict.styleSheet()
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.select_path(ok)
    assert decision.verdict_text().startswith("OK") and f"color: {OK_COLOR.name()}" in decision._verdict.styleSheet()


def test_the_list_filters_and_the_folder_counts_know_review(qtbot, make_main_window, parts, tmp_path):
    window = run_all(qtbot, make_main_window, parts, tmp_path)
    ok, review, ng = window.files.paths()
    files = window.files
    for which, shown in (("review", [review]), ("ng", [ng]), ("flagged", [review, ng]), ("ok", [ok])):
        files.filter_box.setCurrentIndex(files.filter_box.findText(
            {"review": "REVIEW only", "ng": "NG only", "flagged": "NG + REVIEW", "ok": "OK only"}[which]))
        assert files.visible_paths() == shown, which
    files.set_filter("all")
    folder = window.panel.folder
    assert folder.counts_text().startswith("1 OK · 1 REVIEW · 1 NG")
    assert folder.limit_text() == "Score limit 0.5 (model) · REVIEW above 0.3"


def test_the_histogram_draws_both_limits_and_drags_the_fail_one(qtbot, make_main_window, parts, tmp_path):
    window = run_all(qtbot, make_main_window, parts, tmp_path)
    histogram = window.panel.folder.histogram
    assert histogram.lines() == [("review", 0.3), ("ng", pytest.approx(0.5))]
    assert histogram.limit() == pytest.approx(0.5)  # the draggable line is the fail limit
    states = {histogram.bin_state(i) for i, count in enumerate(histogram.counts()) if count}
    assert states == {"ok", "review", "ng"}
    picture = histogram.grab().toImage()  # the REVIEW part's bar is painted amber
    plot, index = histogram._plot(), int(100 / 255 * histogram.BINS)  # the bin of score 0.392, its bar's middle
    x = round(plot.left() + (index + 0.5) * plot.width() / histogram.BINS)
    assert histogram.bin_state(index) == "review"
    assert picture.pixelColor(x, round(plot.bottom()) - 2) == REVIEW_COLOR
    histogram.limit_moved.emit(0.35)  # what a drag emits: the REVIEW part is above the fail limit now
    paths = window.files.paths()
    assert [window.files.verdict(p) for p in paths] == ["ok", "ng", "ng"]
    assert window.panel.folder.counts_text().startswith("1 OK · 0 REVIEW · 2 NG")
    assert histogram.lines() == [("review", 0.3), ("ng", 0.35)]
