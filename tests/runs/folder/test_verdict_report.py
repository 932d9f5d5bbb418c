"""The report's score / verdict / verdict_reason columns, and the run's OK/NG counts (resumed rows included)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from app.inference.image.pipeline import STAGES, Result
from app.inference.image.postprocess import Prediction
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.discover import discover
from app.runs.folder.batch import RunSummary, run_inputs
from app.runs.folder.plan import RunPlan
from app.runs.folder.resume import finished_rows
from app.runs.outputs.report import ReportWriter, report_columns

VERDICT = "verdict:\n  fail_if:\n    - {class: green, min_area_px: 50}\n"


def with_sidecar(path: Path, text: str) -> Path:
    path.with_suffix(".yaml").write_text(text)
    return path


def rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def mask_with_square(side: int) -> np.ndarray:
    mask = np.zeros((20, 20), np.uint8)
    mask[:side, :side] = 1
    return mask


def seg_result(mask: np.ndarray) -> Result:
    return Result(Path("x.png"), "segmentation", mask.shape, mask, (), dict.fromkeys(STAGES, 1.0), "CPU")


def test_the_verdict_columns_follow_height_and_error_stays_last(models):
    spec = load_spec(with_sidecar(models("rgb_classes"), f"classes: [bg, green, blue]\n{VERDICT}"))
    columns = report_columns(spec)
    assert columns[5:9] == ["height", "score", "verdict", "verdict_reason"] and columns[-1] == "error"


def test_rows_carry_the_verdict_and_stay_aligned(models, tmp_path):
    sidecar = "classes: [bg, green, '=cmd']\nverdict:\n  fail_if:\n    - {class: '=cmd', min_area_px: 9}\n"
    spec = load_spec(with_sidecar(models("rgb_classes"), sidecar))
    mask = np.zeros((20, 20), np.uint8)
    mask[:3, :3] = 2
    with ReportWriter(tmp_path / "r.csv", spec) as report:
        report.add_result(Path("ng.png"), seg_result(mask))
        report.add_result(Path("ok.png"), seg_result(np.zeros((20, 20), np.uint8)))
        report.add_error(Path("bad.png"), "bad.png: cannot decode")
    header, ng, ok, bad = rows(tmp_path / "r.csv")
    assert all(len(row) == len(header) for row in (ng, ok, bad))
    at = {name: header.index(name) for name in ("score", "verdict", "verdict_reason")}
    assert (ng[at["score"]], ng[at["verdict"]]) == ("", "ng")  # a segmentation model without an image score
    assert ng[at["verdict_reason"]] == "'=cmd component 9 px >= 9"  # a class name never runs as a formula
    assert (ok[at["verdict"]], ok[at["verdict_reason"]]) == ("ok", "")
    assert [bad[i] for i in at.values()] == ["", "", ""] and bad[-1] == "bad.png: cannot decode"


def test_a_model_without_a_verdict_section_leaves_the_columns_empty_but_a_classifier_keeps_its_score(models,
                                                                                                      tmp_path):
    spec = load_spec(models("classifier"))
    result = Result(Path("x.png"), "classification", (8, 8), None, (Prediction(2, "class 2", 0.875),),
                    dict.fromkeys(STAGES, 1.0), "CPU")
    with ReportWriter(tmp_path / "r.csv", spec) as report:
        report.add_result(Path("x.png"), result)
    header, row = rows(tmp_path / "r.csv")
    values = dict(zip(header, row, strict=True))
    assert (values["score"], values["verdict"], values["verdict_reason"]) == ("0.875000", "", "")


def test_a_report_from_before_the_verdict_columns_is_not_resumed(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    old = [c for c in report_columns(spec) if c not in ("score", "verdict", "verdict_reason")]
    with open(tmp_path / "r.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([old, ["a.png", "ok", *[""] * (len(old) - 2)]])
    assert finished_rows(tmp_path / "r.csv", report_columns(spec), lambda p: []) == {}


def picture(path: Path, green_side: int) -> None:
    image = np.zeros((30, 30, 3), np.uint8)
    image[..., 0] = 200
    image[:green_side, :green_side] = (0, 200, 0)
    Image.fromarray(image).save(path)


def test_a_run_counts_ok_and_ng_and_counts_resumed_rows_again(models, tmp_path):
    model = open_session(load_spec(with_sidecar(models("rgb_classes"), f"classes: [bg, green, blue]\n{VERDICT}")),
                         "cpu")
    folder = tmp_path / "in"
    folder.mkdir()
    for name, side in (("a_ok", 7), ("b_ng", 8), ("c_ng", 20)):  # 49 px: OK; 64 and 400 px: NG
        picture(folder / f"{name}.png", side)
    inputs = discover([folder])
    plan = RunPlan(spec=model.spec, inputs=tuple(inputs), out=tmp_path / "out")
    with ReportWriter(tmp_path / "r.csv", model.spec) as report:
        summary = run_inputs(model, plan, report=report)
    assert (summary.ok, summary.failed, summary.passed, summary.rejected) == (3, 0, 1, 2)
    assert summary.verdict_line() == "verdict: 1 OK, 2 NG"
    _, *written = rows(tmp_path / "r.csv")
    done = {row[0]: row for row in written}
    with ReportWriter(tmp_path / "r2.csv", model.spec) as report:
        again = run_inputs(model, plan, report=report, done=done)
    assert (again.resumed, again.passed, again.rejected) == (3, 1, 2)


def test_no_rules_no_verdict_line():
    assert RunSummary(total=3, ok=3).verdict_line() is None
