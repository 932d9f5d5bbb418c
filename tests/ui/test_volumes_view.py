"""Volumes in the viewer: a series is one list item, PgUp/PgDn and the slice bar step its slices under the reader's
window, orientation letters follow the geometry, and the legend fills in each class's volume in mL."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from tests.dicom_factory import CORONAL, disc_slice, write_series

TIMEOUT = 20_000


def test_a_series_is_one_item_stepped_by_slice_with_its_volume_in_ml(qtbot, make_main_window, ct_model, tmp_path):
    write_series(tmp_path / "ct", slices=6, shuffle=True, suffix="")
    write_series(tmp_path / "ct", slices=3, orientation=CORONAL, description="Coronal")
    win = make_main_window(ct_model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "ct"])
    assert win.files.count() == 2  # two series, not nine files
    texts = sorted(win.files.item(row).text() for row in range(win.files.count()))
    assert texts[0].startswith("CT · CHEST · Axial 2.5 mm (6 slices)") and "Coronal" in texts[1]
    win.files.select_path(next(p for p in win.files.paths() if win.files.volume(p).depth == 6))
    qtbot.waitUntil(lambda: win.state.on_screen is not None and win.state.on_screen.frame == 0
                    and win.files.volume(str(win.state.on_screen.path)).depth == 6, timeout=TIMEOUT)
    assert win.slices.isVisible() and "Slice 1 / 6" in win.slices.label.text() and "30.0 mm" in win.slices.label.text()
    assert win.viewer._orientation == {"left": "R", "right": "L", "top": "A", "bottom": "P"}
    assert int((win.state.on_screen.result.mask > 0).sum()) == int((disc_slice(0, 32, 32) > 0).sum())

    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        qtbot.keyClick(win.viewer, Qt.Key.Key_PageDown)  # the next slice, not the next series
    assert win.state.on_screen.frame == 1 and win.files.currentRow() == win.files.paths().index(
        str(win.state.on_screen.path))
    assert int((win.state.on_screen.result.mask > 0).sum()) == int((disc_slice(1, 32, 32) > 0).sum())
    voxels = sum(int((disc_slice(k, 32, 32) > 0).sum()) for k in range(6))
    qtbot.waitUntil(lambda: "all 6 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    assert win.panel.legend.volume_figures()[1] == f"{voxels * 2.5 * 0.7 * 0.8 / 1000:,.2f} mL"

    win.slices.slider.setValue(5)
    qtbot.waitUntil(lambda: win.state.on_screen.frame == 5, timeout=TIMEOUT)
    assert "Slice 6 / 6" in win.slices.label.text()


def test_a_gap_is_shown_with_the_volume(qtbot, make_main_window, ct_model, tmp_path):
    write_series(tmp_path / "gap", slices=5, gap_after=1)
    win = make_main_window(ct_model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "gap"])
    assert win.slices.warnings.isVisible() and "gap between slices 2 and 3" in win.slices.warnings.text()
    assert np.isclose(win.files.volume(win.files.paths()[0]).spacing[0], 2.5)


def test_run_on_all_exports_the_volumes_as_chosen(qtbot, make_main_window, ct_model, tmp_path):
    import csv

    import pydicom

    paths = write_series(tmp_path / "in" / "ct", slices=4)
    win = make_main_window(ct_model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "in"])
    with qtbot.waitSignal(win.run_all_finished, timeout=TIMEOUT) as done:
        win.run_all(tmp_path / "out", volumes={"exports": ("dicom-seg", "nifti"), "per_slice": True,
                                                "opacity": 0.5, "anonymize": False})
    summary, report = done.args
    assert summary.ok == 1 and summary.failed == 0
    uid = str(pydicom.dcmread(paths[0]).SeriesInstanceUID)
    assert (tmp_path / "out" / "ct" / f"{uid}_seg.dcm").is_file()
    assert (tmp_path / "out" / "ct" / f"{uid}_mask.nii.gz").is_file()
    with open(report, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0]["slices"] == "4" and [r["slice"] for r in rows[1:]] == ["1", "2", "3", "4"]


def test_patient_fields_stay_out_of_the_log_file(qtbot, make_main_window, ct_model, tmp_path):
    import logging

    from app.logs import log_file, setup_file_logging

    setup_file_logging(logging.INFO)  # as the app does (INFO unless SEGLENS_LOG_LEVEL=DEBUG)
    write_series(tmp_path / "ct", slices=4, patient=("Secret^Patient", "MRN-991"))
    win = make_main_window(ct_model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "ct"])
    qtbot.waitUntil(lambda: "all 4 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    assert "Secret" in win.panel.image_info.text.text()  # shown to the reader on screen …
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = log_file().read_text(encoding="utf-8")
    assert "Secret" not in text and "MRN-991" not in text  # … never written to the log
