"""A hostile or broken Ultralytics export against SegLens's YOLO reading and decoding: metadata that lies about the
working size or carries control characters, an end-to-end head naming classes it does not have, prototypes of the
wrong count or of an absurd size, tens of thousands of candidates, boxes over the whole of a huge picture. Each is one
line naming the file before anything big is allocated (calls that could allocate gigabytes run in a forked child
bounded in memory, hostile_kit.run_bounded); well-formed answers decode as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hostile_kit import ALIAS_BOMB, run_bounded

from app.errors import InferenceError, ModelError
from app.inference.model.onnx_graph import GraphInfo, TensorInfo
from app.inference.model.yolo_head import YoloHead, read_head
from app.inference.model.yolo_options import YoloOptions
from app.inference.yolo.decode import detections, instances
from app.inference.yolo.letterbox import fit
from app.inference.yolo.nms import fast_nms_rotated, nms, probiou

PATH = Path("/models/lying.onnx")
NAMES = "{0: 'pit', 1: 'scratch', 2: 'stain'}"


def graph(outputs: list[tuple[str, tuple[int | str | None, ...]]], metadata: dict[str, str],
          image: tuple[int | str | None, ...] = (1, 3, 160, 160)) -> GraphInfo:
    return GraphInfo(inputs=(TensorInfo("images", image, "float32"),),
                     outputs=tuple(TensorInfo(name, shape, "float32") for name, shape in outputs),
                     metadata=metadata, final_ops={}, argmax_channels={}, opset=17, producer="pytorch")


def head(task: str = "detect", layout: str = "anchors", *, imgsz: tuple[int, int] = (160, 160)) -> YoloHead:
    segment = task == "segment"
    return YoloHead(path=PATH, task=task, layout=layout, names=("pit", "scratch", "stain"), input_name="images",
                    imgsz=imgsz, stride=32, output="output0", protos="output1" if segment else None,
                    mask_dim=32 if segment else 0)


def one_line_naming_the_file(message: str) -> None:
    assert "\n" not in message.strip() and PATH.name in message, message


# --- the metadata ---------------------------------------------------------------------------------------------

def test_an_imgsz_that_is_not_the_fixed_input_is_refused_before_a_letterbox_of_its_size() -> None:
    meta = {"task": "detect", "names": NAMES, "imgsz": "[16384, 16384]"}
    with pytest.raises(ModelError) as caught:
        read_head(PATH, graph([("output0", (1, 7, 525))], meta))
    one_line_naming_the_file(str(caught.value))
    assert "16384" in str(caught.value) and "160" in str(caught.value)


@pytest.mark.parametrize("imgsz", ["[16384, 16384]", "[100000, 100000]", "100000"])
def test_an_absurd_imgsz_of_a_dynamic_export_is_refused_and_says_the_sidecar_can_give_one(imgsz: str) -> None:
    meta = {"task": "detect", "names": NAMES, "imgsz": imgsz}
    with pytest.raises(ModelError) as caught:
        read_head(PATH, graph([("output0", (1, 7, "anchors"))], meta, image=(1, 3, "height", "width")))
    one_line_naming_the_file(str(caught.value))
    assert "imgsz" in str(caught.value) and "input.size" in str(caught.value)


def test_a_well_formed_dynamic_imgsz_is_still_read() -> None:
    meta = {"task": "detect", "names": NAMES, "imgsz": "[640, 1280]"}
    found = read_head(PATH, graph([("output0", (1, 7, "anchors"))], meta, image=(1, 3, "height", "width")))
    assert (found.imgsz, found.sources["imgsz"], found.dynamic) == ((640, 1280), "metadata", True)


@pytest.mark.parametrize("task", [ALIAS_BOMB, "seg\x1b[2J\nment", "x" * 100 + "\r\n"])
def test_a_task_with_control_characters_is_refused_on_one_visible_line(task: str) -> None:
    with pytest.raises(ModelError) as caught:
        read_head(PATH, graph([("output0", (1, 7, 525))], {"task": task, "names": NAMES}))
    one_line_naming_the_file(str(caught.value))
    assert "\x1b" not in str(caught.value) and "\r" not in str(caught.value)


# --- an end-to-end head's classes -----------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [3.0, -1.0, 1e9])
def test_an_end_to_end_row_naming_a_class_the_head_has_not_is_refused(cls: float) -> None:
    rows = np.zeros((1, 300, 6), np.float32)
    rows[0, 0] = (10, 10, 50, 50, 0.9, 1)
    rows[0, 1] = (60, 60, 90, 90, 0.8, cls)
    with pytest.raises(InferenceError) as caught:
        detections(head(layout="end2end"), rows, YoloOptions())
    one_line_naming_the_file(str(caught.value))
    assert "class" in str(caught.value)


def test_an_end_to_end_row_below_the_confidence_limit_is_not_looked_at() -> None:
    rows = np.zeros((1, 300, 6), np.float32)
    rows[0, 0] = (10, 10, 50, 50, 0.9, 2)
    rows[0, 1] = (60, 60, 90, 90, 0.1, 1e9)  # dropped by conf 0.25 as Ultralytics drops it
    kept = detections(head(layout="end2end"), rows, YoloOptions())
    assert kept[:, 5].tolist() == [2.0]


# --- prototypes -----------------------------------------------------------------------------------------------

def _segment_rows() -> np.ndarray:
    rows = np.zeros((1, 4 + 3 + 32), np.float32)
    rows[0, :6] = (40, 40, 80, 80, 0.9, 0)
    rows[0, 6] = 1.0
    return rows


@pytest.mark.parametrize("shape", [(1, 16, 40, 40), (1, 32, 40), (2, 32, 40, 40), (1, 32, 0, 40)])
def test_prototypes_of_another_shape_are_one_line(shape: tuple[int, ...]) -> None:
    protos = np.ones(shape, np.float32)
    with pytest.raises(InferenceError) as caught:
        instances(head("segment"), _segment_rows(), fit((160, 160), (160, 160)), protos)
    one_line_naming_the_file(str(caught.value))
    assert "prototypes" in str(caught.value)


def test_prototypes_larger_than_a_quarter_of_the_input_are_refused_before_their_resampling() -> None:
    protos = np.ones((1, 32, 1, 40_000), np.float32)  # 5 MB, whose resampling matrices would be tens of GB
    outcome = run_bounded(lambda: instances(head("segment"), _segment_rows(), fit((160, 160), (160, 160)), protos),
                          seconds=60)
    assert outcome.kind == "raised" and "app.errors.InferenceError" in outcome.classes, outcome.describe()
    one_line_naming_the_file(outcome.message)


def test_well_formed_prototypes_still_give_the_mask() -> None:
    protos = np.full((1, 32, 40, 40), -8.0, np.float32)
    protos[0, 0, 10:20, 10:20] = 8.0
    found = instances(head("segment"), _segment_rows(), fit((160, 160), (160, 160)), protos)
    assert len(found) == 1 and found.items[0].mask is not None and found.items[0].mask[1:-1, 1:-1].all()


def test_masks_over_the_whole_of_a_huge_picture_are_refused_before_they_are_made() -> None:
    rows = np.zeros((40, 4 + 3 + 32), np.float32)
    rows[:, :6] = (0, 0, 160, 160, 0.9, 0)  # forty boxes over the whole input: 40 × 20000² pixels of masks
    rows[:, 6] = 1.0
    protos = np.full((1, 32, 40, 40), 8.0, np.float32)
    letterbox = fit((20_000, 20_000), (160, 160))
    outcome = run_bounded(lambda: instances(head("segment"), rows, letterbox, protos), seconds=120)
    assert outcome.kind == "raised" and "app.errors.InferenceError" in outcome.classes, outcome.describe()
    one_line_naming_the_file(outcome.message)
    assert "mask" in outcome.message


# --- tens of thousands of candidates --------------------------------------------------------------------------

def _disjoint(count: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(count, dtype=np.float32) * 3
    boxes = np.stack([x, np.zeros(count, np.float32), x + 1, np.ones(count, np.float32)], 1)
    return boxes, np.random.default_rng(0).random(count).astype(np.float32)


def test_nms_stops_at_the_limit_with_the_boxes_it_would_have_kept_first() -> None:
    rng = np.random.default_rng(1)
    corner = rng.random((400, 2)).astype(np.float32) * 100
    boxes = np.concatenate([corner, corner + 5 + rng.random((400, 2)).astype(np.float32) * 30], 1)
    scores = rng.random(400).astype(np.float32)
    assert nms(boxes, scores, 0.5, limit=7).tolist() == nms(boxes, scores, 0.5)[:7].tolist()
    assert len(nms(*_disjoint(30_000), 0.7, limit=300)) == 300


def _full_fast_nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """The Fast-NMS of the whole IoU matrix at once (Ultralytics' TorchNMS.fast_nms), for small inputs."""
    order = np.argsort(-scores, kind="stable")
    ious = np.triu(probiou(boxes[order], boxes[order]), k=1)
    kept: np.ndarray = order[(ious > iou).sum(0) <= 0]
    return kept


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rotated_nms_in_blocks_keeps_what_the_whole_matrix_keeps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count = 2500  # over two blocks
    boxes = np.concatenate([rng.random((count, 2)) * 300, 5 + rng.random((count, 2)) * 40,
                            rng.random((count, 1)) * 3], 1).astype(np.float32)
    scores = rng.random(count).astype(np.float32)
    assert fast_nms_rotated(boxes, scores, 0.3).tolist() == _full_fast_nms(boxes, scores, 0.3).tolist()
    limited = fast_nms_rotated(boxes, scores, 0.3, limit=50)
    assert limited.tolist() == _full_fast_nms(boxes, scores, 0.3)[:50].tolist()


def test_thirty_thousand_oriented_candidates_stay_in_bounded_memory() -> None:
    obb = YoloHead(path=PATH, task="obb", layout="anchors", names=("pit", "scratch", "stain"), input_name="images",
                   imgsz=(640, 640), stride=32, output="output0")
    count = 30_000
    rows = np.zeros((1, 4 + 3 + 1, count), np.float32)
    rows[0, 0] = np.arange(count) % 60 * 10 + 20  # 4 × 4 boxes 10 pixels apart: none overlaps another
    rows[0, 1] = np.arange(count) // 60 * 10 + 20
    rows[0, 2:4] = 4
    rows[0, 4] = np.linspace(0.9, 0.3, count)  # a whole-matrix Fast-NMS: 30 000² IoUs, GBs each step
    outcome = run_bounded(lambda: len(detections(obb, rows, YoloOptions())), seconds=300)
    assert outcome.kind == "returned" and outcome.message == "300", outcome.describe()


def test_a_large_fixed_input_whose_metadata_agrees_is_the_graphs_to_say() -> None:
    meta = {"task": "detect", "names": NAMES, "imgsz": "[6400, 6400]"}
    found = read_head(PATH, graph([("output0", (1, 7, "anchors"))], meta, image=(1, 3, 6400, 6400)))
    assert found.imgsz == (6400, 6400)


# --- thousands of classes -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("task", "output"), [("detect", (1, 4 + 10**12, "anchors")),
                                              ("detect", (1, 4 + 70_000, "anchors")),
                                              ("classify", (1, 10**12))])
def test_a_head_of_absurdly_many_classes_is_refused_before_they_are_named(
        task: str, output: tuple[int | str, ...]) -> None:
    outcome = run_bounded(lambda: read_head(PATH, graph([("output0", output)], {"task": task})), seconds=30)
    assert outcome.kind == "raised" and "app.errors.ModelError" in outcome.classes, outcome.describe()
    one_line_naming_the_file(outcome.message)
    assert "classes" in outcome.message


def test_metadata_naming_absurdly_many_classes_is_refused() -> None:
    names = repr({index: f"c{index}" for index in range(70_000)})
    with pytest.raises(ModelError) as caught:
        read_head(PATH, graph([("output0", (1, 4 + 70_000, "anchors"))], {"task": "detect", "names": names}))
    one_line_naming_the_file(str(caught.value))


def test_a_detection_vocabulary_as_large_as_lvis_is_read() -> None:
    found = read_head(PATH, graph([("output0", (1, 4 + 1203, "anchors"))], {"task": "detect"}))
    assert found.nc == 1203


# --- oriented boxes far past the picture ----------------------------------------------------------------------

def _obb_rows(*boxes: tuple[float, float, float, float]) -> tuple[YoloHead, np.ndarray]:
    obb = YoloHead(path=PATH, task="obb", layout="anchors", names=("pit", "scratch", "stain"), input_name="images",
                   imgsz=(160, 160), stride=32, output="output0")
    rows = np.zeros((1, 4 + 3 + 1, len(boxes)), np.float32)
    for k, box in enumerate(boxes):
        rows[0, :4, k] = box
        rows[0, 4 + k % 3, k] = 0.9
    return obb, detections(obb, rows, YoloOptions())


@pytest.mark.parametrize("box", [(50, 50, 3e38, 10), (3e38, -3e38, 10, 10), (50, 50, 1e30, 1e30)])
def test_an_oriented_box_far_past_the_picture_is_one_line_not_an_overflow_downstream(
        box: tuple[float, float, float, float]) -> None:
    obb, rows = _obb_rows((80, 80, 10, 10), box)
    with pytest.raises(InferenceError) as caught:
        instances(obb, rows, fit((320, 320), (160, 160)))
    one_line_naming_the_file(str(caught.value))


def test_an_oriented_box_reaching_past_the_picture_is_kept_as_the_model_gave_it() -> None:
    obb, rows = _obb_rows((150, 80, 60, 10))
    found = instances(obb, rows, fit((320, 320), (160, 160)))
    assert found.items[0].rotated == (300.0, 160.0, 120.0, 20.0, 0.0)


# --- a reference whose few bytes decode to gigabytes of masks -------------------------------------------------

def _coco_of_whole_picture_masks(path: Path, count: int) -> Path:
    import json

    h, w = 15_000, 16_000  # within an image's pixel limit; each annotation's run-length mask covers it all
    path.write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.png", "width": w, "height": h}],
        "categories": [{"id": 1, "name": "pit"}],
        "annotations": [{"id": k + 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, w, h],
                         "segmentation": {"size": [h, w], "counts": [0, h * w]}} for k in range(count)]}))
    return path


def test_a_coco_reference_of_whole_picture_masks_is_refused_before_gigabytes_are_decoded(tmp_path: Path) -> None:
    from app.runs.labels.coco_read import read_coco

    path = _coco_of_whole_picture_masks(tmp_path / "instances.json", 20)  # 1 KB: 20 × 240 M pixels
    outcome = run_bounded(lambda: read_coco(path, root=tmp_path), seconds=120)
    assert outcome.kind == "raised" and "app.errors.SegLensError" in outcome.classes, outcome.describe()
    assert "\n" not in outcome.message and "instances.json" in outcome.message, outcome.message


def test_a_yolo_label_file_of_whole_picture_polygons_is_refused_before_gigabytes_are_filled(tmp_path: Path) -> None:
    from app.runs.labels.yolo_read import read_yolo_labels

    path = tmp_path / "a.txt"
    path.write_text("0 0 0 1 0 1 1 0 1\n" * 20)
    outcome = run_bounded(lambda: read_yolo_labels(path, image_hw=(15_000, 16_000), names=("pit",), root=tmp_path),
                          seconds=120)
    assert outcome.kind == "raised" and "app.errors.SegLensError" in outcome.classes, outcome.describe()
    assert "\n" not in outcome.message and "a.txt" in outcome.message, outcome.message
