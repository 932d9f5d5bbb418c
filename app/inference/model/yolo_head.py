"""What an Ultralytics YOLO export is, read from its graph and its ONNX metadata: the task (segment, detect,
classify, obb), the head's layout, the classes, the working size and stride — each value with where it came from
("metadata", "graph" or "sidecar"), for `info` to show.

Ultralytics writes `author`, `task`, `names`, `imgsz`, `stride`, `batch`, `end2end` and `args` into the ONNX
metadata as Python literals (`"[320, 320]"`, `"{0: 'pit', 1: 'scratch'}"`). A file without them is still taken
for a YOLO head when its one output has the anchor count of strides 8, 16 and 32 over its fixed input.

The layouts (B = 1):
- `anchors` (v8, 11, v5u): `[1, 4 + nc (+32 | +1 angle), N]`, boxes as centre and size; + prototypes
  `[1, 32, H/4, W/4]` for segment.
- `objectness` (YOLOv5's own export): `[1, N, 5 + nc (+32)]`, box, objectness, classes.
- `end2end` (NMS inside the graph, the NMS-free heads): `[1, max_det, 6 (+32 | +1 angle)]`, corners, score, class.
- `scores` (classify): `[1, nc]` probabilities.
A head that does not fit its task (a channel count that disagrees with its classes, prototypes missing) is refused
in one line naming the file.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from app.errors import ModelError
from app.inference.model.labels import MAX_LABELS
from app.inference.model.metadata import parse_name_list
from app.inference.model.onnx_graph import GraphInfo, TensorInfo
from app.inference.model.validators import visible

TASKS = ("segment", "detect", "classify", "obb")
LAYOUTS = ("anchors", "objectness", "end2end", "scores")
MASK_DIM = 32  # prototype masks of every Ultralytics segment head
STRIDES = (8, 16, 32)
MAX_METADATA_CHARS = 1 << 16  # imgsz, args: a few dozen characters; more is not an Ultralytics export
MAX_IMGSZ_PIXELS = 4096 * 4096  # a working size from the metadata (the sidecar's input.size may say more)
# classes a head may have: detection vocabularies are up to LVIS's 1203 (each class is two report columns, and the
# label PNG is 16-bit); a classifier's up to ImageNet-21k's ~22k, as any classifier's (labels.MAX_LABELS)
MAX_INSTANCE_CLASSES = 10_000


@dataclass(frozen=True)
class YoloHead:
    """An Ultralytics export as SegLens reads it. `sources` says where each value came from, by field name."""

    path: Path
    task: str  # one of TASKS
    layout: str  # one of LAYOUTS
    names: tuple[str, ...]
    input_name: str
    imgsz: tuple[int, int]  # (H, W) the image is letterboxed to
    stride: int
    output: str  # the predictions (the probabilities of a classify head)
    protos: str | None = None  # segment: the prototypes' output
    mask_dim: int = 0  # segment: coefficients per box (32)
    dynamic: bool = False  # the input's height and width are free: letterboxed to the smallest stride multiple
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def nc(self) -> int:
        return len(self.names)

    @property
    def channels(self) -> int:
        """The predictions' channels this head has (checked on every run: a graph whose sizes are symbolic says
        nothing of them beforehand)."""
        if self.layout == "scores":
            return self.nc
        extra = self.mask_dim if self.task == "segment" else 1 if self.task == "obb" else 0
        return _FIXED[self.layout] + extra + (self.nc if self.layout != "end2end" else 0)


def is_ultralytics(graph: GraphInfo) -> bool:
    """Whether the file says it is an Ultralytics export (its metadata), or its first output is a YOLO head by its
    shape: v8/11's anchors `[1, 4 + nc, N]` or YOLOv5's `[1, 3 N, 5 + nc]` over the fixed input's grid cells."""
    meta = graph.metadata
    if meta.get("author", "").startswith("Ultralytics") or (meta.get("task") in TASKS and "names" in meta):
        return True
    return _anchor_head(graph) is not None or _objectness_head(graph)


def read_head(path: Path, graph: GraphInfo, *, sidecar: Mapping[str, Any] | None = None) -> YoloHead:
    """The head of `path`'s graph, every value from the sidecar's values (`classes`, `input.size`), else the
    metadata, else the graph. ModelError (one line naming the file) when it is no YOLO head, or a malformed one."""
    values = sidecar or {}
    sources: dict[str, str] = {}
    if len(graph.inputs) != 1 or graph.inputs[0].shape is None or len(graph.inputs[0].shape) != 4:
        raise ModelError(f"{path.name}: a YOLO export has one image input [1, 3, H, W], the graph has "
                         f"{', '.join(t.describe() for t in graph.inputs) or 'none'}")
    task = _task(path, graph, sources)
    imgsz = _imgsz(path, graph, values, sources)
    names = _names(graph, values, sources)
    stride = _meta_int(graph.metadata, "stride")
    sources["stride"] = "metadata" if stride is not None else "default"
    head = _layout(path, graph, task, names, sources)
    return YoloHead(path=path, task=task, layout=head.layout, names=head.names, input_name=graph.inputs[0].name,
                    imgsz=imgsz, stride=stride or 32, output=head.output, protos=head.protos,
                    mask_dim=head.mask_dim, dynamic=_dynamic(graph), sources=sources)


@dataclass(frozen=True)
class _Layout:
    layout: str
    names: tuple[str, ...]
    output: str
    protos: str | None = None
    mask_dim: int = 0


def _task(path: Path, graph: GraphInfo, sources: dict[str, str]) -> str:
    task = graph.metadata.get("task")
    if task in TASKS:
        sources["task"] = "metadata"
        return task
    if task is not None:
        raise ModelError(f"{path.name}: an Ultralytics '{_short(task)}' export: SegLens opens segment, detect, "
                         "classify and obb")
    sources["task"] = "graph"
    outputs = graph.outputs
    if len(outputs) == 2 and _rank(outputs[1]) == 4:
        return "segment"
    if len(outputs) == 1 and _rank(outputs[0]) == 2:
        return "classify"
    return "detect"


def _imgsz(path: Path, graph: GraphInfo, values: Mapping[str, Any], sources: dict[str, str]) -> tuple[int, int]:
    size = values.get("input.size")
    if isinstance(size, tuple):
        sources["imgsz"] = "sidecar"
        return int(size[0]), int(size[1])
    height, width = (graph.inputs[0].shape or (1, 3, None, None))[2:]
    fixed = (height, width) if _positive_int(height) and _positive_int(width) else None
    claimed = _meta_imgsz(graph.metadata.get("imgsz"))
    if claimed is not None and fixed is not None and claimed != fixed:
        raise ModelError(f"{path.name}: the metadata's imgsz {_short(str(list(claimed)))} is not the graph's "
                         f"fixed input {list(fixed)} (H, W): a letterbox of the metadata's size could not be run")
    if claimed is not None and fixed is None and claimed[0] * claimed[1] > MAX_IMGSZ_PIXELS:
        raise ModelError(f"{path.name}: the metadata's imgsz {_short(str(list(claimed)))} is past "
                         f"{MAX_IMGSZ_PIXELS:,} pixels (every picture would be letterboxed to it): give "
                         "input.size in the sidecar")
    if claimed is not None:
        sources["imgsz"] = "metadata"
        return claimed
    if fixed is not None:
        sources["imgsz"] = "graph"
        return fixed
    raise ModelError(f"{path.name}: the working size is in neither the metadata (imgsz) nor the graph (a dynamic "
                     "input): give input.size in the sidecar")


def _meta_imgsz(raw: str | None) -> tuple[int, int] | None:
    """The metadata's imgsz as (H, W) (`[H, W]` or one side for both), None where it says none."""
    literal = _literal(raw)
    values = literal if isinstance(literal, list) and len(literal) == 2 else [literal, literal]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        return None
    return int(values[0]), int(values[1])


def _names(graph: GraphInfo, values: Mapping[str, Any], sources: dict[str, str]) -> tuple[str, ...] | None:
    classes = values.get("classes")
    if classes:
        sources["names"] = "sidecar"
        return tuple(str(item[0]) for item in classes)
    raw = graph.metadata.get("names")
    parsed = parse_name_list(raw) if raw else None
    if parsed:
        sources["names"] = "metadata"
        return tuple(parsed)
    return None  # counted from the head's channels (named class0, class1, …)


def _layout(path: Path, graph: GraphInfo, task: str, names: tuple[str, ...] | None,
            sources: dict[str, str]) -> _Layout:
    first = graph.outputs[0]
    if task == "classify":
        return _classify(path, first, names, sources)
    rows, columns = _tail(path, first)
    extra = {"segment": MASK_DIM, "obb": 1, "detect": 0}[task]
    protos = _protos(path, graph) if task == "segment" else None
    sources["layout"] = "graph"
    if _end2end(graph.metadata):
        sources["layout"] = "metadata"
        layout = "end2end"
    elif columns is None or (rows is not None and rows <= columns):
        # channels first: [4 + nc (+ extra), N]; every size symbolic (a dynamic export not simplified): v8/11's too
        layout = "anchors"
    elif columns == 6 + extra and rows != 3 * (_anchor_count(graph) or -1):  # YOLOv5: 3 anchors per cell
        layout = "end2end"
    elif task == "obb":
        raise ModelError(f"{path.name}: output '{first.name}' {_dims(first.shape)} is no obb head (expected "
                         "[1, 4 + classes + 1, N] with N above the channels)")
    else:
        layout = "objectness"
    channels = rows if layout == "anchors" else columns
    if channels is None and names is not None and rows is None and columns is None:
        # a dynamic export not simplified (onnxslim) names every size: the channels follow from the named classes
        channels = _FIXED[layout] + extra + (len(names) if layout != "end2end" else 0)
    if channels is None:
        raise ModelError(f"{path.name}: output '{first.name}' {_dims(first.shape)} does not say its channels (a "
                         f"{layout} head's are fixed)")
    names = _checked_names(path, first, task, layout, channels, names, extra, sources)
    return _Layout(layout, names, first.name, protos, MASK_DIM if protos else 0)


_FIXED = {"anchors": 4, "objectness": 5, "end2end": 6}  # channels before the classes (end2end: score, class)


def _checked_names(path: Path, output: TensorInfo, task: str, layout: str, channels: int,
                   names: tuple[str, ...] | None, extra: int, sources: dict[str, str]) -> tuple[str, ...]:
    """The classes, once the head's channel count agrees with them; counted from the channels when not named."""
    per_class = 0 if layout == "end2end" else 1
    counted = channels - _FIXED[layout] - extra
    _check_class_count(path, task, len(names) if names is not None else counted * per_class,
                       sources.get("names", "graph"))
    if names is None and per_class and counted >= 1:
        sources["names"] = "graph"
        return tuple(f"class{index}" for index in range(counted))
    wanted = _FIXED[layout] + extra + (len(names) * per_class if names is not None else 0)
    if names is None or channels != wanted:
        classes = "any classes" if not per_class else (
            f"{len(names)} {'class' if len(names) == 1 else 'classes'}" if names else "at least one class")
        if names is None and not per_class and channels == wanted:
            raise ModelError(f"{path.name}: an end-to-end head does not say its classes: give them in the metadata "
                             "(names) or the sidecar (classes)")
        raise ModelError(f"{path.name}: output '{output.name}' has {channels} channels; a {task} head ({layout}) of "
                         f"{classes} has {wanted if names is not None or not per_class else f'over {wanted}'} "
                         f"({_parts(layout, extra)})")
    return names


def _check_class_count(path: Path, task: str, count: int, source: str) -> None:
    """A head's classes at most MAX_INSTANCE_CLASSES (a classifier's MAX_LABELS), checked before any is named."""
    limit = MAX_LABELS if task == "classify" else MAX_INSTANCE_CLASSES
    if count > limit:
        raise ModelError(f"{path.name}: a {task} head of {count:,} classes (from the {source}); SegLens reads at "
                         f"most {limit:,}")


def _classify(path: Path, output: TensorInfo, names: tuple[str, ...] | None, sources: dict[str, str]) -> _Layout:
    shape = output.shape
    count = shape[-1] if shape is not None and len(shape) == 2 else None
    if not isinstance(count, int) or count < 1:
        raise ModelError(f"{path.name}: a classify head answers [1, classes], output '{output.name}' is "
                         f"{_dims(shape)}")
    _check_class_count(path, "classify", count, "graph")
    if names is not None and len(names) != count:
        raise ModelError(f"{path.name}: output '{output.name}' has {count} classes, the "
                         f"{sources.get('names', 'metadata')} names {len(names)}")
    if names is None:
        sources["names"] = "graph"
        names = tuple(f"class{index}" for index in range(count))
    sources["layout"] = "graph"
    return _Layout("scores", names, output.name)


def _protos(path: Path, graph: GraphInfo) -> str:
    found = [o for o in graph.outputs[1:] if _rank(o) == 4]
    if not found:
        raise ModelError(f"{path.name}: a segment head needs its prototypes output [1, {MASK_DIM}, H/4, W/4]; the "
                         f"graph has {', '.join(o.describe() for o in graph.outputs)}")
    shape = found[0].shape or ()
    if shape[1] not in (MASK_DIM, None):
        raise ModelError(f"{path.name}: prototypes output '{found[0].name}' has {shape[1]} masks, expected "
                         f"{MASK_DIM}")
    return found[0].name


def _tail(path: Path, output: TensorInfo) -> tuple[int | None, int | None]:
    """The two sizes after the batch: channels and anchors (or rows and channels); None where symbolic (a dynamic
    export's anchors)."""
    shape = output.shape
    if shape is None or len(shape) != 3:
        raise ModelError(f"{path.name}: a YOLO head's output is [1, channels, N], output '{output.name}' is "
                         f"{_dims(shape)}")
    return tuple(d if isinstance(d, int) else None for d in shape[1:])  # type: ignore[return-value]


def _anchor_head(graph: GraphInfo) -> int | None:
    """The class count of a graph whose first output is `[1, 4 + nc, N]` with N the anchors of strides 8, 16 and 32
    over its fixed input (a metadata-less v8/11 export), else None."""
    anchors = _anchor_count(graph)
    shape = graph.outputs[0].shape if graph.outputs else None
    if anchors is None or shape is None or len(shape) != 3 or shape[2] != anchors:
        return None
    channels = shape[1]
    return channels - 4 if isinstance(channels, int) and channels > 4 else None


def _objectness_head(graph: GraphInfo) -> bool:
    """Whether the first output is YOLOv5's `[1, 3 N, 5 + nc (+32)]`: 3 anchors per grid cell of strides 8, 16, 32."""
    cells = _anchor_count(graph)
    shape = graph.outputs[0].shape if graph.outputs else None
    if cells is None or shape is None or len(shape) != 3:
        return False
    return shape[1] == 3 * cells and isinstance(shape[2], int) and shape[2] > 5


def _anchor_count(graph: GraphInfo) -> int | None:
    """The grid cells of strides 8, 16 and 32 over the graph's fixed input, None for a dynamic one."""
    shape = graph.inputs[0].shape if len(graph.inputs) == 1 else None
    if shape is None or len(shape) != 4 or not isinstance(shape[2], int) or not isinstance(shape[3], int):
        return None
    return sum((shape[2] // s) * (shape[3] // s) for s in STRIDES)


def _dynamic(graph: GraphInfo) -> bool:
    """Whether the input's height or width is free (an export with `dynamic=True`)."""
    shape = graph.inputs[0].shape or ()
    return not all(isinstance(d, int) for d in shape[2:])


def _end2end(meta: Mapping[str, str]) -> bool:
    if meta.get("end2end", "").strip() == "True":
        return True
    args = _literal(meta.get("args"))
    return isinstance(args, dict) and args.get("nms") is True


def _literal(raw: str | None) -> Any:
    if raw is None or len(raw) > MAX_METADATA_CHARS:
        return None
    try:
        return ast.literal_eval(raw)
    except Exception:  # metadata is free text: whatever it holds, it must never stop a model loading
        return None


def _meta_int(meta: Mapping[str, str], key: str) -> int | None:
    value = _literal(meta.get(key))
    return int(value) if _positive_int(value) else None


def _positive_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 16384


def _rank(info: TensorInfo) -> int | None:
    return None if info.shape is None else len(info.shape)


def _dims(shape: tuple[Any, ...] | None) -> str:
    return "of unknown shape" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _parts(layout: str, extra: int) -> str:
    start = {"anchors": "4 box + classes", "objectness": "4 box + 1 objectness + classes",
             "end2end": "4 box + score + class"}[layout]
    return start + {0: "", 1: " + 1 angle", MASK_DIM: f" + {MASK_DIM} mask coefficients"}[extra]


def _short(text: str) -> str:
    """A metadata value for a message: control characters spelt out, at most 40 characters."""
    shown = visible(text)
    return shown if len(shown) <= 40 else shown[:37] + "..."
