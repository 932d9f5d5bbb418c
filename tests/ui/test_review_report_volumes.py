"""File ▸ Export review report with a DICOM series in the list: the series' row has its overlay and the volume's
figures (before issue 24: "not processed: …/<SeriesUID>: file not found", no picture), the header what made the
results, and no absolute path."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from dicom_factory import write_series
from PIL import Image

TIMEOUT = 20_000


def test_a_series_in_the_viewers_report_has_its_overlay_and_figures(qtbot, make_main_window, ct_model, tmp_path):
    root = tmp_path / "batch"
    write_series(root / "ct", slices=6, suffix="")
    Image.fromarray(np.full((32, 32), 200, np.uint8)).save(root / "plain.png")
    window = make_main_window(ct_model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])
    with qtbot.waitSignal(window.reporter.report_finished, timeout=TIMEOUT) as done:
        window.export_review_report()
    ok, path = done.args
    assert ok, path
    html = Path(path).read_text(encoding="utf-8")
    assert "not processed" not in html and "file not found" not in html
    assert html.count("data:image/jpeg;base64,") == 2  # the series drawn too
    text = " ".join(re.sub(r"<[^>]+>", " ", html.replace("<wbr>", "")).split())
    assert "slices 6" in text and "shown slice 6 (most foreground)" in text  # the disc grows slice by slice
    assert re.search(r"mL disc \d+\.\d\d", text)
    assert re.search(r"Provider CPU\b", text) and "ExecutionProvider" not in text  # as every other line says it
    assert "Thresholds threshold 0.5" in text
    assert str(tmp_path) not in html
