"""The CSV report and --resume: every input one well-formed row, whatever its name or the model says."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from app.inference.pipeline import STAGES, Result
from app.inference.postprocess import Prediction
from app.inference.spec import load_spec
from app.runs.outputs import ReportWriter


def read_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def seg_result(path: Path, mask: np.ndarray | None = None) -> Result:
    mask = np.zeros((4, 5), np.uint8) if mask is None else mask
    return Result(path, "segmentation", mask.shape, mask, (), {s: 1.0 for s in STAGES}, "CPUExecutionProvider")


def test_a_name_that_is_not_utf8_is_written_with_backslash_escapes(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/b\xe9.png"))
    with ReportWriter(tmp_path / "r.csv", spec) as report:
        report.add_result(odd, seg_result(odd))
        report.add_error(odd, f"{odd}: cannot decode")
        report.add_result(tmp_path / "c.png", seg_result(tmp_path / "c.png"))
    rows = read_rows(tmp_path / "r.csv")
    assert [r[0] for r in rows[1:]] == [f"{tmp_path}/b\\xe9.png"] * 2 + [f"{tmp_path}/c.png"]
    assert rows[2][-1] == f"{tmp_path}/b\\xe9.png: cannot decode"
    assert all(len(r) == len(rows[0]) for r in rows)


FORMULAS = ['=HYPERLINK("evil.example","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\t=1", "\r=1"]


def test_text_cells_that_a_spreadsheet_would_run_as_formulas_are_neutralised(models, tmp_path):
    from onnx_factory import class_metadata

    spec = load_spec(models("classifier", metadata=class_metadata(["=cmd|' /C calc'!A0", "@x", "ok"])))
    result = Result(None, "classification", (4, 4), None,
                    (Prediction(0, "=cmd|' /C calc'!A0", 0.9), Prediction(1, "@x", -1.5)),
                    {s: 1.0 for s in STAGES}, "CPUExecutionProvider")
    with ReportWriter(tmp_path / "r.csv", spec) as report:
        report.add_result(Path("=HYPERLINK(1).png"), result)
        for text in FORMULAS:
            report.add_error(Path(f"{text}.png"), f"{text}: broken")
    header, ok, *errors = read_rows(tmp_path / "r.csv")
    assert ok[:2] == ["'=HYPERLINK(1).png", "ok"]
    assert ok[header.index("top1")] == "'=cmd|' /C calc'!A0" and ok[header.index("top2")] == "'@x"
    assert ok[header.index("top2_score")] == "-1.500000"  # a number stays a number
    assert [row[0] for row in errors] == [f"'{text}.png" for text in FORMULAS]
    assert [row[-1] for row in errors] == [f"'{text}: broken" for text in FORMULAS]
    assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") for cell in header)
