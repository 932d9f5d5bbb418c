"""seglens-cli on Ultralytics YOLO exports: `info` says what the export is and where each value came from, `models`
lists an instance model, and `run` reports counts and best scores per class, draws each object in its class colour,
writes a label mask and the run's objects as COCO and YOLO training labels that pycocotools and SegLens's own readers
read back. The constant-answer heads (tests/yolo_models.py) make every number exact."""

from __future__ import annotations

import csv
import json

import cv2
import numpy as np
import pytest
from PIL import Image
from yolo_models import NAMES, classify_model, instance_model

from app.cli import main
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.images import read_image
from app.runs.labels.coco_read import read_coco
from app.runs.labels.records import image_id
from app.runs.labels.yolo_read import read_data_yaml, read_yolo_folder

COLORS = {"pit": (230, 159, 0), "scratch": (86, 180, 233), "stain": (0, 158, 115)}  # the palette's first three
GREY = 128


@pytest.fixture
def images(tmp_path):
    """a.png (320×320: 2×2 image pixels per input pixel, no padding) and b.png (240×400, letterboxed)."""
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(np.full((320, 320, 3), GREY, np.uint8)).save(folder / "a.png")
    Image.fromarray(np.full((240, 400, 3), 60, np.uint8)).save(folder / "b.png")
    return folder


def run(model, images, out, *extra) -> int:
    return main(["run", str(model), str(images), "--out", str(out), "--device", "cpu", "--no-progress", *extra])


def rows(out) -> list[dict[str, str]]:
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def found(model, image_path):
    """The instances SegLens's pipeline finds in one image (what the run must have written)."""
    session = open_session(load_spec(model), "cpu")
    try:
        return run_image(session, read_image(image_path)).instances
    finally:
        session.close()


# --- info and models --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("task, layout_line", [
    ("segment", "output0[1,39,64] float32: 4 box + 3 class scores + 32 mask coefficients per candidate"),
    ("detect", "output0[1,7,64] float32: 4 box + 3 class scores per candidate"),
    ("obb", "output0[1,8,64] float32: 4 box + 3 class scores + angle per candidate")])
def test_info_says_what_the_yolo_export_is_and_where_each_value_came_from(task, layout_line, tmp_path, capsys):
    model = instance_model(tmp_path / f"{task}.onnx", task=task)
    (tmp_path / f"{task}.yaml").write_text("detect:\n  conf: 0.4\n  classes: [scratch]\n", encoding="utf-8")
    assert main(["info", str(model), "--no-session"]) == 0
    text = capsys.readouterr().out
    for line in ("  export        Ultralytics YOLO (its ONNX metadata)",
                 f"  task          instances ({task}: ", "[metadata]",
                 "  imgsz         160×160 (H×W) letterboxed (padding 114), RGB, /255  [metadata]",
                 "  stride        32  [metadata]", "  dynamic       no (fixed input size)",
                 "  layout        anchors (one column per candidate, NMS here)  [graph]",
                 f"  tensor        {layout_line}",
                 "  conf          0.4 (objects scoring below it are dropped)  [sidecar]",
                 "  iou           0.7 (NMS overlap)  [default]", "  max_det       300  [default]",
                 "  agnostic      no (NMS per class)  [default]", "  classes       scratch  [sidecar]",
                 "classes  [metadata]", "    1  scratch                 #56b4e9"):
        assert line in text, line
    assert ("prototypes    output1[1,32,40,40] float32 (32 mask prototypes)" in text) == (task == "segment")


def test_info_json_holds_the_detector_and_its_sources(tmp_path, capsys):
    model = instance_model(tmp_path / "seg.onnx")
    assert main(["info", str(model), "--no-session", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["task"] == "instances" and data["output"]["kind"] == "instances"
    detector = data["detector"]
    assert {k: detector[k] for k in ("format", "task", "layout", "imgsz", "stride", "dynamic", "prototypes",
                                     "conf", "iou", "max_det", "agnostic", "classes")} == {
        "format": "ultralytics", "task": "segment", "layout": "anchors", "imgsz": [160, 160], "stride": 32,
        "dynamic": False, "prototypes": "output1", "conf": 0.25, "iou": 0.7, "max_det": 300, "agnostic": False,
        "classes": None}
    assert detector["sources"] == {"task": "metadata", "output.layout": "graph", "input.size": "metadata",
                                   "classes": "metadata", "input.stride": "metadata", "detect.conf": "default",
                                   "detect.iou": "default", "detect.max_det": "default",
                                   "detect.agnostic": "default", "detect.classes": "default"}


def test_info_of_a_yolo_classify_export(tmp_path, capsys):
    model = classify_model(tmp_path / "cls.onnx")
    assert main(["info", str(model), "--no-session"]) == 0
    text = capsys.readouterr().out
    assert "  task          classification (classify: one class per image)  [metadata]" in text
    assert "  imgsz         96×96 (H×W) shorter side resized, centre cropped, RGB, /255  [metadata]" in text
    assert "  tensor        output0[1,3] float32: 3 class probabilities" in text
    assert "detect\n" not in text and "  top_k         3  [default]" in text


def test_a_settings_hash_follows_the_detect_options(tmp_path):
    """The run record's settings hash holds the export's detect options: --resume never carries rows made at
    another conf."""
    from app.runs.outputs.provenance import settings_hash

    model = instance_model(tmp_path / "seg.onnx")
    before = settings_hash(load_spec(model))
    (tmp_path / "seg.yaml").write_text("detect:\n  conf: 0.5\n", encoding="utf-8")
    assert settings_hash(load_spec(model)) != before


def test_models_lists_a_bundled_instance_model(tmp_path, monkeypatch, capsys):
    import app.inference.describe.bundled as bundled
    import app.paths

    instance_model(tmp_path / "surface_instances.onnx")
    monkeypatch.setattr(bundled, "models_dir", lambda: tmp_path)
    monkeypatch.setattr(app.paths, "models_dir", lambda: tmp_path)
    assert main(["models"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.split()[:5] == ["surface_instances", "instances", "rgb", "160×160", "3"]
    assert "3 classes: pit, scratch, stain" in line
    assert main(["models", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["task"], row["classes"], row["error"]) == ("instances", list(NAMES), None)


# --- the report ---------------------------------------------------------------------------------------------------

def test_report_counts_and_best_scores_per_class(images, tmp_path, capsys):
    model = instance_model(tmp_path / "seg.onnx")
    assert run(model, images, tmp_path / "out", "--save", "none") == 0
    report = rows(tmp_path / "out")
    assert list(report[0])[9:15] == ["count_pit", "count_scratch", "count_stain", "max_score_pit",
                                     "max_score_scratch", "max_score_stain"]
    assert not any(column.startswith("pixels_") for column in report[0])
    for row in report:  # two pits (0.9, 0.6), a scratch (0.8); the stain (0.2) is below conf 0.25
        assert (row["task"], row["score"]) == ("instances", "0.900000")
        assert [row[f"count_{n}"] for n in NAMES] == ["2", "1", "0"]
        assert [row[f"max_score_{n}"] for n in NAMES] == ["0.900000", "0.800000", ""]
    assert "instances: 6 found in 2 images (pit 4, scratch 2)" in capsys.readouterr().out


def test_report_of_an_image_without_objects(images, tmp_path, capsys):
    model = instance_model(tmp_path / "seg.onnx", objects=((2, 0.1, 80.0, 80.0, 20.0, 20.0),))
    assert run(model, images, tmp_path / "out", "--save", "mask") == 0
    row = rows(tmp_path / "out")[0]
    assert (row["score"], row["count_stain"], row["max_score_stain"]) == ("0.000000", "0", "")
    assert "instances: none found" in capsys.readouterr().out
    assert not np.asarray(Image.open(tmp_path / "out" / "a.png_mask.png")).any()  # nothing found: all 0, rightly


def test_same_named_classes_get_columns_of_their_own(images, tmp_path):
    model = instance_model(tmp_path / "seg.onnx", names=("pit", "pit", "stain"))
    assert run(model, images, tmp_path / "out", "--save", "none") == 0
    row = rows(tmp_path / "out")[0]
    assert (row["count_pit"], row["count_pit_2"], row["max_score_pit"], row["max_score_pit_2"]) == \
        ("2", "1", "0.900000", "0.800000")


# --- the pictures -------------------------------------------------------------------------------------------------

def boundary(mask: np.ndarray) -> np.ndarray:
    return mask & ~cv2.erode(mask.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)


def test_overlay_outlines_and_fills_each_mask_in_its_class_colour(images, tmp_path):
    model = instance_model(tmp_path / "seg.onnx")
    assert run(model, images, tmp_path / "out", "--save", "mask,overlay") == 0
    overlay = np.asarray(Image.open(tmp_path / "out" / "a.png_overlay.png"))
    for item in found(model, images / "a.png").items:
        mask = item.full_mask((320, 320))
        color = COLORS[item.class_name]
        edge = boundary(mask)
        assert edge.sum() > 20 and (overlay[edge] == color).all()  # the outline, in the class's colour
        inner = cv2.erode(mask.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
        fill = np.rint(GREY * 0.5 + np.asarray(color) * 0.5)
        assert inner.sum() > 10 and (overlay[inner] == fill).all()  # filled at the overlay's opacity
    assert (overlay[300:, :] == GREY).all() and (overlay[:, :40] == GREY).all()  # nothing drawn away from them


def test_overlay_labels_each_object_with_its_score(images, tmp_path):
    model = instance_model(tmp_path / "seg.onnx", objects=((1, 0.8, 80.0, 110.0, 100.0, 12.0),))
    assert run(model, images, tmp_path / "out", "--save", "overlay") == 0
    overlay = np.asarray(Image.open(tmp_path / "out" / "a.png_overlay.png"))
    plate = overlay[180:208, 60:160]  # just above the scratch's box (x 60–260, y 208–232)
    assert (plate == 0).all(axis=2).sum() > 100  # the black plate …
    assert (np.abs(plate.astype(int) - COLORS["scratch"]).sum(axis=2) < 60).sum() > 20  # … its text in the colour


@pytest.mark.parametrize("task", ["detect", "obb"])
def test_overlay_and_mask_of_boxes(task, images, tmp_path):
    model = instance_model(tmp_path / f"{task}.onnx", task=task)
    assert run(model, images, tmp_path / "out", "--save", "mask,overlay") == 0
    overlay = np.asarray(Image.open(tmp_path / "out" / "a.png_overlay.png"))
    labels = np.asarray(Image.open(tmp_path / "out" / "a.png_mask.png"))
    # the scratch: box x 60–260, y 208–232 at the image's size; the first pit 60–100 × 60–100
    assert (labels[208:232, 60:260] == 2).all() and (labels[60:100, 60:100] == 1).all()
    assert int((labels > 0).sum()) == 200 * 24 + 40 * 40 + 32 * 32
    assert (overlay[208, 70:250] == COLORS["scratch"]).all() and (overlay[231, 70:250] == COLORS["scratch"]).all()
    assert (overlay[220, 100:200] == np.rint(GREY * 0.5 + np.asarray(COLORS["scratch"]) * 0.5)).all()


def test_mask_is_class_index_plus_one_the_better_score_on_top(images, tmp_path):
    # a pit (0.9) over a scratch (0.5) that covers it: the pit keeps its pixels whatever the order found
    objects = ((1, 0.5, 80.0, 80.0, 60.0, 60.0), (0, 0.9, 80.0, 80.0, 20.0, 20.0))
    model = instance_model(tmp_path / "det.onnx", task="detect", objects=objects)
    assert run(model, images, tmp_path / "out", "--save", "mask") == 0
    labels = np.asarray(Image.open(tmp_path / "out" / "a.png_mask.png"))
    assert labels.dtype == np.uint8
    assert (labels[140:180, 140:180] == 1).all() and labels[100, 100] == 2 and labels[0, 0] == 0
    assert np.unique(labels).tolist() == [0, 1, 2]


def test_heatmap_is_dropped_with_a_note(images, tmp_path, capsys):
    model = instance_model(tmp_path / "seg.onnx")
    assert run(model, images, tmp_path / "out", "--save", "overlay,heatmap") == 0
    assert "heatmap is not written" in capsys.readouterr().err
    assert not list((tmp_path / "out").glob("*_heatmap.png"))


# --- COCO and YOLO labels -----------------------------------------------------------------------------------------

def test_coco_labels_read_back_by_pycocotools(images, tmp_path, capsys):
    pycocotools = pytest.importorskip("pycocotools.coco")
    model = instance_model(tmp_path / "seg.onnx")
    out = tmp_path / "out"
    assert run(model, images, out, "--save", "coco") == 0
    assert f"labels: {out / 'seglens_coco.json'}" in capsys.readouterr().out
    coco = pycocotools.COCO(str(out / "seglens_coco.json"))
    assert sorted(img["file_name"] for img in coco.dataset["images"]) == ["a.png", "b.png"]
    assert [coco.cats[k]["name"] for k in sorted(coco.cats)] == list(NAMES)
    for name, hw in (("a.png", (320, 320)), ("b.png", (240, 400))):
        (entry,) = [img for img in coco.dataset["images"] if img["file_name"] == name]
        assert entry["id"] == image_id(name) and (entry["height"], entry["width"]) == hw
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[entry["id"]]))
        expected = found(model, images / name).items
        assert len(anns) == len(expected) == 3
        for ann, item in zip(sorted(anns, key=lambda a: -a["score"]), expected, strict=True):
            assert coco.cats[ann["category_id"]]["name"] == item.class_name
            assert ann["score"] == pytest.approx(item.score, abs=1e-6)
            np.testing.assert_array_equal(coco.annToMask(ann).astype(bool), item.full_mask(hw))
            assert ann["area"] == item.area_px


def test_coco_and_yolo_read_back_by_seglens(images, tmp_path):
    model = instance_model(tmp_path / "seg.onnx")
    out = tmp_path / "out"
    assert run(model, images, out, "--save", "coco,yolo") == 0
    coco = read_coco(out / "seglens_coco.json", names=NAMES).by_name()
    assert read_data_yaml(out / "yolo" / "data.yaml") == NAMES
    sizes = {"a.png": (320, 320), "b.png": (240, 400)}
    yolo = read_yolo_folder(out / "yolo", sizes, NAMES).by_name()
    assert sorted((out / "yolo" / "labels").iterdir()) == [out / "yolo" / "labels" / n for n in ("a.txt", "b.txt")]
    for name, hw in sizes.items():
        expected = found(model, images / name).items
        read = coco[name].items
        assert [(i.class_name, round(i.score, 6)) for i in read] == [(i.class_name, round(i.score, 6))
                                                                      for i in expected]
        for mine, back in zip(expected, read, strict=True):
            np.testing.assert_array_equal(back.full_mask(hw), mine.full_mask(hw))
        back_yolo = sorted(yolo[name].items, key=lambda i: i.class_index)
        assert [i.class_index for i in back_yolo] == sorted(i.class_index for i in expected)
        for item in expected:  # YOLO's polygon through the boundary pixels' centres: the same object, ±its edge
            best = max(_iou(item.full_mask(hw), other.full_mask(hw)) for other in back_yolo)
            assert best > 0.85


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def test_yolo_boxes_of_a_detect_model(images, tmp_path):
    model = instance_model(tmp_path / "det.onnx", task="detect")
    assert run(model, images, tmp_path / "out", "--save", "yolo") == 0
    lines = (tmp_path / "out" / "yolo" / "labels" / "a.txt").read_text().splitlines()
    assert lines == ["0 0.250000 0.250000 0.125000 0.125000", "1 0.500000 0.687500 0.625000 0.075000",
                     "0 0.750000 0.250000 0.100000 0.100000"]


def test_labels_refused_where_none_can_come_of_them(images, tmp_path, models, capsys):
    segmentation = models("binary_logits")
    assert run(segmentation, images, tmp_path / "o1", "--save", "coco") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --save coco writes an instance model's objects as training labels;") and \
        "\n" not in err
    model = instance_model(tmp_path / "seg.onnx")
    assert run(model, images, tmp_path / "o2", "--save", "yolo", "--resume") == 2
    assert "--save yolo with --resume is not supported" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # bench's --save is per image only
        main(["bench", str(model), str(images / "a.png"), "--save", "coco"])
    assert exited.value.code == 2 and "unknown kind 'coco'" in capsys.readouterr().err


def test_label_files_are_never_written_through_a_planted_link(images, tmp_path, capsys):
    model = instance_model(tmp_path / "seg.onnx")
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.json"
    victim.write_text("keep", encoding="utf-8")
    (out / "seglens_coco.json").symlink_to(victim)
    assert run(model, images, out, "--save", "coco,mask") == 1  # the labels are missing: not a clean run
    assert victim.read_text(encoding="utf-8") == "keep"
    err = capsys.readouterr().err
    assert f"error: COCO labels not written: not written: {out / 'seglens_coco.json'} would be outside" in err
    assert len(rows(out)) == 2 and (out / "a.png_mask.png").is_file()  # the rest of the run stands


def test_resume_runs_again_an_image_whose_mask_is_missing(images, tmp_path, capsys):
    model = instance_model(tmp_path / "seg.onnx")
    out = tmp_path / "out"
    assert run(model, images, out, "--save", "mask") == 0
    (out / "a.png_mask.png").unlink()
    capsys.readouterr()
    assert run(model, images, out, "--save", "mask", "--resume") == 0
    assert "(1 done by an earlier run)" in capsys.readouterr().out  # b.png carried, a.png run again
    assert (out / "a.png_mask.png").is_file() and len(rows(out)) == 2


def test_mask_png_names_its_label_values(images, tmp_path, capsys):
    """The mask's provenance names each value's class: 0 no object, then the model's classes from 1."""
    model = instance_model(tmp_path / "seg.onnx")
    assert run(model, images, tmp_path / "out", "--save", "mask") == 0
    capsys.readouterr()
    assert main(["info", str(tmp_path / "out" / "a.png_mask.png")]) == 0
    assert json.loads(capsys.readouterr().out)["SegLens"]["classes"] == ["(no object)", *NAMES]


def test_labels_under_anonymize_name_no_input(images, tmp_path):
    model = instance_model(tmp_path / "seg.onnx")
    out = tmp_path / "out"
    assert run(model, images, out, "--save", "coco,yolo", "--anonymize") == 0
    names = [image["file_name"] for image in json.loads((out / "seglens_coco.json").read_text())["images"]]
    assert len(names) == 2 and all(name.startswith("images/img-") for name in names)
    assert not any("a.png" in p.name or "b.png" in p.name for p in out.rglob("*"))
    assert sorted(p.stem for p in (out / "yolo" / "labels" / "images").iterdir()) == sorted(
        name.split("/")[-1] for name in names)


def test_a_run_stopped_early_writes_no_labels(images, tmp_path):
    from app.runs.folder.run import LocalRunner, plan_run, run_folder

    model = instance_model(tmp_path / "seg.onnx")
    out = tmp_path / "out"
    session = open_session(load_spec(model), "cpu")
    answers = iter([False])  # the first image runs, then the run is stopped
    try:
        plan = plan_run(session.spec, [images], out=out, save=("coco", "yolo"))
        run_ = run_folder(plan, LocalRunner(session), should_stop=lambda: next(answers, True))
    finally:
        session.close()
    assert run_.summary.ok == 1 and run_.summary.cancelled
    assert run_.summary.label_error == "COCO and YOLO labels not written: the run did not finish every input"
    assert not (out / "seglens_coco.json").exists() and not (out / "yolo").exists()
