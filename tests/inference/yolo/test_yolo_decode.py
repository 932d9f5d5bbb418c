"""A YOLO head's outputs into instances on tiny synthetic tensors: the confidence filter, the best class, the
classes kept, class-aware or agnostic NMS, max_det, YOLOv5's objectness, end-to-end rows, masks, oriented boxes;
the session's outputs checked (NaN is one line naming the file); the sidecar's `detect:` section."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_factory
import pytest
from onnx import TensorProto, helper
from yolo_models import open_yolo

from app.errors import InferenceError, ModelError, SidecarError
from app.inference.model.instances import Instances
from app.inference.model.sidecar import load_sidecar
from app.inference.model.yolo_head import YoloHead
from app.inference.model.yolo_options import YoloOptions, options_from_sidecar
from app.inference.yolo.decode import detections, instances
from app.inference.yolo.letterbox import fit

NAMES = ("pit", "scratch", "stain")


def head(task: str = "detect", layout: str = "anchors", *, protos: str | None = None) -> YoloHead:
    return YoloHead(path=Path("best.onnx"), task=task, layout=layout, names=NAMES, input_name="images",
                    imgsz=(160, 160), stride=32, output="output0", protos=protos, mask_dim=32 if protos else 0)


def anchors(rows: list[list[float]]) -> np.ndarray:
    """[1, C, N] from rows (cx, cy, w, h, class scores…)."""
    return np.asarray(rows, dtype=np.float32).T[None]


BOXES = [[50, 50, 20, 20, 0.9, 0.1, 0.0],  # pit
         [52, 50, 20, 20, 0.1, 0.8, 0.0],  # scratch, on the pit
         [51, 50, 20, 20, 0.7, 0.0, 0.0],  # pit, on the pit
         [120, 120, 10, 10, 0.0, 0.0, 0.25],  # stain, exactly at conf: out (strictly above)
         [120, 120, 10, 10, 0.0, 0.0, 0.26]]  # stain


def test_anchor_rows_filtered_and_suppressed_per_class() -> None:
    rows = detections(head(), anchors(BOXES), YoloOptions())
    assert rows[:, 5].tolist() == [0, 1, 2]
    np.testing.assert_allclose(rows[:, 4], [0.9, 0.8, 0.26])
    np.testing.assert_allclose(rows[0, :4], [40, 40, 60, 60])  # centre-size to corners


def test_agnostic_classes_and_max_det() -> None:
    assert detections(head(), anchors(BOXES), YoloOptions(agnostic=True))[:, 5].tolist() == [0, 2]
    assert detections(head(), anchors(BOXES), YoloOptions(classes=(1, 2)))[:, 5].tolist() == [1, 2]
    assert detections(head(), anchors(BOXES), YoloOptions(max_det=1))[:, 5].tolist() == [0]
    assert detections(head(), anchors(BOXES), YoloOptions(iou=0.99))[:, 5].tolist() == [0, 1, 0, 2]


def test_objectness_multiplies_the_class_score() -> None:
    output = np.asarray([[[50, 50, 20, 20, 0.5, 0.9, 0.1, 0.0],  # 0.45: kept
                          [90, 90, 20, 20, 0.3, 0.0, 0.0, 0.9],  # 0.27: kept
                          [130, 130, 20, 20, 0.2, 0.0, 0.0, 0.9]]], dtype=np.float32)  # objectness below conf
    rows = detections(head(layout="objectness"), output, YoloOptions())
    np.testing.assert_allclose(rows[:, 4], [0.45, 0.27], rtol=1e-6)
    assert rows[:, 5].tolist() == [0, 2]


def test_objectness_segment_rows_carry_their_coefficients_to_the_masks() -> None:
    """YOLOv5-seg: [N, 5 + nc + 32], the coefficients after the classes."""
    coeff = [1.0] + [0.0] * 31
    output = np.asarray([[[50, 50, 20, 20, 0.9, 0.0, 1.0, 0.0, *coeff]]], dtype=np.float32)
    protos = np.full((1, 32, 40, 40), 1.0, dtype=np.float32)
    segment = head("segment", "objectness", protos="output1")
    rows = detections(segment, output, YoloOptions())
    found = instances(segment, rows, fit((160, 160), (160, 160)), protos)
    assert [(item.class_name, item.mask_box) for item in found.items] == [("scratch", (40, 40, 60, 60))]
    assert found.items[0].mask is not None and found.items[0].mask.all()


def test_end_to_end_rows_kept_as_they_are() -> None:
    output = np.asarray([[[10, 10, 30, 30, 0.9, 2], [10, 10, 30, 30, 0.8, 2], [0, 0, 5, 5, 0.1, 0]]],
                        dtype=np.float32)
    rows = detections(head(layout="end2end"), output, YoloOptions())
    assert rows[:, 4].tolist() == pytest.approx([0.9, 0.8])  # no NMS: the graph did it
    assert len(detections(head(layout="end2end"), output, YoloOptions(max_det=1))) == 1


def test_instances_in_image_pixels_best_first() -> None:
    rows = detections(head(), anchors(BOXES), YoloOptions())
    found = instances(head(), rows, fit((320, 320), (160, 160)))
    assert isinstance(found, Instances) and found.image_hw == (320, 320)
    assert [item.class_name for item in found.items] == ["pit", "scratch", "stain"]
    assert found.items[0].box == pytest.approx((80, 80, 120, 120))
    assert found.items[0].mask is None


def test_segment_instances_carry_their_mask_and_an_empty_one_is_dropped() -> None:
    protos = np.full((1, 32, 40, 40), -1.0, dtype=np.float32)
    protos[0, 0, 10:15, 10:15] = 1.0  # input pixels 40..60
    coeff = [1.0] + [0.0] * 31
    rows = np.asarray([[40, 40, 60, 60, 0.9, 0, *coeff], [100, 100, 140, 140, 0.8, 1, *coeff]], dtype=np.float32)
    found = instances(head("segment", protos="output1"), rows, fit((160, 160), (160, 160)), protos)
    assert len(found) == 1  # the second box holds no mask pixel: Ultralytics drops it
    item = found.items[0]
    assert item.mask_box == (40, 40, 60, 60) and item.mask is not None and item.mask.shape == (20, 20)
    assert item.area_px == 20 * 20 - 4  # the prototype square, bilinearly: its four corner pixels fall out


def test_oriented_instances_keep_their_rotation_and_bounds() -> None:
    rows = np.asarray([[80, 80, 40, 20, 0.9, 1, np.pi / 2]], dtype=np.float32)
    found = instances(head("obb"), rows, fit((320, 320), (160, 160)))
    item = found.items[0]
    assert item.rotated == pytest.approx((160, 160, 80, 40, np.pi / 2))
    assert item.box == pytest.approx((140, 120, 180, 200), abs=1e-4)  # turned a quarter: 40 wide, 80 high
    assert item.angle == pytest.approx(np.pi / 2)


def yolo_file(path: Path, output: np.ndarray, **metadata: str) -> Path:
    """An ONNX file answering `output` whatever the image (0 × the image's mean, plus the constant)."""
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
             helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
             helper.make_node("Add", ["answer", "nothing"], ["output0"])]
    return onnx_factory.save(
        path, nodes, [onnx_factory.tensor("images", TensorProto.FLOAT, [1, 3, 64, 64])],
        [onnx_factory.tensor("output0", TensorProto.FLOAT, list(output.shape))],
        [onnx_factory.const("answer", output.astype(np.float32)), onnx_factory.const("zero", np.float32(0))],
        metadata={"author": "Ultralytics", "imgsz": "[64, 64]", "names": str(dict(enumerate(NAMES))), **metadata})


def test_a_detect_export_runs_end_to_end(tmp_path: Path) -> None:
    output = anchors([[16, 24, 8, 8, 0.9, 0, 0]] + [[0, 0, 1, 1, 0, 0, 0]] * 83)  # 64 × 64: 84 anchors
    model = open_yolo(yolo_file(tmp_path / "best.onnx", output, task="detect"), device="cpu")
    found = model.predict(np.zeros((128, 256, 3), dtype=np.uint8))  # a quarter of its size, 16 rows above
    assert isinstance(found, Instances) and len(found) == 1
    assert found.items[0].box == pytest.approx((48, 16, 80, 48))
    assert model.head.sources["layout"] == "graph" and model.info.provider == "CPUExecutionProvider"


def test_non_finite_outputs_are_one_line_naming_the_file(tmp_path: Path) -> None:
    output = anchors([[16, 16, 8, 8, np.nan, 0, 0]] + [[0, 0, 1, 1, 0, 0, 0]] * 83)
    model = open_yolo(yolo_file(tmp_path / "broken.onnx", output, task="detect"), device="cpu")
    with pytest.raises(InferenceError) as caught:
        model.predict(np.zeros((64, 64, 3), dtype=np.uint8))
    assert str(caught.value).startswith("broken.onnx: non-finite model output 'output0': 1 NaN")
    assert "\n" not in str(caught.value)


def test_a_malformed_export_is_refused_on_opening(tmp_path: Path) -> None:
    output = anchors([[16, 16, 8, 8, 0.9, 0]] * 84)  # two classes' channels, three names
    with pytest.raises(ModelError, match="^wrong.onnx: output 'output0' has 6 channels; a detect head"):
        open_yolo(yolo_file(tmp_path / "wrong.onnx", output, task="detect"), device="cpu")


def test_the_sidecar_detect_section(tmp_path: Path) -> None:
    sidecar = tmp_path / "best.yaml"
    sidecar.write_text("detect:\n  conf: 0.4\n  iou: 0.5\n  max_det: 10\n  agnostic: yes\n  classes: [stain, 0]\n")
    options, sources = options_from_sidecar(load_sidecar(sidecar), NAMES, sidecar=sidecar)
    assert options == YoloOptions(conf=0.4, iou=0.5, max_det=10, agnostic=True, classes=(0, 2))
    assert set(sources.values()) == {"sidecar"}
    assert options_from_sidecar({}, NAMES) == (YoloOptions(), dict.fromkeys(sources, "default"))


@pytest.mark.parametrize(("text", "words"), [
    ("detect:\n  conf: 1.5\n", "'detect.conf' must be between 0 and 1, got 1.5"),
    ("detect:\n  max_det: 0\n", "'detect.max_det' must be a whole number from 1 to 100000, got 0"),
    ("detect:\n  classes: [pit, -1]\n", "'detect.classes[1]' must be a class name or an index from 0, got -1"),
    ("detect:\n  nms: 0.5\n", "unknown key 'detect.nms'"),
])
def test_a_bad_detect_section_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    sidecar = tmp_path / "best.yaml"
    sidecar.write_text(text)
    with pytest.raises(SidecarError, match="best.yaml: ") as caught:
        load_sidecar(sidecar)
    assert words in str(caught.value)


def test_a_kept_class_that_is_not_the_model_s_is_named(tmp_path: Path) -> None:
    sidecar = tmp_path / "best.yaml"
    sidecar.write_text("detect:\n  classes: [dent]\n")
    with pytest.raises(SidecarError, match="'detect.classes' names 'dent', which is not one of the model's 3"):
        options_from_sidecar(load_sidecar(sidecar), NAMES, sidecar=sidecar)


def test_an_output_of_other_channels_than_the_head_is_one_line() -> None:
    """A graph with symbolic sizes is not checked before it runs: its answer is, on every run."""
    with pytest.raises(InferenceError) as caught:
        detections(head(), np.zeros((1, 9, 40), np.float32), YoloOptions())
    assert str(caught.value) == ("best.onnx: output 'output0' is [1, 9, 40]; its detect head (anchors, 3 classes) "
                                 "has 7 channels on axis 1")
