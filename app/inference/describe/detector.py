"""What `seglens-cli info` says of an Ultralytics YOLO export (segment, detect, obb, classify): that it is one, its
task, head layout, working size, stride, whether its input is dynamic, how its predictions are kept (conf, IoU,
max_det, agnostic NMS, the classes kept) — each value with where it came from (the ONNX metadata, the graph, the
sidecar or Ultralytics' default) — for people (`detector_lines`) and for tools (`detector_dict`)."""

from __future__ import annotations

from typing import Any

from app.inference.model.spec import ModelSpec
from app.inference.model.yolo_head import YoloHead
from app.inference.yolo.letterbox import PAD_VALUE

_TASK_TEXT = {"segment": "boxes, classes and masks", "detect": "boxes and classes",
              "obb": "oriented boxes and classes", "classify": "one class per image"}
_LAYOUT_TEXT = {"anchors": "one column per candidate, NMS here",
                "objectness": "YOLOv5's rows with an objectness score, NMS here",
                "end2end": "boxes kept inside the graph (NMS or an NMS-free head)",
                "scores": "class probabilities"}


def detector_lines(spec: ModelSpec) -> list[str]:
    """The `export`, `task`, `input`, `output` and `detect` lines of a YOLO export's `info` (spec.detector set)."""
    assert spec.detector is not None  # info asks for a YOLO export's lines only
    head, src = spec.detector.head, spec.sources
    lines = [
        _line("export", f"Ultralytics YOLO ({_recognised_by(spec)})"),
        _line("task", f"{spec.task} ({head.task}: {_TASK_TEXT[head.task]})", src.get("task")),
        "input",
        _line("tensor", spec.inputs[0].describe()),
        _line("imgsz", f"{head.imgsz[0]}×{head.imgsz[1]} (H×W) {_preprocess_text(head)}", src.get("input.size")),
        _line("stride", head.stride, src.get("input.stride")),
        _line("dynamic", "yes: letterboxed to the smallest stride multiple around the image" if head.dynamic
              else "no (fixed input size)"),
        "output",
        _line("layout", f"{head.layout} ({_LAYOUT_TEXT[head.layout]})", src.get("output.layout")),
        _line("tensor", f"{_tensor(spec, head.output)}{_channels_text(head)}"),
    ]
    if head.protos is not None:
        lines.append(_line("prototypes", f"{_tensor(spec, head.protos)} ({head.mask_dim} mask prototypes)"))
    return lines + (_detect_lines(spec) if head.task != "classify" else [])


def _detect_lines(spec: ModelSpec) -> list[str]:
    assert spec.detector is not None
    options, src = spec.detector.options, spec.sources
    kept = "all" if options.classes is None else ", ".join(spec.class_names[i] for i in options.classes)
    return [
        "detect",
        _line("conf", f"{options.conf:g} (objects scoring below it are dropped)", src.get("detect.conf")),
        _line("iou", f"{options.iou:g} (NMS overlap)", src.get("detect.iou")),
        _line("max_det", options.max_det, src.get("detect.max_det")),
        _line("agnostic", "yes (NMS across classes)" if options.agnostic else "no (NMS per class)",
              src.get("detect.agnostic")),
        _line("classes", kept, src.get("detect.classes")),
    ]


def detector_dict(spec: ModelSpec) -> dict[str, Any] | None:
    """`info --json`'s `detector` object (None for a model that is no YOLO export)."""
    if spec.detector is None:
        return None
    head, options = spec.detector.head, spec.detector.options
    return {"format": "ultralytics", "recognised_by": _recognised_by(spec), "task": head.task,
            "layout": head.layout, "imgsz": list(head.imgsz), "stride": head.stride, "dynamic": head.dynamic,
            "output": head.output, "prototypes": head.protos, "mask_dim": head.mask_dim,
            "conf": options.conf, "iou": options.iou, "max_det": options.max_det, "agnostic": options.agnostic,
            "classes": None if options.classes is None else list(options.classes),
            "sources": {key: value for key, value in spec.sources.items() if key in _SOURCE_KEYS or
                        key.startswith("detect.")}}


_SOURCE_KEYS = ("task", "output.layout", "input.size", "input.stride", "classes")


def _recognised_by(spec: ModelSpec) -> str:
    meta = spec.metadata
    if meta.get("author", "").startswith("Ultralytics") or "task" in meta:
        return "its ONNX metadata"
    return "its output's shape (no Ultralytics metadata)"


def _preprocess_text(head: YoloHead) -> str:
    if head.task == "classify":
        return "shorter side resized, centre cropped, RGB, /255"
    return f"letterboxed (padding {PAD_VALUE}), RGB, /255"


def _channels_text(head: YoloHead) -> str:
    nc = head.nc
    extra = {"segment": f" + {head.mask_dim} mask coefficients", "obb": " + angle"}.get(head.task, "")
    if head.layout == "anchors":
        return f": 4 box + {nc} class scores{extra} per candidate"
    if head.layout == "objectness":
        return f": 4 box + objectness + {nc} class scores{extra} per row"
    if head.layout == "end2end":
        return f": 4 corners + score + class{extra} per kept object"
    return f": {nc} class probabilities"


def _tensor(spec: ModelSpec, name: str) -> str:
    return next((t.describe() for t in spec.outputs if t.name == name), name)


def _line(label: str, value: object, source: str | None = None) -> str:
    return f"  {label:<14}{value}" + (f"  [{source}]" if source else "")
