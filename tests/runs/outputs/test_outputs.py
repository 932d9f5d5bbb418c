"""The CSV report and --resume: every input one well-formed row, whatever its name or the model says."""

from __future__ import annotations

import csv
import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from app.inference.image.pipeline import STAGES, Result
from app.inference.image.postprocess import Prediction
from app.inference.model.builder import load_spec
from app.inference.model.spec import ClassInfo
from app.io.files import encode_png
from app.runs.folder.resume import finished_rows
from app.runs.outputs.report import ReportWriter, report_columns


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
    spelt = [f"'{text}" for text in FORMULAS[:4]] + ["\\x09=1", "\\x0d=1"]  # a TAB or CR is spelt, so runs as nothing
    assert [row[0] for row in errors] == [f"{text}.png" for text in spelt]
    assert [row[-1] for row in errors] == [f"{text}: broken" for text in spelt]
    assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") for cell in header)


def write_report(path: Path, spec, names=("a.png", "b.png")) -> None:
    with ReportWriter(path, spec) as report:
        for name in names:
            report.add_result(path.parent / name, seg_result(path.parent / name))


def test_the_report_never_writes_through_a_planted_symlink(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    out = tmp_path / "out"
    out.mkdir()
    victim, final_victim = tmp_path / "victim.txt", tmp_path / "final_victim.txt"
    victim.write_text("precious")
    final_victim.write_text("also precious")
    (out / "seglens_report.csv.partial").symlink_to(victim)
    (out / "seglens_report.csv").symlink_to(final_victim)
    write_report(out / "seglens_report.csv", spec)
    assert victim.read_text() == "precious" and final_victim.read_text() == "also precious"
    report = out / "seglens_report.csv"
    assert not report.is_symlink() and [r[0] for r in read_rows(report)[1:]] == [str(out / "a.png"), str(out / "b.png")]
    assert sorted(p.name for p in out.iterdir()) == ["seglens_report.csv"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_partial_symlink_to_dev_full_does_not_break_the_report(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    (tmp_path / "r.csv.partial").symlink_to("/dev/full")
    write_report(tmp_path / "r.csv", spec)
    assert len(read_rows(tmp_path / "r.csv")) == 3


def test_an_interrupted_report_keeps_its_partial_for_resume(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    report = ReportWriter(tmp_path / "r.csv", spec)
    report.add_result(tmp_path / "a.png", seg_result(tmp_path / "a.png"))
    assert len(read_rows(tmp_path / "r.csv.partial")) == 2  # rows are on disk as they are written
    report.close(complete=False)
    assert not (tmp_path / "r.csv").exists() and len(read_rows(tmp_path / "r.csv.partial")) == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def with_classes(spec, names):
    return dataclasses.replace(spec, classes=tuple(ClassInfo(name, (1, 2, 3)) for name in names))


def test_more_scores_than_top_k_columns_never_shift_the_row(models, tmp_path):
    spec = with_classes(load_spec(models("classifier")), ["a", "b"])  # 3 scores, columns for 2
    columns = report_columns(spec)
    assert "top2" in columns and "top3" not in columns
    predictions = (Prediction(0, "a", 0.7), Prediction(1, "b", 0.2), Prediction(2, "c", 0.1))
    result = Result(None, "classification", (4, 4), None, predictions, {s: 2.0 for s in STAGES}, "CPU")
    with ReportWriter(tmp_path / "r.csv", spec) as report:
        report.add_result(tmp_path / "x.png", result)
    header, row = read_rows(tmp_path / "r.csv")
    assert len(row) == len(header)
    cells = dict(zip(header, row, strict=True))
    assert (cells["top1"], cells["top2"], cells["decode_ms"], cells["error"]) == ("a", "b", "2.00", "")


def test_more_classes_than_label_values_never_shift_the_row(models, tmp_path):
    spec = with_classes(load_spec(models("rgb_classes")), [f"c{i}" for i in range(300)])  # > 256 label values
    mask = np.full((4, 5), 2, np.uint8)
    with ReportWriter(tmp_path / "r.csv", spec) as report:
        report.add_result(tmp_path / "x.png", seg_result(tmp_path / "x.png", mask))
    header, row = read_rows(tmp_path / "r.csv")
    assert len(row) == len(header)
    cells = dict(zip(header, row, strict=True))
    assert (cells["pixels_c2"], cells["pixels_c299"], cells["pixels_other"], cells["error"]) == ("20", "0", "0", "")


def test_resume_runs_again_an_input_whose_mask_is_empty_or_truncated(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    write_report(tmp_path / "r.csv", spec, names=("a.png", "b.png", "c.png"))
    png = encode_png(np.zeros((30, 40), np.uint8))
    masks = {name: tmp_path / f"{name}_mask.png" for name in ("a", "b", "c")}
    masks["a"].write_bytes(b"")
    masks["b"].write_bytes(png[: len(png) - 7])
    masks["c"].write_bytes(png)
    done = finished_rows(tmp_path / "r.csv", report_columns(spec), lambda p: [masks[Path(p).stem]])
    assert sorted(Path(p).name for p in done) == ["c.png"]


def test_resume_reads_only_regular_report_files_never_through_a_symlink(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_report(elsewhere / "r.csv", spec)  # a finished report of other files, planted as ours
    (tmp_path / "r.csv.partial").symlink_to(elsewhere / "r.csv")
    os.mkfifo(tmp_path / "r.csv")  # opening a FIFO to read would wait for a writer for ever
    assert finished_rows(tmp_path / "r.csv", report_columns(spec), lambda p: []) == {}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_resume_does_not_read_an_endless_device(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    (tmp_path / "r.csv.partial").symlink_to("/dev/full")  # reads as endless zeros: one line for ever
    assert finished_rows(tmp_path / "r.csv", report_columns(spec), lambda p: []) == {}


def test_a_report_that_cannot_take_its_name_is_a_one_line_output_error(models, tmp_path):
    from app.errors import OutputError

    report = ReportWriter(tmp_path / "r.csv", load_spec(models("rgb_classes")))
    (tmp_path / "r.csv.partial").unlink()  # removed by someone else during the run
    with pytest.raises(OutputError, match=r"r\.csv\.partial: "):
        report.close()
