"""seglens-cli calibrate on the bundled anomaly demo model: limits for FNR <= 1 % chosen on one split hold within the
stated interval on the other, are written to the sidecar (the rest kept) and used by `run`; the plot; bad input."""

from __future__ import annotations

import json
import re
import shutil

import cv2
import numpy as np
import pytest
import yaml
from test_cli import read_report

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.model.rules import ScoreRule
from app.runs.calibrate.band import Limits
from app.runs.calibrate.plot import PLOT_HW
from tests.calibrate_fixtures import copy_demo, write_surfaces

OK_COUNT, NG_COUNT, SEED = 60, 200, 29  # 100 NG images to choose on: FNR <= 1 % allows one miss


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory):
    root = tmp_path_factory.mktemp("surfaces")
    return (write_surfaces(root / "ok", OK_COUNT, defective=False, seed=SEED),
            write_surfaces(root / "ng", NG_COUNT, defective=True, seed=SEED))


@pytest.fixture
def demo(tmp_path):
    return copy_demo(tmp_path)  # --write must not change the repository's sidecar


def _interval(out: str, name: str) -> tuple[int, int, float, float]:
    found = re.search(rf"^  {name} +(\d+)/(\d+) = [\d.]+ % \[([\d.]+) %, ([\d.]+) %\]", out, re.M)
    assert found, out
    return int(found[1]), int(found[2]), float(found[3]) / 100, float(found[4]) / 100


def test_limits_for_1_percent_fnr_hold_on_the_other_split_are_written_and_used_by_run(demo, surfaces, tmp_path,
                                                                                      capsys):
    ok, ng = surfaces
    plot = tmp_path / "plot.png"
    code = main(["calibrate", str(demo), "--ok", str(ok), "--ng", str(ng), "--max-fnr", "0.01", "--seed", "7",
                 "--write", "--plot", str(plot), "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"on {OK_COUNT} OK and {NG_COUNT} NG images (split 0.5, seed 7: limits chosen on 30 OK + 100 NG" in out
    missed, total, low, high = _interval(out, "FNR")
    assert total == NG_COUNT // 2 and low <= 0.01 <= high  # the target lies within the interval stated
    assert missed <= 3
    assert _interval(out, "REVIEW")[1] == (OK_COUNT + NG_COUNT) // 2
    assert "Clopper-Pearson" in out and "written: " in out

    sidecar = yaml.safe_load(demo.with_suffix(".yaml").read_text())
    verdict = sidecar["verdict"]
    fail, review = verdict["fail_if"][0]["score_above"], verdict["review_if"][0]["score_above"]
    assert f"review_if score_above {review:.6g}, fail_if score_above {fail:.6g}\n" in out
    calibrated = verdict["calibrated"]
    assert calibrated["ok_images"] == OK_COUNT and calibrated["ng_images"] == NG_COUNT
    assert calibrated["target"] == {"max_fnr": 0.01, "max_fpr": 0.01} and calibrated["seed"] == 7
    assert len(calibrated["model_sha256"]) == 64 and calibrated["split"] == 0.5
    # the rest of the sidecar kept: its comment, name, input, classes; image_threshold gave way to fail_if
    text = demo.with_suffix(".yaml").read_text()
    assert text.startswith("# Sidecar of surface_anomaly.onnx")
    assert sidecar["input"]["size"] == [288, 512] and sidecar["classes"][1]["name"] == "anomaly"
    assert "image_threshold" not in sidecar["output"] and sidecar["output"]["threshold"] == 0.6054
    spec = load_spec(demo)
    assert spec.verdict == (ScoreRule(fail),) and spec.review == (ScoreRule(review),)

    height, width = cv2.imread(str(plot)).shape[:2]
    assert (height, width) == PLOT_HW

    out_dir = tmp_path / "run"
    assert main(["run", str(demo), str(ok), str(ng), "--out", str(out_dir), "--save", "none", "--device", "cpu"]) == 0
    rows = read_report(out_dir / "seglens_report.csv")
    limits = Limits(fail, review)
    assert [row["verdict"] for row in rows] == [limits.state(float(row["score"])).lower() for row in rows]
    counts = {state: sum(row["verdict"] == state for row in rows) for state in ("ok", "review", "ng")}
    assert all(counts.values()), counts
    assert f"verdict: {counts['ok']} OK, {counts['review']} REVIEW, {counts['ng']} NG" in capsys.readouterr().out
    record = json.loads((out_dir / "seglens_report.csv.run.json").read_text())
    assert record["verdict_rules"] == [f"image score > {fail:g}"]
    assert record["review_rules"] == [f"image score > {review:g}"]  # the band is part of what made the rows


def test_a_few_images_still_calibrate_but_say_the_intervals_are_wide_and_a_broken_one_is_an_error_row(
        demo, surfaces, tmp_path, capsys):
    ok, ng = tmp_path / "ok3", tmp_path / "ng3"
    ok.mkdir(), ng.mkdir()
    for i in range(3):
        shutil.copy(surfaces[0] / f"ok_{i:03d}.png", ok)
        shutil.copy(surfaces[1] / f"ng_{i:03d}.png", ng)
    (ng / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not a picture")
    code = main(["calibrate", str(demo), "--ok", str(ok), "--ng", str(ng), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 1  # an input failed, as run says it
    assert "on 3 OK and 3 NG images" in captured.out
    assert "note: only 1 OK image to measure on: the intervals are wide" in captured.out
    assert "not written: add --write" in captured.out
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "broken.png" in errors[0]
    assert "verdict" not in yaml.safe_load(demo.with_suffix(".yaml").read_text())  # nothing written without --write


def test_an_empty_folder_is_one_line(demo, surfaces, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["calibrate", str(demo), "--ok", str(empty), "--ng", str(surfaces[1]), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --ok no images found in: {empty}\n"


def test_a_model_without_an_image_score_is_one_line(models, surfaces, capsys):
    model = models("rgb_classes")
    assert main(["calibrate", str(model), "--ok", str(surfaces[0]), "--ng", str(surfaces[1])]) == 2
    assert capsys.readouterr().err == (
        "error: rgb_classes.onnx: its output is a scores output, which has no image score to calibrate (calibrate "
        "needs an anomaly, binary segmentation or instance model: NG above a score limit)\n")


def test_best_f1_and_max_fpr_do_not_go_together(demo, surfaces, capsys):
    ok, ng = surfaces
    assert main(["calibrate", str(demo), "--ok", str(ok), "--ng", str(ng), "--best-f1", "--max-fpr", "0.1"]) == 2
    assert capsys.readouterr().err == (
        "error: --max-fpr goes with --max-fnr: --best-f1 chooses one limit, without a band\n")


def test_best_f1_writes_one_limit_without_a_band(demo, surfaces, capsys):
    ok, ng = surfaces
    assert main(["calibrate", str(demo), "--ok", str(ok), "--ng", str(ng), "--best-f1", "--write",
                 "--device", "cpu"]) == 0
    assert "limits (best F1): no REVIEW band, fail_if score_above " in capsys.readouterr().out
    spec = load_spec(demo)
    assert len(spec.verdict) == 1 and spec.review == ()
    assert np.isfinite(spec.verdict[0].score_above)


def test_max_fnr_0_lets_no_defect_pass_and_1_or_abc_are_one_line(demo, surfaces, capsys):
    # 0 was refused as "between 0 and 1 (exclusive)": the strictest target, and the one a line most often wants
    ok, ng = surfaces
    assert main(["calibrate", str(demo), "--ok", str(ok), "--ng", str(ng), "--max-fnr", "0", "--max-fpr", "0",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "FNR <= 0 %, FPR <= 0 %" in out
    for bad in ("1", "-1", "abc", "nan"):
        with pytest.raises(SystemExit) as caught:
            main(["calibrate", str(demo), "--ok", str(ok), "--ng", str(ng), "--max-fnr", bad])
        assert caught.value.code == 2
        assert f"argument --max-fnr: must be a share from 0 to below 1, got {bad!r}" in capsys.readouterr().err


def test_images_in_both_folders_are_refused_in_one_line(demo, surfaces, tmp_path, capsys):
    # the same folder (or one inside the other) as --ok and --ng was calibrated as if it made sense
    ok, ng = surfaces
    assert main(["calibrate", str(demo), "--ok", str(ng), "--ng", str(ng), "--device", "cpu"]) == 2
    assert capsys.readouterr().err == (
        f"error: --ok and --ng: {NG_COUNT} images are in both (e.g. {sorted(p.name for p in ng.iterdir())[0]}): "
        "a part is either good or defective\n")
    mixed = tmp_path / "mixed"
    shutil.copytree(ok, mixed)
    shutil.copy(next(ng.iterdir()), mixed / "defect.png")
    nested = mixed / "ng"
    nested.mkdir()
    shutil.copy(next(ng.iterdir()), nested / "inner.png")
    assert main(["calibrate", str(demo), "--ok", str(mixed), "--ng", str(nested), "--device", "cpu"]) == 2
    assert "error: --ok and --ng: 1 image is in both (e.g. inner.png)" in capsys.readouterr().err
