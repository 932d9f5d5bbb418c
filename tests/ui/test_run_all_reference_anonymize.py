"""The viewer's Run on all against a reference folder with "De-identify every output" (issue 24 §1): the
report's reference cells, seglens_metrics_images.csv and the run record carry no input or reference name, as
`run --reference --anonymize` (they held the reference's absolute path and the inputs' patient folders)."""

from __future__ import annotations

import json

import pytest
from test_cli import read_report
from test_cli_anonymize_reports import leaks, pacs_export_with_images

TIMEOUT = 30_000
pytest.importorskip("dicognito")


def test_run_on_all_with_references_under_de_identify_names_nothing(qtbot, make_main_window, ct_model, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "0123456789abcdef0123")
    source, reference = pacs_export_with_images(tmp_path)
    window = make_main_window(ct_model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([source])
    window.set_reference_folder(reference)
    out = tmp_path / "OUT"
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT) as done:
        window.run_all(out, volumes={"exports": ("nifti",), "per_slice": False, "opacity": 0.5, "anonymize": True})
    summary, _report = done.args
    assert summary.ok == 3 and summary.failed == 0
    assert leaks(out, tmp_path) == []
    rows = read_report(out / "seglens_report.csv")
    assert sorted(row["reference"].split(":")[0].split("-")[0] for row in rows) == ["", "images/img", "reference/ref"]
    record = json.loads((out / "seglens_report.csv.run.json").read_text(encoding="utf-8"))
    assert record["reference"].startswith("reference-folder-")
