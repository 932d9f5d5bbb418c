"""seglens-cli run --reference (metrics against ground truth) and seglens-cli compare (model B against model A)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import expected_stripes, stripes
from PIL import Image
from test_cli import read_report

from app.cli import main
from app.io.render import DISAGREEMENT_COLORS


def save(path, pixels):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


@pytest.fixture
def reviewed(tmp_path):
    """Inputs with references: exact, one class partly missed (sub-folder, `_mask`), one of the wrong size,
    one without a reference and a broken image. (images folder, reference folder)"""
    images, ref = tmp_path / "images", tmp_path / "ref"
    for name in ("exact.png", "sub/partial.png", "small.png", "orphan.png"):
        save(images / name, stripes())
    (images / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    save(ref / "exact.png", expected_stripes())
    partial = expected_stripes()
    partial[:, :5] = 2  # 5 columns of class 2 the model does not find
    save(ref / "sub" / "partial_mask.png", partial)
    save(ref / "small.tif", np.zeros((5, 5), np.uint8))
    return images, ref


def test_run_with_reference_reports_metrics_and_notices(models, reviewed, tmp_path, capsys):
    images, ref = reviewed
    out = tmp_path / "out"
    code = main(["run", str(models("rgb_classes")), str(images), "--out", str(out), "--reference", str(ref),
                 "--device", "cpu"])
    assert code == 1  # the broken image; missing and mis-sized references are notices, not failures
    rows = {row["path"].split("images/")[1]: row for row in read_report(out / "seglens_report.csv")}
    assert list(rows["exact.png"])[13:19] == ["reference", "iou", "dice", "iou:class 1", "dice:class 1",
                                              "iou:class 2"]
    assert rows["exact.png"]["iou"] == "1.000000" and rows["exact.png"]["dice:class 2"] == "1.000000"
    # class 2: TP 666 (18 columns × 37), FN 185 (5 × 37) → IoU 666/851, Dice 1332/1517; class 1 perfect
    partial = rows["sub/partial.png"]
    assert partial["reference"].endswith("ref/sub/partial_mask.png")
    assert float(partial["iou:class 2"]) == pytest.approx(666 / 851, abs=1e-6)
    assert float(partial["dice:class 2"]) == pytest.approx(1332 / 1517, abs=1e-6)
    assert float(partial["iou"]) == pytest.approx((1 + 666 / 851) / 2, abs=1e-6)
    for name in ("small.png", "orphan.png", "broken.png"):
        assert rows[name]["iou"] == rows[name]["dice"] == rows[name]["iou:class 1"] == ""
    assert rows["small.png"]["status"] == rows["orphan.png"]["status"] == "ok"
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("note:")]
    assert len(notes) == 2
    assert any("small.png" in n and "5×5" in n and "53×37" in n for n in notes)
    assert any("orphan.png" in n and "no reference" in n for n in notes)
    assert "2 images scored, 2 without metrics" in captured.out and "worst IoU:" in captured.out
    summary = read_report(out / "seglens_metrics.csv")
    assert [r["class"] for r in summary] == ["(all classes)", "class 1", "class 2"]
    assert summary[2]["fn_pixels"] == "185" and summary[2]["images"] == "2"
    details = read_report(out / "seglens_metrics_images.csv")
    assert {(r["path"].split("images/")[1], r["class"]) for r in details} >= {("sub/partial.png", "class 2")}
    record = json.loads((out / "seglens_report.csv.run.json").read_text())
    assert record["reference"] == str(ref)


def test_binary_model_accepts_a_0_255_reference(models, tmp_path, capsys):
    images, ref = tmp_path / "images", tmp_path / "ref"
    ramp = np.tile(np.arange(256, dtype=np.uint8), (4, 1))
    save(images / "ramp.png", ramp)
    save(ref / "ramp.png", np.where(ramp >= 128, 255, 0).astype(np.uint8))
    out = tmp_path / "out"
    assert main(["run", str(models("binary_logits")), str(images), "--out", str(out), "--reference", str(ref),
                 "--device", "cpu"]) == 0
    row = read_report(out / "seglens_report.csv")[0]
    assert row["iou"] == "1.000000" and row["iou:class 1"] == "1.000000"


def test_a_reference_with_values_beyond_the_classes_is_a_notice(models, tmp_path, capsys):
    images, ref = tmp_path / "images", tmp_path / "ref"
    save(images / "x.png", stripes())
    save(ref / "x.png", np.full((37, 53), 9, np.uint8))
    assert main(["run", str(models("rgb_classes")), str(images), "--out", str(tmp_path / "out"),
                 "--reference", str(ref), "--device", "cpu"]) == 0
    assert "reference value 9 but the model has 3 classes" in capsys.readouterr().err


@pytest.mark.parametrize("case", ["not a folder", "resume", "classifier"])
def test_reference_usage_errors_exit_2(models, reviewed, tmp_path, capsys, case):
    images, ref = reviewed
    model = models("classifier" if case == "classifier" else "rgb_classes")
    extra = ["--resume"] if case == "resume" else []
    where = tmp_path / "nowhere" if case == "not a folder" else ref
    assert main(["run", str(model), str(images), "--out", str(tmp_path / "out"), "--reference", str(where),
                 "--device", "cpu", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --reference")


def test_compare_writes_agreement_and_disagreement_pictures(models, tmp_path, capsys):
    images = tmp_path / "images"
    save(images / "a" / "x.png", stripes())
    out = tmp_path / "out"
    a, b = models("rgb_classes"), models("permuted_classes")
    assert main(["compare", str(a), str(a), str(images), "--out", str(tmp_path / "same"), "--device", "cpu"]) == 0
    same = read_report(tmp_path / "same" / "seglens_compare.csv")[0]
    said = capsys.readouterr().out
    assert "  all identical (IoU 1.000)" in said and "worst IoU" not in said  # was "worst IoU: a/x.png 1.000"
    assert same["iou"] == "1.000000" and same["only_a_pixels"] == same["different_pixels"] == "0"
    assert main(["compare", str(a), str(b), str(images), "--out", str(out), "--device", "cpu"]) == 0
    # A: red 0, green 1, blue 2; B: red 1, green 2, blue 0 → red only B, green different, blue only A
    row = read_report(out / "seglens_compare.csv")[0]
    assert (row["only_a_pixels"], row["only_b_pixels"], row["different_pixels"]) == ("666", "629", "666")
    assert row["iou"] == "0.000000" and row["iou:class 1"] == "0.000000"
    picture = np.asarray(Image.open(out / "a" / "x.png_disagreement.png"))
    assert tuple(picture[0, 0]) == DISAGREEMENT_COLORS[2]  # red stripe: only B
    assert tuple(picture[0, 20]) == DISAGREEMENT_COLORS[3]  # green: both, different classes
    assert tuple(picture[0, 50]) == DISAGREEMENT_COLORS[1]  # blue: only A
    assert "worst IoU:" in capsys.readouterr().out
    assert (out / "seglens_metrics.csv").is_file()


def test_compare_exit_codes(models, tmp_path, capsys):
    images = tmp_path / "images"
    save(images / "x.png", stripes())
    (images / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    a = models("rgb_classes")
    assert main(["compare", str(a), str(a), str(images), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 1
    rows = read_report(tmp_path / "out" / "seglens_compare.csv")
    assert [r["status"] for r in rows] == ["error", "ok"] and "broken.png" in rows[0]["error"]
    assert "broken.png" in capsys.readouterr().err
    for other in ("binary_logits", "classifier"):  # other classes, or not a segmentation model
        assert main(["compare", str(a), str(models(other)), str(images), "--out", str(tmp_path / "o2")]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(a), str(a), str(tmp_path / "empty"), "--out", str(tmp_path / "o3")]) == 2
    assert main(["compare", str(a), str(a), str(images), "--out", str(images)]) == 2  # the input folder
    with pytest.raises(SystemExit) as usage:
        main(["compare", str(a), str(images)])  # --out missing
    assert usage.value.code == 2


@pytest.fixture
def lock_seen(monkeypatch):
    """Whether `<out>/.seglens-run.lock` was held each time the metrics files were written."""
    from app.runs.folder.metrics import MetricsSummary
    from app.runs.outputs.lock import LOCK_NAME

    seen, real_write = [], MetricsSummary.write

    def write(self, folder):
        seen.append((folder / LOCK_NAME).exists())
        return real_write(self, folder)

    monkeypatch.setattr(MetricsSummary, "write", write)
    return seen


def test_compare_writes_its_metrics_and_run_record_inside_the_lock(models, tmp_path, capsys, lock_seen):
    images, out = tmp_path / "images", tmp_path / "out"
    save(images / "x.png", stripes())
    a, b = models("rgb_classes"), models("permuted_classes")
    assert main(["compare", str(a), str(b), str(images), "--out", str(out), "--device", "cpu"]) == 0
    assert lock_seen == [True]  # written after the lock was released: another run could be writing there
    record = json.loads((out / "seglens_compare.csv.run.json").read_text())
    assert record["command"] == "compare"
    for key, model in (("model_a", a), ("model_b", b)):
        assert record[key]["model"] == model.name and record[key]["provider"] == "CPU"
        assert record[key]["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert "seglens_compare.csv.run.json" in capsys.readouterr().out


def test_run_with_reference_writes_its_metrics_inside_the_lock(models, reviewed, tmp_path, lock_seen):
    images, ref = reviewed
    main(["run", str(models("rgb_classes")), str(images), "--out", str(tmp_path / "out"), "--reference", str(ref),
          "--device", "cpu", "--no-progress"])
    assert lock_seen == [True]


def test_compare_on_a_dicom_series_compares_it_as_a_volume(models, tmp_path, capsys):
    """Was 'file not found', then 'volumes are not supported by compare': now one row measured over every voxel
    (tests/cli/test_compare_volumes.py has the figures)."""
    from tests.dicom_factory import write_series

    write_series(tmp_path / "ct", slices=3)
    a = models("rgb_classes")
    assert main(["compare", str(a), str(a), str(tmp_path / "ct"), "--out", str(tmp_path / "out"),
                 "--device", "cpu", "--no-progress"]) == 0
    (row,) = read_report(tmp_path / "out" / "seglens_compare.csv")
    assert row["status"] == "ok" and row["error"] == "" and row["iou"] == "1.000000"
    assert "not supported" not in capsys.readouterr().err
