"""`seglens-cli run --reference` with an instance model: a COCO instances JSON or a YOLO dataset (Ultralytics' layout)
as ground truth — each image's precision and recall at IoU 0.5 in the report, the folder's mAP@0.5:0.95 in the
summary, the run record and seglens_metrics.csv, equal to pycocotools' COCOeval on the same files (segm for a
segment export, bbox for a detect export), and a bad reference said in one line while the run goes on.

The models answer the same three objects whatever the picture (tests/yolo_models.py): in a 320×320 picture a pit
disc in (60, 60)–(100, 100) scoring 0.9, a scratch in (60, 208)–(260, 232) scoring 0.8, a pit in (224, 64)–(256, 96)
scoring 0.6 — so every image ties with every other, and COCOeval's order (ascending image id) decides the curve.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from yolo_models import instance_model

from app.cli import main
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.runs.labels.records import image_id

SIDE = 320
NAMES = ("pit", "scratch", "stain")


def picture(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((SIDE, SIDE, 3), 90, np.uint8)).save(path)
    return path


def found_instances(model: Path):
    session = open_session(load_spec(model), "cpu")
    try:
        return run_image(session, np.full((SIDE, SIDE, 3), 90, np.uint8)).instances
    finally:
        session.close()


def rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as f:
        return {Path(row["path"]).name: row for row in csv.DictReader(f)}


def run_cli(args: list[str]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main([*args, "--device", "cpu"])
    return code, stdout.getvalue(), stderr.getvalue()


def record(out: Path) -> dict:
    return json.loads((out / "seglens_report.csv.run.json").read_text(encoding="utf-8"))["reference_metrics"]


def metrics_rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "seglens_metrics.csv", newline="", encoding="utf-8") as f:
        return {row["class"]: row for row in csv.DictReader(f)}


def cocoeval(gt: dict, detections: list[dict], iou_type: str):
    """COCOeval's AP@[.5:.95] (stats[0]) and each category's, on `gt` and `detections`."""
    coco_mod = pytest.importorskip("pycocotools.coco")
    cocoeval_mod = pytest.importorskip("pycocotools.cocoeval")
    truth = coco_mod.COCO()
    truth.dataset = gt
    with contextlib.redirect_stdout(io.StringIO()):
        truth.createIndex()
        answers = truth.loadRes(detections)
        evaluation = cocoeval_mod.COCOeval(truth, answers, iou_type)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    per_class = {}
    for k, category in enumerate(evaluation.params.catIds):
        p = evaluation.eval["precision"][:, :, k, 0, -1]
        per_class[category] = float(np.mean(p[p > -1])) if (p > -1).any() else None
    return float(evaluation.stats[0]), per_class


def square(x0: float, y0: float, x1: float, y1: float) -> list[list[float]]:
    return [[x0, y0, x1, y0, x1, y1, x0, y1]]


def annotation(number: int, image: int, category: int, box: tuple[float, float, float, float], **more) -> dict:
    x0, y0, x1, y1 = box
    return {"id": number, "image_id": image, "category_id": category, "bbox": [x0, y0, x1 - x0, y1 - y0],
            "area": (x1 - x0) * (y1 - y0), "iscrowd": 0, **more}


def test_coco_reference_segment_model_equals_cocoeval(tmp_path):
    mask_util = pytest.importorskip("pycocotools.mask")
    model = instance_model(tmp_path / "seg.onnx")
    images = tmp_path / "images"
    for name in ("sub/a.png", "b.png", "c.png", "orphan.png"):
        picture(images / name)
    # the pit in b.png as run-length (a square the 0.6 pit's disc fills 73 % of)
    square_mask = np.zeros((SIDE, SIDE), np.uint8, order="F")
    square_mask[64:96, 224:256] = 1
    rle = mask_util.encode(square_mask)
    rle["counts"] = rle["counts"].decode("ascii")
    gt = {"images": [{"id": 7, "file_name": "sub/a.png", "width": SIDE, "height": SIDE},
                     {"id": 3, "file_name": "b.png", "width": SIDE, "height": SIDE},
                     {"id": 5, "file_name": "c.png", "width": SIDE, "height": SIDE}],
          "categories": [{"id": 1, "name": "pit"}, {"id": 2, "name": "scratch"}, {"id": 3, "name": "stain"}],
          "annotations": [
              # a.png: the 0.9 pit's box (IoU 0.625 with its disc), the scratch's box, a stain nobody finds
              annotation(1, 7, 1, (60, 60, 100, 100), segmentation=square(60, 60, 100, 100)),
              annotation(2, 7, 2, (60, 208, 260, 232), segmentation=square(60, 208, 260, 232)),
              annotation(3, 7, 3, (10, 250, 40, 280), segmentation=square(10, 250, 40, 280)),
              # b.png: the 0.6 pit (run-length), a pit nobody finds
              annotation(4, 3, 1, (224, 64, 256, 96), segmentation=rle),
              annotation(5, 3, 1, (150, 10, 180, 40), segmentation=square(150, 10, 180, 40))]}
    reference = tmp_path / "instances.json"
    reference.write_text(json.dumps(gt), encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(["run", str(model), str(images), "--out", str(out), "--reference",
                                    str(reference)])
    assert code == 0, stderr
    report = rows(out)
    cells = {name: [report[name][c] for c in ("reference", "reference_instances", "matched_iou50",
                                              "precision_iou50", "recall_iou50")] for name in ("a.png", "b.png",
                                                                                               "c.png")}
    assert cells == {"a.png": ["sub/a.png", "3", "2", "0.666667", "0.666667"],  # the 0.6 pit is wrong
                     "b.png": ["b.png", "2", "1", "0.333333", "0.500000"],  # the 0.9 pit and the scratch wrong
                     "c.png": ["c.png", "0", "0", "0.000000", "1.000000"]}  # nothing to find, three found
    assert report["orphan.png"]["reference"].endswith("no image with file_name orphan.png; no metrics")
    assert "orphan.png" in stderr and "no image with file_name" in stderr

    found = found_instances(model)
    detections = []
    for number in (7, 3, 5):
        for item in found.items:
            encoded = mask_util.encode(np.asfortranarray(item.full_mask((SIDE, SIDE)).astype(np.uint8)))
            encoded["counts"] = encoded["counts"].decode("ascii")
            detections.append({"image_id": number, "category_id": item.class_index + 1, "score": item.score,
                               "segmentation": encoded})
    expected, per_class = cocoeval(gt, detections, "segm")
    kept = record(out)
    assert kept["map_50_95"] == pytest.approx(expected, abs=1e-6)
    assert 0.05 < expected < 0.95  # neither nothing nor everything: the thresholds and the ties count
    assert (kept["images_scored"], kept["images_without_metrics"]) == (3, 1)
    assert (kept["matched_iou50"], kept["found_instances"], kept["reference_instances"]) == (3, 9, 5)
    assert f"mAP@0.5:0.95 {expected:.4f}" in stdout and "3 images scored, 1 without metrics" in stdout
    table = metrics_rows(out)
    assert float(table["(all classes)"]["ap_50_95"]) == pytest.approx(expected, abs=1e-6)
    for k, name in enumerate(NAMES):
        if per_class[k + 1] is None:
            assert table[name]["ap_50_95"] == ""
        else:
            assert float(table[name]["ap_50_95"]) == pytest.approx(per_class[k + 1], abs=1e-6)


def test_coco_ties_follow_the_files_image_ids(tmp_path):
    """The same images under other ids: COCOeval orders the tied detections by id, and so does the run."""
    model = instance_model(tmp_path / "det.onnx", task="detect")
    images = tmp_path / "images"
    gt = {"images": [{"id": 1, "file_name": "a.png", "width": SIDE, "height": SIDE},
                     {"id": 2, "file_name": "b.png", "width": SIDE, "height": SIDE}],
          "categories": [{"id": 1, "name": "pit"}, {"id": 2, "name": "scratch"}],
          "annotations": [annotation(1, 1, 1, (60, 60, 100, 100)), annotation(2, 2, 1, (224, 64, 256, 96)),
                          annotation(3, 2, 1, (0, 0, 20, 20))]}
    found = found_instances(model)
    results = {}
    for order in ((1, 2), (2, 1)):
        for name in ("a.png", "b.png"):
            picture(images / name)
        renumbered = json.loads(json.dumps(gt))
        for image, number in zip(renumbered["images"], order, strict=True):
            image["id"] = number
        for item in renumbered["annotations"]:
            item["image_id"] = order[item["image_id"] - 1]
        reference = tmp_path / f"gt{order[0]}.json"
        reference.write_text(json.dumps(renumbered), encoding="utf-8")
        out = tmp_path / f"out{order[0]}"
        code, _, stderr = run_cli(["run", str(model), str(images), "--out", str(out), "--reference",
                                   str(reference)])
        assert code == 0, stderr
        detections = [{"image_id": number, "category_id": item.class_index + 1, "score": item.score,
                       "bbox": [item.box[0], item.box[1], item.box[2] - item.box[0], item.box[3] - item.box[1]]}
                      for number in order for item in found.items]
        expected, _ = cocoeval(renumbered, detections, "bbox")
        assert record(out)["map_50_95"] == pytest.approx(expected, abs=1e-6)
        results[order] = expected
    assert results[(1, 2)] != pytest.approx(results[(2, 1)], abs=1e-3)  # the ids' order changes the answer


def yolo_box(class_index: int, box: tuple[float, float, float, float]) -> str:
    x0, y0, x1, y1 = box
    return (f"{class_index} {(x0 + x1) / 2 / SIDE} {(y0 + y1) / 2 / SIDE} {(x1 - x0) / SIDE} "
            f"{(y1 - y0) / SIDE}")


def test_yolo_reference_detect_model_equals_cocoeval(tmp_path):
    """Ultralytics' layout: the run is on data/images/train, the labels in data/labels/train, data.yaml numbering
    the classes otherwise than the model does (scratch 0, pit 1)."""
    model = instance_model(tmp_path / "det.onnx", task="detect")
    data = tmp_path / "data"
    train = data / "images" / "train"
    for name in ("a.png", "b.png", "c.png"):
        picture(train / name)
    (data / "data.yaml").write_text("names:\n  0: scratch\n  1: pit\n  2: stain\n", encoding="utf-8")
    labels = data / "labels" / "train"
    labels.mkdir(parents=True)
    truth = {"a.png": [(1, (60, 60, 100, 100)), (0, (70, 208, 270, 232)), (2, (250, 250, 282, 282))],
             "b.png": [(1, (228, 64, 264, 96)), (1, (0, 0, 20, 20))]}  # c.png: no label file (background)
    for name, boxes in truth.items():
        (labels / name.replace(".png", ".txt")).write_text("\n".join(yolo_box(c, b) for c, b in boxes) + "\n",
                                                           encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(["run", str(model), str(train), "--out", str(out), "--reference", str(data)])
    assert code == 0, stderr
    report = rows(out)
    cells = {name: [report[name][c] for c in ("reference", "reference_instances", "matched_iou50",
                                              "precision_iou50", "recall_iou50")] for name in report}
    assert cells == {"a.png": ["labels/train/a.txt", "3", "2", "0.666667", "0.666667"],
                     "b.png": ["labels/train/b.txt", "2", "1", "0.333333", "0.500000"],
                     "c.png": ["labels/train/c.txt (no file: a background image)", "0", "0", "0.000000",
                               "1.000000"]}
    model_class = {0: 1, 1: 0, 2: 2}  # data.yaml's index → the model's
    gt = {"images": [{"id": image_id(name), "file_name": name, "width": SIDE, "height": SIDE}
                     for name in ("a.png", "b.png", "c.png")],
          "categories": [{"id": k + 1, "name": name} for k, name in enumerate(NAMES)],
          "annotations": [annotation(n, image_id(name), model_class[c] + 1, box)
                          for n, (name, c, box) in enumerate(((name, c, box) for name, boxes in truth.items()
                                                              for c, box in boxes), 1)]}
    found = found_instances(model)
    detections = [{"image_id": image_id(name), "category_id": item.class_index + 1, "score": item.score,
                   "bbox": [item.box[0], item.box[1], item.box[2] - item.box[0], item.box[3] - item.box[1]]}
                  for name in ("a.png", "b.png", "c.png") for item in found.items]
    expected, _ = cocoeval(gt, detections, "bbox")
    assert record(out)["map_50_95"] == pytest.approx(expected, abs=1e-6)
    assert 0.05 < expected < 0.95
    assert f"mAP@0.5:0.95 {expected:.4f}" in stdout


def test_a_bad_label_file_is_that_images_notice_and_the_run_goes_on(tmp_path):
    model = instance_model(tmp_path / "det.onnx", task="detect")
    data = tmp_path / "data"
    for name in ("a.png", "b.png"):
        picture(data / "images" / name)
    (data / "labels").mkdir()
    (data / "labels" / "a.txt").write_text("0 0.25 0.25 0.125 0.125\n7 0.5 0.5 0.1 0.1\n", encoding="utf-8")
    (data / "labels" / "b.txt").write_text(yolo_box(0, (60, 60, 100, 100)) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(["run", str(model), str(data / "images"), "--out", str(out), "--reference",
                                    str(data)])
    assert code == 0  # a reference's problem is a notice, not a failed input
    report = rows(out)
    notice = report["a.png"]["reference"]
    assert "a.txt" in notice and "line 2" in notice and notice.endswith("; no metrics") and "\n" not in notice
    assert report["a.png"]["precision_iou50"] == ""
    assert report["b.png"]["matched_iou50"] == "1" and report["b.png"]["recall_iou50"] == "1.000000"
    assert [line for line in stderr.splitlines() if "a.txt" in line] == [f"note: {notice}"]
    assert "1 image scored, 1 without metrics" in stdout


def test_a_coco_image_of_another_size_is_a_notice(tmp_path):
    model = instance_model(tmp_path / "det.onnx", task="detect")
    picture(tmp_path / "images" / "a.png")
    reference = tmp_path / "gt.json"
    reference.write_text(json.dumps({"images": [{"id": 1, "file_name": "a.png", "width": 640, "height": 480}],
                                     "categories": [{"id": 1, "name": "pit"}], "annotations": []}),
                         encoding="utf-8")
    out = tmp_path / "out"
    code, _, _ = run_cli(["run", str(model), str(tmp_path / "images"), "--out", str(out), "--reference",
                          str(reference)])
    assert code == 0
    assert rows(out)["a.png"]["reference"].endswith("reference a.png is 640×480, the image 320×320; no metrics")


@pytest.mark.parametrize(("content", "problem"), [
    ("{\"images\": [", "invalid JSON"),
    (json.dumps({"images": [], "categories": [{"id": 1, "name": "dent"}], "annotations": []}), "dent"),
])
def test_an_unreadable_coco_file_refuses_the_run_in_one_line(tmp_path, content, problem):
    model = instance_model(tmp_path / "det.onnx", task="detect")
    picture(tmp_path / "images" / "a.png")
    reference = tmp_path / "gt.json"
    reference.write_text(content, encoding="utf-8")
    code, _, stderr = run_cli(["run", str(model), str(tmp_path / "images"), "--out", str(tmp_path / "out"),
                               "--reference", str(reference)])
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "--reference" in lines[0] and "gt.json" in lines[0] and problem in lines[0]


@pytest.mark.parametrize(("make", "problem"), [
    (lambda d: d.mkdir(), "has no labels/ folder"),
    (lambda d: (d.parent / "x.csv").write_text("a"), "neither a COCO instances JSON nor a YOLO data.yaml"),
    (lambda d: (d.mkdir(), (d / "labels").mkdir(), (d / "data.yaml").write_text("names: [pit, dent]\n")),
     "'dent' is not one of the model's"),
])
def test_a_yolo_reference_that_cannot_be_used_is_refused(tmp_path, make, problem):
    model = instance_model(tmp_path / "det.onnx", task="detect")
    picture(tmp_path / "images" / "a.png")
    data = tmp_path / "data"
    make(data)
    given = data if data.exists() else tmp_path / "x.csv"
    code, _, stderr = run_cli(["run", str(model), str(tmp_path / "images"), "--out", str(tmp_path / "out"),
                               "--reference", str(given)])
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0]


def test_an_obb_models_yolo_reference_holds_oriented_boxes(tmp_path):
    model = instance_model(tmp_path / "obb.onnx", task="obb")
    data = tmp_path / "data"
    picture(data / "images" / "a.png")
    (data / "labels").mkdir()
    corners = [60, 60, 100, 60, 100, 100, 60, 100]  # the 0.9 pit's box, as four corners
    (data / "labels" / "a.txt").write_text("0 " + " ".join(str(v / SIDE) for v in corners) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(model), str(data / "images"), "--out", str(out), "--reference", str(data)])
    assert code == 0, stderr
    row = rows(out)["a.png"]
    assert [row[c] for c in ("reference_instances", "matched_iou50", "precision_iou50", "recall_iou50")] == \
        ["1", "1", "0.333333", "1.000000"]
    from app.io.discover import InputFile
    from app.runs.folder.instance_reference import InstanceScorer

    item = InputFile(data / "images" / "a.png", Path("a.png"))
    _, truth = InstanceScorer(data, load_spec(model), [item]).yolo.find(item, (SIDE, SIDE))
    (pit,) = truth.instances.items
    assert pit.rotated is not None and pit.mask is None  # an oriented box, not a polygon
    assert pit.rotated[:4] == pytest.approx((80, 80, 40, 40))


def test_anonymized_cells_and_notices_name_no_path(tmp_path):
    model = instance_model(tmp_path / "det.onnx", task="detect")
    data = tmp_path / "Jane_Doe"
    for name in ("a.png", "b.png"):
        picture(data / "images" / name)
    (data / "labels").mkdir()
    (data / "labels" / "a.txt").write_text("0 nan 0.5 0.1 0.1\n", encoding="utf-8")
    (data / "labels" / "b.txt").write_text(yolo_box(0, (60, 60, 100, 100)) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(["run", str(model), str(data / "images"), "--out", str(out), "--reference",
                                    str(data), "--anonymize"])
    assert code == 0, stderr
    text = (out / "seglens_report.csv").read_text(encoding="utf-8")
    kept = (out / "seglens_report.csv.run.json").read_text(encoding="utf-8")
    for where in (text, kept, stdout, stderr):
        assert "Jane_Doe" not in where and "a.txt" not in where and "b.txt" not in where
    scored, notice = sorted((row["reference"] for row in rows(out).values()), key=lambda c: c.endswith("metrics"))
    assert scored.startswith("reference/ref-") and len(scored) == len("reference/ref-") + 16
    assert notice.endswith("line 1: nan is not a normalised coordinate (0 to 1); no metrics")
    assert record(out)["matched_iou50"] == 1
