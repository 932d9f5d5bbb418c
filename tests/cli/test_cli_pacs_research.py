"""The one send rule (app.io.pacs.nodes.send_refusal) on every path of the command line, against a real Orthanc
on loopback: `pacs send` of de-identified files to a node not marked research, and of identified files to a
research node, is one line and nothing reaches the server; `run --send RESEARCH` without --anonymize is refused
before anything is retrieved, run or written."""

from __future__ import annotations

from pathlib import Path

import pydicom
import pytest
from test_cli_pacs import STUDY, nodes, one_error, server  # noqa: F401  (fixtures: one Orthanc for this module)

from app.cli import main
from tests.dicom_factory import write_series


def _series(folder: Path, *, deidentified: bool) -> tuple[list[Path], str]:
    files = write_series(folder, slices=3, rows=16, columns=16, patient=("Roe^Rita", "PID-RULE-1"))
    if deidentified:
        for path in files:
            ds = pydicom.dcmread(path)
            ds.PatientIdentityRemoved = "YES"
            ds.save_as(path)
    return files, str(pydicom.dcmread(files[0], stop_before_pixels=True).SeriesInstanceUID)


@pytest.mark.parametrize(("node", "deidentified", "rule"), [
    ("WEB", True, "a de-identified (pseudonymised) result is sent only to a research node (research: true in its "
                  "settings): beside the identified study it would pass for another patient"),
    ("ORTHANC", True, "a de-identified (pseudonymised) result is sent only to a research node (research: true in "
                      "its settings): beside the identified study it would pass for another patient"),
    ("RESEARCH", False, "an identified result is never sent to a research node (research: true in its settings): "
                        "de-identify it first (--anonymize)"),
])
def test_pacs_send_against_the_rule_is_one_line_and_sends_nothing(nodes, server, tmp_path, capsys,  # noqa: F811
                                                                   node, deidentified, rule):
    files, series_uid = _series(tmp_path / "series", deidentified=deidentified)
    assert main(["pacs", "send", node, str(tmp_path / "series")]) == 2
    assert one_error(capsys.readouterr().err) == f"error: pacs {node}: {files[0]}: {rule}; nothing sent"
    assert server.series_instances(series_uid) == []


@pytest.mark.parametrize(("node", "deidentified"), [("RESEARCH", True), ("WEB", False)])
def test_pacs_send_within_the_rule_stores(nodes, server, tmp_path, capsys, node, deidentified):  # noqa: F811
    _, series_uid = _series(tmp_path / "series", deidentified=deidentified)
    try:
        assert main(["pacs", "send", node, str(tmp_path / "series")]) == 0
        assert capsys.readouterr().out.strip() == f"3 of 3 files stored to {node}"
        assert len(server.series_instances(series_uid)) == 3
    finally:
        for item in server.request("POST", "/tools/lookup", series_uid.encode(), content_type="text/plain"):
            server.request("DELETE", f"/series/{item['ID']}")


def test_run_send_to_a_research_node_without_anonymize_is_refused_before_anything_runs(nodes, tmp_path,  # noqa: F811
                                                                                       capsys):
    out = tmp_path / "out"
    code = main(["run", "models/ct_demo.onnx", "--from", "WEB", "--study", STUDY, "--out", str(out),
                 "--export", "dicom-seg", "--send", "RESEARCH", "--device", "cpu"])
    assert code == 2
    assert one_error(capsys.readouterr().err) == (
        "error: --send RESEARCH without --anonymize: an identified result is never sent to a research node "
        "(research: true in its settings): de-identify it first (--anonymize)")
    assert not out.exists() and not nodes.exists()  # nothing retrieved, nothing written
