"""The legend's whole-volume count when a slice fails (issue 24, decisions fail closed): it says the count failed,
which slice and why, and shows no partial figures as the volume's. Was: the worker logged a warning, stopped, and
the legend kept "counting… 2 / 5 slices" with the mL of the slices counted so far."""

from __future__ import annotations

import numpy as np

from tests.dicom_factory import write_series

TIMEOUT = 20_000


def test_a_nan_slice_makes_the_legend_say_the_count_failed(qtbot, make_main_window, models, tmp_path):
    import pydicom

    paths = write_series(tmp_path / "ct", slices=5)
    ds = pydicom.dcmread(paths[3])
    ds.PixelData = np.full((32, 32), -200, np.int16).tobytes()  # -1224 HU: below the range, black → NaN logits
    ds.save_as(paths[3])
    model = models("nan_where_dark")
    model.with_suffix(".yaml").write_text("classes: [background, lesion]\ninput:\n  range: [-1100, -1050]\n")
    win = make_main_window(model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "ct"])
    legend = win.panel.legend
    qtbot.waitUntil(lambda: "failed" in legend.volume_text(), timeout=TIMEOUT)
    assert legend.volume_text() == ("Whole volume: not counted — slice 4 of 5 failed: nan_where_dark.onnx: "
                                    "non-finite model output 'logits': 1024 NaN of 1024 values; the model is broken, "
                                    "so no decision is made from it")
    assert legend.volume_figures() == {}  # no mL of part of the volume on screen
