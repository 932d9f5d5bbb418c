"""The Smart tool never logs who the patient is (issue 28): a click, an accepted proposal, a propagation and its
end on the CT sample's DICOM series (patient Ostrander^Wilhelmina), logged at DEBUG, name no one."""

from __future__ import annotations

import logging

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from ui.test_smart import at

TIMEOUT = 20_000


def test_no_patient_name_in_the_smart_tool_s_log(qtbot, make_main_window, models, tmp_path, caplog):
    from models.training.ct_sample import write_series

    paths = write_series(tmp_path / "Ostrander^Wilhelmina")  # the folder names her too: paths at DEBUG only
    caplog.set_level(logging.DEBUG)
    window = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([paths[0].parent])
    window.viewer.actual_size()
    QTest.keyClick(window, Qt.Key.Key_S)
    smart = window.editor.smart
    qtbot.waitUntil(lambda: smart.model_ready is not None, timeout=TIMEOUT)
    h, w = window.editor.mask.shape
    with qtbot.waitSignal(smart.proposal_shown, timeout=TIMEOUT):
        QTest.mouseClick(window.viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         at(window.viewer, w // 2, h // 2))
    QTest.keyClick(window, Qt.Key.Key_Return)
    QTest.keyClick(window, Qt.Key.Key_PageDown, Qt.KeyboardModifier.AltModifier)
    propagation = smart.propagation
    qtbot.waitUntil(lambda: not propagation.running, timeout=60_000)
    qtbot.waitUntil(lambda: not propagation.pending, timeout=60_000)
    lines = [r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(r.name.startswith("app.ui.controllers.smart") for r in caplog.records)  # it did log
    assert not [line for line in lines if "Ostrander" in line or "Wilhelmina" in line]
    assert not [line for line in debug if "Wilhelmina" in line and "Ostrander^Wilhelmina/" not in line]
    assert np.isfinite(smart.accepted.iou)
