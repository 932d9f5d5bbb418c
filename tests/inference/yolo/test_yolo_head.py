"""An Ultralytics export told from its graph and metadata: the task, the head's layout, the classes, the working
size, each value's source; a head that does not fit its task refused in one line naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ModelError
from app.inference.model.onnx_graph import GraphInfo, TensorInfo
from app.inference.model.yolo_head import is_ultralytics, read_head

PATH = Path("/models/best.onnx")
NAMES = "{0: 'pit', 1: 'scratch', 2: 'stain'}"


def graph(outputs: list[tuple[str, tuple[int | str | None, ...]]], *, metadata: dict[str, str] | None = None,
          image: tuple[int | str | None, ...] = (1, 3, 160, 160)) -> GraphInfo:
    return GraphInfo(inputs=(TensorInfo("images", image, "float32"),),
                     outputs=tuple(TensorInfo(name, shape, "float32") for name, shape in outputs),
                     metadata=metadata or {}, final_ops={}, argmax_channels={}, opset=17, producer="pytorch")


def ultralytics(task: str, **extra: str) -> dict[str, str]:
    return {"author": "Ultralytics", "task": task, "names": NAMES, "imgsz": "[160, 160]", "stride": "32",
            "end2end": "False", **extra}


ANCHORS = 20 * 20 + 10 * 10 + 5 * 5  # strides 8, 16, 32 over 160 × 160


def test_a_segment_export_is_read_from_its_metadata() -> None:
    head = read_head(PATH, graph([("output0", (1, 4 + 3 + 32, ANCHORS)), ("output1", (1, 32, 40, 40))],
                                 metadata=ultralytics("segment")))
    assert (head.task, head.layout, head.names) == ("segment", "anchors", ("pit", "scratch", "stain"))
    assert (head.imgsz, head.stride, head.protos, head.mask_dim) == ((160, 160), 32, "output1", 32)
    assert head.sources == {"task": "metadata", "imgsz": "metadata", "names": "metadata", "stride": "metadata",
                            "layout": "graph"}


def test_a_metadata_less_anchor_head_is_still_a_yolo_head() -> None:
    found = graph([("output0", (1, 4 + 5, ANCHORS))])
    assert is_ultralytics(found)
    head = read_head(PATH, found)
    assert (head.task, head.layout, head.names) == ("detect", "anchors", tuple(f"class{i}" for i in range(5)))
    assert head.sources["names"] == head.sources["imgsz"] == head.sources["task"] == "graph"


def test_a_plain_segmentation_model_is_not_a_yolo_head() -> None:
    assert not is_ultralytics(graph([("logits", (1, 3, 160, 160))]))
    assert not is_ultralytics(graph([("output0", (1, 9, ANCHORS + 1))]))


def test_yolov5_objectness_layout() -> None:
    head = read_head(PATH, graph([("output0", (1, 3 * ANCHORS, 5 + 3))], metadata={"names": NAMES}))
    assert (head.layout, head.nc) == ("objectness", 3)


def test_yolov5_s_own_exports_are_told_by_their_shape() -> None:
    """YOLOv5's export.py writes only `stride` and `names`: its detect and segment heads are still YOLO heads."""
    metadata = {"stride": "32", "names": NAMES}
    detect = graph([("output0", (1, 3 * ANCHORS, 5 + 3))], metadata=metadata)
    segment = graph([("output0", (1, 3 * ANCHORS, 5 + 3 + 32)), ("output1", (1, 32, 40, 40))], metadata=metadata)
    assert is_ultralytics(detect) and is_ultralytics(segment)
    head = read_head(PATH, segment)
    assert (head.task, head.layout, head.nc, head.protos, head.imgsz) == ("segment", "objectness", 3, "output1",
                                                                          (160, 160))
    assert not is_ultralytics(graph([("output0", (1, 3 * ANCHORS + 3, 8))]))


@pytest.mark.parametrize("metadata", [ultralytics("detect", end2end="True"),
                                      ultralytics("detect", args="{'batch': 1, 'nms': True}")])
def test_end_to_end_from_the_metadata(metadata: dict[str, str]) -> None:
    head = read_head(PATH, graph([("output0", (1, 300, 6))], metadata=metadata))
    assert (head.layout, head.sources["layout"]) == ("end2end", "metadata")


def test_end_to_end_segment_and_obb_rows() -> None:
    segment = read_head(PATH, graph([("output0", (1, 300, 38)), ("output1", (1, 32, 40, 40))],
                                    metadata=ultralytics("segment", end2end="True")))
    obb = read_head(PATH, graph([("output0", (1, 300, 7))], metadata=ultralytics("obb", end2end="True")))
    assert (segment.layout, segment.protos, obb.layout) == ("end2end", "output1", "end2end")


def test_classify_and_obb_heads() -> None:
    classify = read_head(PATH, graph([("output0", (1, 3))], metadata=ultralytics("classify", imgsz="224"),
                                     image=(1, 3, 224, 224)))
    obb = read_head(PATH, graph([("output0", (1, 4 + 3 + 1, ANCHORS))], metadata=ultralytics("obb")))
    assert (classify.layout, classify.imgsz, classify.nc) == ("scores", (224, 224), 3)
    assert (obb.task, obb.layout) == ("obb", "anchors")


def test_a_dynamic_export_keeps_its_trained_size_and_says_it_is_dynamic() -> None:
    head = read_head(PATH, graph([("output0", ("batch", 4 + 3, "anchors"))], metadata=ultralytics("detect"),
                                 image=("batch", 3, "height", "width")))
    assert (head.layout, head.imgsz, head.dynamic) == ("anchors", (160, 160), True)


def test_the_sidecar_names_and_size_come_first() -> None:
    head = read_head(PATH, graph([("output0", (1, 4 + 2, ANCHORS))], metadata=ultralytics("detect", names="")),
                     sidecar={"classes": (("ok", None, None), ("ng", None, None)), "input.size": (160, 160)})
    assert head.names == ("ok", "ng")
    assert head.sources["names"] == head.sources["imgsz"] == "sidecar"


@pytest.mark.parametrize(("outputs", "metadata", "words"), [
    ([("output0", (1, 4 + 80, ANCHORS))], ultralytics("detect"),
     "output 'output0' has 84 channels; a detect head (anchors) of 3 classes has 7 (4 box + classes)"),
    ([("output0", (1, 4 + 3 + 32, ANCHORS))], ultralytics("segment"),
     "a segment head needs its prototypes output [1, 32, H/4, W/4]"),
    ([("output0", (1, 4 + 3 + 32, ANCHORS)), ("output1", (1, 16, 40, 40))], ultralytics("segment"),
     "prototypes output 'output1' has 16 masks, expected 32"),
    ([("output0", (1, 300, 6))], {"end2end": "True", "task": "detect", "names": "", "imgsz": "160"},
     "an end-to-end head does not say its classes"),
    ([("output0", (1, 4, ANCHORS))], {}, "has over 4 (4 box + classes)"),
    ([("output0", (1, 5))], ultralytics("classify"), "output 'output0' has 5 classes, the metadata names 3"),
    ([("output0", (1, "channels", "anchors"))], {"task": "detect", "imgsz": "160"}, "does not say its channels"),
    ([("output0", (1, 17))], ultralytics("pose"), "an Ultralytics 'pose' export: SegLens opens segment, detect"),
])
def test_a_malformed_head_is_one_line_naming_the_file(outputs: list[tuple[str, tuple[int | str, ...]]],
                                                      metadata: dict[str, str], words: str) -> None:
    with pytest.raises(ModelError) as caught:
        read_head(PATH, graph(outputs, metadata=metadata))
    message = str(caught.value)
    assert message.startswith("best.onnx: ") and "\n" not in message
    assert words in message


def test_symbolic_channels_follow_from_the_named_classes() -> None:
    """A dynamic export left unsimplified names every size; its channels are checked on every run instead."""
    head = read_head(PATH, graph([("output0", (1, "c", "anchors")), ("output1", (1, 32, "h", "w"))],
                                 metadata=ultralytics("segment")))
    assert (head.layout, head.nc, head.channels) == ("anchors", 3, 4 + 3 + 32)


def test_a_dynamic_input_without_a_size_is_refused() -> None:
    with pytest.raises(ModelError, match="give input.size in the sidecar"):
        read_head(PATH, graph([("output0", (1, 7, "anchors"))], metadata={"task": "detect", "names": NAMES},
                              image=(1, 3, "height", "width")))
