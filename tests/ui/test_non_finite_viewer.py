"""Decisions fail closed in the viewer: a picture whose model output is NaN/±inf is an error — the decision panel
shows no verdict, the top-k panel no classes (not those of the picture before), the file list no badge — and the
review report gives it a "not processed" row, never OK."""

from __future__ import annotations

import numpy as np
from PIL import Image

from app.runs.review.html import write_review_report
from app.ui.state.messages import Tuning

TIMEOUT = 20_000
CLASSES = "classes: [good, scratch, pit]\n"


def parts(tmp_path):
    root = tmp_path / "parts"
    root.mkdir()
    Image.fromarray(np.full((32, 32, 3), 200, np.uint8)).save(root / "a_bright.png")  # finite: top-1 good, OK
    Image.fromarray(np.full((32, 32, 3), 10, np.uint8)).save(root / "b_dark.png")  # NaN logits
    return root


def top_k_rows(window) -> int:
    return len(window.panel.top_classes())


def test_a_nan_classification_clears_the_verdict_and_the_top_k(qtbot, make_main_window, models, tmp_path):
    model = models("nan_when_dark_classifier")
    model.with_suffix(".yaml").write_text(CLASSES + "verdict:\n  fail_if:\n    - {top1_in: [scratch, pit]}\n")
    root = parts(tmp_path)
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])
    bright, dark = window.files.paths()
    assert window.panel.decision.verdict_text().startswith("OK") and window.files.verdict(bright) == "ok"
    assert top_k_rows(window) == 3  # three classes
    with qtbot.waitSignal(window.image_failed, timeout=TIMEOUT) as failed:
        window.files.setCurrentRow(1)
    path, message = failed.args
    assert path == dark and "b_dark.png" in message and "non-finite model output 'logits'" in message
    assert window.panel.decision.verdict_text() == ""  # not the bright part's "OK"
    assert top_k_rows(window) == 0  # nor its classes
    assert window.files.status(dark) == "error" and window.files.verdict(dark) is None
    assert "non-finite" in window.statusBar().currentMessage()


def test_nan_segmentation_logits_are_an_error_not_a_clean_part(qtbot, make_main_window, models, tmp_path):
    model = models("constant_map", values=(float("nan"),))
    model.with_suffix(".yaml").write_text("classes: [background, {name: defect, color: '#ff0000'}]\n"
                                          "verdict:\n  fail_if:\n    - {class: defect, min_area_px: 1}\n")
    root = parts(tmp_path)
    window = make_main_window(model)
    with qtbot.waitSignal(window.image_failed, timeout=TIMEOUT) as failed:
        window.add_paths([root])
    assert "non-finite model output 'scores': 1024 NaN of 1024 values" in failed.args[1]
    assert window.panel.decision.verdict_text() == ""
    assert window.files.verdict(failed.args[0]) is None and window.state.shown is None


def test_the_review_report_gives_a_nan_image_no_verdict(models, tmp_path):
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.runs.review.ground_truth import References
    from app.ui.state.messages import ListedInput, ReportRequest
    from app.ui.workers.worker_batch import report_items

    model = models("nan_when_dark_classifier")
    model.with_suffix(".yaml").write_text(CLASSES + "verdict:\n  fail_if:\n    - {score_above: 0.9}\n")
    root = parts(tmp_path)
    session = open_session(load_spec(model), "cpu")
    entries = tuple(ListedInput(str(root / name), name) for name in ("a_bright.png", "b_dark.png"))
    request = ReportRequest(entries, str(tmp_path / "r.html"), Tuning(), {}, "m", "", "0")
    bright, dark = report_items(session, request, References())
    assert bright.verdict == "ok"
    assert dark.verdict == "" and dark.overlay_png is None
    assert "not processed" in dark.verdict_reason and "non-finite model output" in dark.verdict_reason
    page = tmp_path / "report.html"
    write_review_report(page, [bright, dark], model_name=model.name, model_sha256="0" * 64,
                        seglens_version="test")
    html = page.read_text(encoding="utf-8")
    assert html.count('class="pill v-ok"') == 1  # the bright part only


def test_the_folder_histogram_leaves_out_a_score_that_is_not_finite(qtbot):
    from app.ui.widgets.charts import ScoreHistogram

    histogram = ScoreHistogram()
    qtbot.addWidget(histogram)
    histogram.resize(200, 90)
    histogram.set_scores([0.2, float("nan"), float("inf"), 0.9], 0.5)
    assert sum(histogram.counts()) == 2
    assert not histogram.grab().isNull()  # painted without raising
