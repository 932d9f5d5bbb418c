"""The viewer's Compare all with a DICOM series in the list (issue 24 §5): the series is measured as one volume,
as `seglens-cli compare` does (tests/cli/test_compare_volumes.py); it was counted as "could not be read"."""

from __future__ import annotations

import numpy as np
from PIL import Image
from test_compare_volumes import SLICES
from test_compare_volumes import ct_blind as ct_blind  # the fixture: B, which finds nothing

from tests.dicom_factory import write_series


def test_the_viewers_compare_all_measures_a_series(qtbot, make_main_window, ct_model, ct_blind, tmp_path):
    write_series(tmp_path / "in" / "ct", slices=SLICES)
    Image.fromarray(np.full((32, 32), 10, np.uint8)).save(tmp_path / "in" / "dark.png")
    window = make_main_window(ct_model)
    with qtbot.waitSignal(window.overlay_shown, timeout=20_000):
        window.add_paths([tmp_path / "in"])
    with qtbot.waitSignal(window.comparer.model_b_changed, timeout=20_000):
        window.open_model_b(ct_blind)
    with qtbot.waitSignal(window.comparer.compare_finished, timeout=20_000) as finished:
        window.compare_all()
    assert finished.args == [True, "2 images compared"]  # the series was "could not be read"
    series = next(p for p in window.files.paths() if window.files.volume(p) is not None)
    assert window.state.agreements[series] == 0.0
    assert window.state.agreements[next(p for p in window.files.paths() if p.endswith("dark.png"))] == 1.0
