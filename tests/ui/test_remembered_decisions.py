"""The reader's pixel threshold and folder score limit are remembered per model *content* (its SHA-256), not per
file path: a retrained model copied over the old file starts at its own values (and Run on all records those);
a stored value that is not a number in range is ignored with a warning; both have a Reset and a "(model)" mark.
Settings are written to an INI file and read back by a new window, as on a restart."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QPushButton

TIMEOUT = 20_000
BINARY = ("classes:\n  - {name: background}\n  - {name: defect, color: '#ff0000'}\n"
          "verdict:\n  fail_if:\n    - {class: defect, min_area_px: 1000}\n")


@pytest.fixture
def binary(models):
    path = models("binary_logits")
    path.with_suffix(".yaml").write_text(BINARY)
    return path


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    Image.fromarray(np.tile(np.arange(256, dtype=np.uint8), (64, 1))).save(root / "a_gradient.png")
    return root


@pytest.fixture
def parts(tmp_path):
    root = tmp_path / "parts"
    root.mkdir()
    for name, level in (("p1", 40), ("p2", 100), ("p3", 150), ("p4", 230)):
        Image.fromarray(np.full((32, 32), level, np.uint8)).save(root / f"{name}.png")
    return root


def reset_button(group) -> QPushButton:
    """The group's Reset button (the threshold's or the score limit's), as the reader clicks it."""
    return group.findChild(QPushButton, "threshold_reset") or group.findChild(QPushButton, "limit_reset")


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def nudge(qtbot, window, steps: int) -> None:
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.nudge(steps)


def open_folder(qtbot, window, root) -> None:
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])


def run_all(qtbot, window, out) -> dict:
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(out, ("mask",))
    return json.loads((out / "seglens_report.csv.run.json").read_text())


# -- the pixel threshold -------------------------------------------------------------------------------------

def test_a_model_copied_over_the_file_starts_at_its_own_threshold(qtbot, make_main_window, binary, folder, models,
                                                                  tmp_path):
    window = make_main_window(binary, settings="kept.ini")
    open_folder(qtbot, window, folder)
    nudge(qtbot, window, -200)  # 0.5 → 0.3
    window.close()
    retrained = models("binary_logits", "retrained", end_with_sigmoid=True)
    shutil.copyfile(retrained, binary)  # the retrained model replaces the old file, same path, same sidecar
    again = make_main_window(binary, settings="kept.ini")
    assert again.state.tuning.threshold is None
    assert again.panel.decision.threshold_text() == "0.500 (model)"
    open_folder(qtbot, again, folder)
    record = run_all(qtbot, again, tmp_path / "out")
    assert record["threshold"] is None and record["thresholds"]["threshold"] == pytest.approx(0.5)  # not 0.3


def test_the_same_model_at_another_path_keeps_the_threshold(qtbot, make_main_window, binary, folder, tmp_path):
    window = make_main_window(binary, settings="kept.ini")
    open_folder(qtbot, window, folder)
    nudge(qtbot, window, -200)
    window.close()
    moved = tmp_path / "elsewhere" / "renamed.onnx"
    moved.parent.mkdir()
    shutil.copyfile(binary, moved)
    shutil.copyfile(binary.with_suffix(".yaml"), moved.with_suffix(".yaml"))
    again = make_main_window(moved, settings="kept.ini")
    assert again.state.tuning.threshold == pytest.approx(0.3)
    assert again.panel.decision.threshold_text() == "0.300"
    settings = QSettings(str(tmp_path / "kept.ini"), QSettings.Format.IniFormat)
    assert settings.value(f"thresholds/{sha(binary)}") == "0.3"  # the key carries no path


@pytest.mark.parametrize("stored", ["nan", "inf", "-0.2", "7", "half"])
def test_a_stored_threshold_that_is_not_in_range_is_ignored(qtbot, make_main_window, binary, tmp_path, caplog,
                                                            stored):
    settings = QSettings(str(tmp_path / "odd.ini"), QSettings.Format.IniFormat)
    settings.setValue(f"thresholds/{sha(binary)}", stored)
    settings.sync()
    with caplog.at_level(logging.WARNING):
        window = make_main_window(binary, settings="odd.ini")
    assert window.state.tuning.threshold is None
    assert window.panel.decision.threshold_text() == "0.500 (model)"
    assert any("remembered threshold" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    assert not any(str(binary.parent) in r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)


# -- the folder score limit ----------------------------------------------------------------------------------

def test_the_score_limit_is_remembered_marked_and_reset(qtbot, make_main_window, models, parts, tmp_path):
    model = models("anomaly_named")  # score = the brightest pixel / 255; NG at score >= 0.5 (the model's)
    window = make_main_window(model, settings="kept.ini")
    open_folder(qtbot, window, parts)
    run_all(qtbot, window, tmp_path / "out1")
    folder = window.panel.folder
    assert folder.limit_text() == "Score limit 0.5 (model)" and not reset_button(folder).isEnabled()
    folder.histogram.limit_moved.emit(0.35)  # what a drag emits
    assert folder.limit_text() == "Score limit 0.35" and reset_button(folder).isEnabled()
    window.close()

    again = make_main_window(model, settings="kept.ini")  # a restart
    assert again.state.tuning.score_limit == pytest.approx(0.35)
    open_folder(qtbot, again, parts)
    paths = again.files.paths()
    record = run_all(qtbot, again, tmp_path / "out2")
    assert [again.files.verdict(p) for p in paths] == ["ok", "ng", "ng", "ng"]  # judged at 0.35 from the start
    assert record["verdict_rules"] == ["image score >= 0.35"]
    assert again.panel.folder.limit_text() == "Score limit 0.35"
    reset_button(again.panel.folder).click()  # back to the model's own limit
    assert again.state.tuning.score_limit is None
    assert again.panel.folder.limit_text() == "Score limit 0.5 (model)"
    assert [again.files.verdict(p) for p in paths] == ["ok", "ok", "ng", "ng"]
    again.close()
    third = make_main_window(model, settings="kept.ini")
    assert third.state.tuning.score_limit is None


def test_the_threshold_reset_leaves_the_score_limit(qtbot, make_main_window, models, parts, tmp_path):
    model = models("anomaly_named")
    window = make_main_window(model, settings="kept.ini")
    open_folder(qtbot, window, parts)
    run_all(qtbot, window, tmp_path / "out")
    window.panel.folder.histogram.limit_moved.emit(0.35)
    nudge(qtbot, window, 100)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        reset_button(window.panel.decision).click()
    assert window.state.tuning.threshold is None and window.state.tuning.score_limit == pytest.approx(0.35)


@pytest.mark.parametrize("stored", ["nan", "-inf", "lots"])
def test_a_stored_score_limit_that_is_not_a_number_is_ignored(make_main_window, models, tmp_path, caplog, stored):
    model = models("anomaly_named")
    settings = QSettings(str(tmp_path / "odd.ini"), QSettings.Format.IniFormat)
    settings.setValue(f"score_limits/{sha(model)}", stored)
    settings.sync()
    with caplog.at_level(logging.WARNING):
        window = make_main_window(model, settings="odd.ini")
    assert window.state.tuning.score_limit is None
    assert any("remembered score limit" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)


def test_a_retrained_model_does_not_inherit_the_score_limit(qtbot, make_main_window, models, parts, tmp_path):
    model = models("anomaly_named")
    window = make_main_window(model, settings="kept.ini")
    open_folder(qtbot, window, parts)
    run_all(qtbot, window, tmp_path / "out")
    window.panel.folder.histogram.limit_moved.emit(0.35)
    window.close()
    shutil.copyfile(models("anomaly_named", "retrained", with_mask=True), model)
    again = make_main_window(model, settings="kept.ini")
    assert again.state.tuning.score_limit is None
