"""Decisions fail closed: a model whose output holds NaN or ±inf gives an error row — never `ok` — under every
verdict rule, for classifiers, segmentation (binary, multi-class, tiled) and anomaly models."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from app.cli import main
from app.cli.run import EXIT_SOME_FAILED

NAN, INF = float("nan"), float("inf")
CLASSES = "classes: [good, scratch, pit]\n"


def report_rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def image(path, value: int = 200, size: tuple[int, int] = (40, 40), rgb: bool = True):
    Image.fromarray(np.full((*size, 3) if rgb else size, value, np.uint8)).save(path)
    return path


def run(model, inputs, tmp_path, *extra: str) -> tuple[int, list[dict]]:
    report = tmp_path / "report.csv"
    code = main(["run", str(model), *map(str, inputs), "--out", str(tmp_path / "out"), "--report", str(report),
                 *extra])
    return code, report_rows(report)


def assert_error_row(row: dict, name: str) -> None:
    assert (row["status"], row["verdict"]) == ("error", ""), row
    assert name in row["error"] and "non-finite model output" in row["error"], row["error"]


# -- classifiers: the repro and each rule -----------------------------------------------------------

@pytest.mark.parametrize("sidecar", [
    "output:\n  min_confidence: 0.6\nverdict:\n  fail_if:\n    - {top1_in: [scratch, pit]}\n",  # the repro
    "output:\n  activation: none\n  min_confidence: 0.6\nverdict:\n  fail_if:\n    - {top1_in: [scratch, pit]}\n",
    "verdict:\n  fail_if:\n    - {score_above: 0.5}\n",
    "output:\n  min_margin: 0.2\nverdict:\n  fail_if:\n    - {score_above: 0.99}\n",
    "output:\n  min_confidence: 0.6\n",  # no verdict: the row is still no result
])
@pytest.mark.parametrize("scores", [(NAN, 0.1, 0.2), (INF, 0.1, 0.2), (-INF, 0.1, 0.2)])
def test_a_classifier_with_non_finite_output_is_an_error_row(models, tmp_path, sidecar, scores, capsys):
    model = models("constant_classifier", scores=scores)
    model.with_suffix(".yaml").write_text(CLASSES + sidecar)
    code, rows = run(model, [image(tmp_path / "part.png")], tmp_path)
    assert code == EXIT_SOME_FAILED
    assert_error_row(rows[0], "part.png")
    what = "1 NaN" if scores[0] != scores[0] else "1 +inf" if scores[0] > 0 else "1 -inf"
    assert f"constant_classifier.onnx: non-finite model output 'logits': {what} of 3 values" in rows[0]["error"]
    out = capsys.readouterr().out
    assert "verdict: 0 OK" in out or "verdict:" not in out  # never counted as OK


def test_a_classifier_broken_on_some_inputs_fails_only_those(models, tmp_path):
    model = models("nan_when_dark_classifier")
    model.with_suffix(".yaml").write_text(CLASSES + "verdict:\n  fail_if:\n    - {top1_in: [scratch, pit]}\n")
    code, rows = run(model, [image(tmp_path / "bright.png", 200), image(tmp_path / "dark.png", 10)], tmp_path)
    by_name = {row["path"].rsplit("/", 1)[-1]: row for row in rows}
    assert code == EXIT_SOME_FAILED
    assert by_name["bright.png"]["status"] == "ok" and by_name["bright.png"]["verdict"] == "ok"
    assert_error_row(by_name["dark.png"], "dark.png")
    assert "3 NaN of 3 values" in by_name["dark.png"]["error"]


# -- segmentation: NaN logits argmax to class 0 (background = "no defect") -----------------------------------

@pytest.mark.parametrize(("values", "sidecar"), [
    ((NAN,), "classes: [background, defect]\nverdict:\n  fail_if:\n    - {class: defect, min_area_px: 1}\n"),
    ((INF,), "classes: [background, defect]\nverdict:\n  fail_if:\n    - {class: defect, min_total_fraction: 0.5}\n"),
    ((NAN, 1.0, 0.0), CLASSES + "verdict:\n  fail_if:\n    - {class: scratch, min_area_px: 1}\n"),
    ((0.0, NAN, 0.0), CLASSES + "verdict:\n  fail_if:\n    - {class: scratch, min_area_px: 1}\n"),
    ((NAN,), "classes: [background, defect]\nverdict:\n  fail_if:\n    - {score_above: 0.5}\n"),
])
def test_a_segmentation_model_with_non_finite_logits_is_an_error_row(models, tmp_path, values, sidecar):
    model = models("constant_map", values=values)
    model.with_suffix(".yaml").write_text(sidecar)
    code, rows = run(model, [image(tmp_path / "part.png")], tmp_path, "--save", "mask")
    assert code == EXIT_SOME_FAILED
    assert_error_row(rows[0], "part.png")
    assert not list((tmp_path / "out").glob("part*")), "no mask is written from a broken output"


def test_a_few_nan_pixels_are_enough(models, tmp_path):
    model = models("nan_where_dark")
    model.with_suffix(".yaml").write_text("classes: [background, defect]\n"
                                          "verdict:\n  fail_if:\n    - {class: defect, min_area_px: 1000}\n")
    pixels = np.full((64, 64), 255, np.uint8)  # the model's own size: no padding (zeros, NaN here too)
    pixels[0, :3] = 0  # 3 of 4096 pixels below a quarter: NaN there
    Image.fromarray(pixels).save(tmp_path / "speck.png")
    clean = image(tmp_path / "clean.png", 255, (64, 64), rgb=False)
    code, rows = run(model, [tmp_path / "speck.png", clean], tmp_path)
    by_name = {row["path"].rsplit("/", 1)[-1]: row for row in rows}
    assert code == EXIT_SOME_FAILED
    assert_error_row(by_name["speck.png"], "speck.png")
    assert "3 NaN of 4096 values" in by_name["speck.png"]["error"]
    assert by_name["clean.png"]["verdict"] == "ng"  # the whole image is defect: the model works there


def test_a_tiled_model_with_nan_in_a_tile_is_an_error_row(models, tmp_path):
    model = models("constant_map", values=(NAN,), size=32)
    model.with_suffix(".yaml").write_text("classes: [background, defect]\ninput:\n  resize: tile\n"
                                          "verdict:\n  fail_if:\n    - {class: defect, min_area_px: 1}\n")
    code, rows = run(model, [image(tmp_path / "big.png", size=(80, 90))], tmp_path)
    assert code == EXIT_SOME_FAILED
    assert_error_row(rows[0], "big.png")


# -- anomaly models: the map and the score -------------------------------------------------------------------

@pytest.mark.parametrize(("score", "level"), [(NAN, 0.1), (INF, 0.1), (0.1, NAN), (0.1, -INF)])
def test_an_anomaly_model_with_a_non_finite_score_or_map_is_an_error_row(models, tmp_path, score, level):
    model = models("constant_anomaly", score=score, level=level)  # the default rule: score >= image threshold
    code, rows = run(model, [image(tmp_path / "part.png", rgb=False)], tmp_path)
    assert code == EXIT_SOME_FAILED
    assert_error_row(rows[0], "part.png")
    assert ("'pred_score'" if score != 0.1 else "'anomaly_map'") in rows[0]["error"]


def test_a_finite_anomaly_model_still_decides(models, tmp_path):
    model = models("constant_anomaly", score=0.9, level=0.1)
    code, rows = run(model, [image(tmp_path / "part.png", rgb=False)], tmp_path)
    assert code == 0 and rows[0]["verdict"] == "ng"


def test_a_volume_with_a_nan_slice_is_an_error_row_and_exports_nothing(models, tmp_path):
    pytest.importorskip("nibabel")
    from tests.dicom_factory import write_nifti

    folder = tmp_path / "in"
    folder.mkdir()
    write_nifti(folder / "ct.nii.gz")  # discs of 100 on 0: the dark background gives NaN logits
    model = models("nan_where_dark")
    model.with_suffix(".yaml").write_text("classes: [background, lesion]\n")
    code, rows = run(model, [folder], tmp_path, "--export", "nifti")
    assert code == EXIT_SOME_FAILED
    assert_error_row(rows[0], "ct.nii.gz")
    assert not [p.name for p in (tmp_path / "out").rglob("*.nii*")]


def test_compare_with_a_nan_model_b_is_an_error_row_not_agreement(models, tmp_path):
    a = models("constant_map", "a", values=(0.0, 1.0, 0.0))  # everything class 1
    b = models("constant_map", "b", values=(NAN, 1.0, 0.0))
    for model in (a, b):
        model.with_suffix(".yaml").write_text(CLASSES)
    out = tmp_path / "cmp"
    code = main(["compare", str(a), str(b), str(image(tmp_path / "part.png")), "--out", str(out), "--device", "cpu"])
    rows = report_rows(out / "seglens_compare.csv")
    assert code == EXIT_SOME_FAILED
    assert rows[0]["status"] == "error" and "non-finite model output" in rows[0]["error"]
