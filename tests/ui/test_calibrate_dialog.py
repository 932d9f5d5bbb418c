"""Model ▸ Calibrate limits… on the bundled anomaly demo (a copy: writes never touch the repository's sidecar): the
dialog shows what app.runs.calibrate.band.calibrate gives for the same folders and seed, in the CLI's words, with the
`--plot` figure; Write puts the limits and their provenance into the sidecar and the viewer judges by them at once
(banner, badges, filters, histogram); bad folders are one line each; Cancel stops; closing the window mid-run ends
cleanly; the viewer answers while a calibration runs."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import yaml
from PySide6.QtCore import Qt, QThread
from PySide6.QtGui import QAction, QImage

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.runs.calibrate.band import Target, calibrate
from app.runs.calibrate.plot import PLOT_HW, plot_image
from app.ui.controllers.calibrator import Calibrator, calibrator_of
from app.ui.state.calibrate_messages import FOLDER_NAMES
from tests.calibrate_fixtures import copy_demo, write_surfaces

TIMEOUT = 60_000
COUNT, SEED = 16, 3  # 8 + 8 to choose on: seed 3 gives a REVIEW band with parts in it (ok_004, ng_005, …)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrate_sets")
    return (write_surfaces(root / "ok", COUNT, defective=False), write_surfaces(root / "ng", COUNT, defective=True))


@pytest.fixture(scope="module")
def expected(sets, tmp_path_factory):
    """What app.runs.calibrate.band.calibrate gives for the sets at SEED on the CPU (the dialog's defaults
    otherwise)."""
    model = open_session(load_spec(copy_demo(tmp_path_factory.mktemp("expected"))), "cpu")
    return calibrate(model, *sets, target=Target.chosen(max_fnr=0.01), fraction=0.5, seed=SEED, names=FOLDER_NAMES)


@pytest.fixture
def window(make_main_window, tmp_path):
    (tmp_path / "model").mkdir()
    return make_main_window(copy_demo(tmp_path / "model"))


def _dialog(window, ok, ng, *, seed=SEED):
    dialog = calibrator_of(window).open_dialog()
    assert dialog is not None
    dialog.set_folders(str(ok), str(ng))
    dialog.set_split(0.5, seed)
    return dialog


def _calibrated(qtbot, window, ok, ng):
    dialog = _dialog(window, ok, ng)
    with qtbot.waitSignal(calibrator_of(window).finished, timeout=TIMEOUT) as finished:
        dialog._calibrate.click()
    assert finished.args == [""], dialog.line()
    return dialog


def _pixels(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, : 3 * image.width()].reshape(image.height(), image.width(), 3)


def test_the_dialog_shows_what_calibrate_gives_in_the_clis_words_with_its_plot(qtbot, window, sets, expected):
    dialog = _calibrated(qtbot, window, *sets)
    shown = calibrator_of(window)._shown[0].result
    assert shown.limits == expected.limits and shown.measured == expected.measured
    assert expected.limits.review is not None  # a band: both limits are reported
    lines = dialog.report_text().splitlines()
    assert lines == [*expected.report(), *expected.notes()]  # the CLI's lines, its notes (a small set) too
    assert lines[1] == (f"limits (FNR <= 1 %, FPR <= 1 %): review_if score_above {expected.limits.review:.6g}, "
                        f"fail_if score_above {expected.limits.fail:.6g}")
    assert "note: only 8 OK images to measure on: the intervals are wide" in lines
    image = dialog.plot.image()
    assert (image.height(), image.width()) == PLOT_HW
    want = plot_image(np.asarray(expected.ok.scores), np.asarray(expected.ng.scores), expected.limits,
                      title=f"{expected.name}: image scores")
    got = _pixels(image)
    assert np.array_equal(got, want) and len(np.unique(got.reshape(-1, 3), axis=0)) > 10  # the figure, not blank
    drawn = dialog.plot.drawn_rect()  # on screen at its own aspect ratio
    assert drawn.width() / drawn.height() == pytest.approx(PLOT_HW[1] / PLOT_HW[0], rel=0.01)


def test_write_changes_the_sidecar_and_the_viewer_judges_by_the_new_limits(qtbot, window, sets, expected, tmp_path):
    score = dict(zip(expected.ok.names + expected.ng.names, expected.ok.scores + expected.ng.scores, strict=True))
    in_band = sorted(name for name, s in score.items() if expected.limits.state(s) == "REVIEW")
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):  # the folder's histogram, before
        window.add_paths(list(sets))
        qtbot.waitUntil(lambda: len(window.files.paths()) == 2 * COUNT, timeout=TIMEOUT)
        window.run_all(None)
    window.panel.folder.limit_moved.emit(0.95)  # a limit dragged for this model: the calibrated one must win
    decision = window.panel.decision
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.select_path(in_band[0])
    before = decision.verdict_text()
    assert not before.startswith("REVIEW")  # the bundled sidecar has no band
    dialog = _calibrated(qtbot, window, *sets)
    sidecar = window.model_path.with_suffix(".yaml")
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):  # reloaded, and the histogram filled again
        dialog._write.click()
    verdict = yaml.safe_load(sidecar.read_text())["verdict"]
    assert verdict["fail_if"] == [{"score_above": round(expected.limits.fail, 6)}]
    assert verdict["review_if"] == [{"score_above": round(expected.limits.review, 6)}]
    calibrated = verdict["calibrated"]
    assert {"model_sha256", "date", "ok_images", "ng_images", "target", "split", "seed", "chosen_on",
            "measured"} <= calibrated.keys()
    assert (calibrated["ok_images"], calibrated["ng_images"], calibrated["seed"]) == (COUNT, COUNT, SEED)
    assert calibrated["target"] == {"max_fnr": 0.01, "max_fpr": 0.01} and len(calibrated["model_sha256"]) == 64
    assert dialog.line().startswith("Written: surface_anomaly.yaml (verdict.fail_if, verdict.review_if, ")
    qtbot.waitUntil(lambda: decision.verdict_text().startswith("REVIEW"), timeout=TIMEOUT)
    assert decision.verdict_text() != before
    files = window.files
    assert [files.verdict(p) for p in files.paths()] == [expected.limits.state(score[p]).lower()
                                                         for p in files.paths()]
    files.filter_box.setCurrentIndex(files.filter_box.findText("REVIEW only"))
    assert sorted(files.visible_paths()) == in_band
    assert window.state.tuning.score_limit is None  # the dragged limit forgotten (across restarts too)
    histogram = window.panel.folder.histogram
    assert histogram.lines() == [("review", pytest.approx(round(expected.limits.review, 6))),
                                 ("ng", pytest.approx(round(expected.limits.fail, 6)))]
    assert "bundled" not in str(sidecar) and sidecar.parent == tmp_path / "model"


def test_save_plot_writes_the_figure(qtbot, window, sets, tmp_path):
    _calibrated(qtbot, window, *sets)
    calibrator_of(window).save_plot(str(tmp_path / "plot"))
    import cv2

    assert cv2.imread(str(tmp_path / "plot.png")).shape[:2] == PLOT_HW


def test_bad_folders_are_one_line_each_and_a_broken_image_is_counted_as_the_cli_counts_it(qtbot, window, sets,
                                                                                         tmp_path):
    ok, ng = sets
    empty, papers, missing = tmp_path / "empty", tmp_path / "papers", tmp_path / "missing"
    empty.mkdir(), papers.mkdir()
    (papers / "notes.txt").write_text("not an image")
    controller = calibrator_of(window)
    for folders, line in (((empty, ng), f"OK folder: no images found in: {empty}"),
                          ((ok, papers), f"NG folder: no images found in: {papers}"),
                          ((ok, missing), f"NG folder {missing}: not a folder"),
                          ((ok, ok), f"OK folder and NG folder: {COUNT} images are in both (e.g. ok_000.png): a "
                                     "part is either good or defective")):
        dialog = _dialog(window, *folders)
        with qtbot.waitSignal(controller.finished, timeout=TIMEOUT) as finished:
            dialog._calibrate.click()
        assert finished.args == [line] and dialog.line() == line and "\n" not in dialog.line()
        assert dialog.plot.image() is None and not dialog._write.isEnabled()
    dialog.set_folders("", str(ng))
    dialog._calibrate.click()
    assert dialog.line() == "Choose the OK folder"
    broken = tmp_path / "ng_broken"
    write_surfaces(broken, 3, defective=True)
    (broken / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not a picture")
    dialog = _calibrated(qtbot, window, ok, broken)
    text = dialog.report_text()
    assert f"on {COUNT} OK and 3 NG images" in text  # as the CLI: scored images counted, the broken one an error
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "broken.png" in errors[0]


def _menu_action(window) -> QAction:
    menus = {action.text().replace("&", ""): action.menu() for action in window.menuBar().actions()}
    return next(action for action in menus["Model"].actions() if action.text() == "Calibrate limits…")


def test_the_model_menu_opens_it_and_without_a_model_it_is_one_line(qtbot, make_main_window, window):
    bare = make_main_window(None)
    _menu_action(bare).trigger()
    assert bare.findChild(Calibrator).dialog is None
    assert bare.status.currentMessage() == ("Calibrate limits: load a model first (an anomaly or binary "
                                            "segmentation model)")
    _menu_action(window).trigger()
    dialog = window.findChild(Calibrator).dialog
    assert dialog is not None and dialog.isVisible() and dialog.parent() is window


def _gate_at(controller: Calibrator, done: int) -> threading.Event:
    """The worker waits (on its own thread) after `done` images until the event is set."""
    gate = threading.Event()
    controller.worker.progress.connect(lambda p: p.done == done and gate.wait(30), Qt.ConnectionType.DirectConnection)
    return gate


def test_cancel_stops_and_the_viewer_answers_meanwhile(qtbot, window, sets, tmp_path):
    controller = calibrator_of(window)
    gate = _gate_at(controller, 2)
    dialog = _dialog(window, *sets)
    dialog._calibrate.click()
    qtbot.waitUntil(lambda: dialog.progress_text() == f"2 of {2 * COUNT} images scored", timeout=TIMEOUT)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):  # the inference worker is not the one busy
        window.add_paths([sets[0] / "ok_000.png"])
    with qtbot.waitSignal(controller.finished, timeout=TIMEOUT) as finished:
        dialog._cancel.click()
        gate.set()
    assert finished.args == ["Cancelled: nothing was chosen or written"]
    assert dialog.line() == "Cancelled: nothing was chosen or written" and dialog.plot.image() is None
    assert dialog._calibrate.isEnabled() and not dialog._cancel.isEnabled()
    assert "verdict" not in yaml.safe_load(window.model_path.with_suffix(".yaml").read_text())


def test_closing_the_window_mid_run_ends_cleanly(qtbot, window, sets):
    controller = calibrator_of(window)
    gate = _gate_at(controller, 2)
    dialog = _dialog(window, *sets)
    results = []
    controller.finished.connect(results.append)
    dialog._calibrate.click()
    qtbot.waitUntil(lambda: dialog.progress_text().startswith("2 of"), timeout=TIMEOUT)
    gate.set()
    window.close()  # cancels, joins the calibrate thread (the fixture checks that no thread is left running)
    assert not controller.calibrate_thread.isRunning()
    assert [t.objectName() for t in window.findChildren(QThread) if t.isRunning()] == []
    assert results == []  # nothing arrived after the window went


def test_a_model_without_an_image_score_is_one_line(qtbot, make_main_window, models):
    window = make_main_window(models("rgb_classes"))
    _menu_action(window).trigger()
    assert window.findChild(Calibrator).dialog is None
    assert window.status.currentMessage() == (
        "Calibrate limits: rgb_classes.onnx: its output is a scores output, which has no image score to calibrate "
        "(calibrate needs an anomaly, binary segmentation or instance model: NG above a score limit)")
