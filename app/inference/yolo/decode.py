"""A YOLO head's raw outputs → the image's instances, as Ultralytics' predictor makes them (non_max_suppression,
then construct_result): the confidence filter (score > conf, strictly), the best class per box, the classes kept,
class-aware NMS at the IoU limit (oriented boxes: Fast-NMS on their probabilistic IoU), `max_det`; boxes mapped back
to the image and clipped; masks by app.inference.yolo.masks, an instance whose mask is empty dropped as they drop
it. YOLOv5's objectness head scores a box objectness × class (its own non_max_suppression). An end-to-end head's
rows are kept as they are, above the confidence limit, the first `max_det`.

A classify head's probabilities are any classifier's top-k (app.inference.image.postprocess).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.errors import InferenceError
from app.inference.model.instances import Instance, Instances
from app.inference.model.yolo_head import YoloHead
from app.inference.model.yolo_options import YoloOptions
from app.inference.yolo.letterbox import Letterbox, boxes_to_image, centres_to_image
from app.inference.yolo.masks import instance_masks
from app.inference.yolo.nms import MAX_NMS, MAX_WH, fast_nms_rotated, nms


def detections(head: YoloHead, output: np.ndarray, options: YoloOptions) -> np.ndarray:
    """The rows kept, in input pixels, best first: [x0, y0, x1, y1, score, class, extra…] (obb: [cx, cy, w, h,
    score, class, angle]; segment: the mask coefficients as extra). An output of another shape than the head's
    is an InferenceError naming the file (a graph with symbolic sizes could not be checked beforehand)."""
    axis = 1 if head.layout == "anchors" else 2
    if output.ndim != 3 or output.shape[0] != 1 or output.shape[axis] != head.channels:
        raise InferenceError(f"{head.path.name}: output '{head.output}' is {list(output.shape)}; its {head.task} "
                             f"head ({head.layout}, {len(head.names)} classes) has {head.channels} channels on "
                             f"axis {axis}")
    if head.layout == "end2end":
        return _end2end(head, output[0].astype(np.float32), options)
    if head.layout == "objectness":
        rows = _objectness_rows(output[0].astype(np.float32), head.nc, options.conf)
    else:
        rows = _anchor_rows(output[0].astype(np.float32), head.nc, options.conf, rotated=head.task == "obb")
    rows = _kept_classes(rows, options.classes)
    if len(rows) > MAX_NMS:
        rows = rows[np.argsort(-rows[:, 4], kind="stable")[:MAX_NMS]]
    offset = rows[:, 5:6] * (0 if options.agnostic else MAX_WH)
    if head.task == "obb":
        keep = fast_nms_rotated(np.concatenate([rows[:, :2] + offset, rows[:, 2:4], rows[:, -1:]], 1),
                                rows[:, 4], options.iou, limit=options.max_det)
    else:
        keep = nms(rows[:, :4] + offset, rows[:, 4], options.iou, limit=options.max_det)
    kept: np.ndarray = rows[keep[:options.max_det]]
    return kept


def instances(head: YoloHead, rows: np.ndarray, box: Letterbox, protos: np.ndarray | None = None) -> Instances:
    """The detections as the image's instances (boxes mapped back; masks from the prototypes [1, 32, mh, mw])."""
    if head.task == "obb":
        return Instances(tuple(_oriented(head, row, box) for row in rows), box.image_hw)
    boxes = boxes_to_image(rows[:, :4], box)
    if protos is None or not len(rows):
        return Instances(tuple(_plain(head, row, b) for row, b in zip(rows, boxes, strict=True)), box.image_hw)
    _check_protos(head, protos, box)
    _check_mask_pixels(head, boxes, box.image_hw)
    masks = instance_masks(protos[0], rows[:, 6:6 + head.mask_dim], boxes, box.image_hw)
    items = tuple(Instance(class_index=int(row[5]), class_name=_name(head.names, row[5]), score=float(row[4]),
                           box=_box(b), mask=mask, mask_box=pixel_box)
                  for row, b, (mask, pixel_box) in zip(rows, boxes, masks, strict=True) if mask.any())
    return Instances(items, box.image_hw)


def _anchor_rows(prediction: np.ndarray, nc: int, conf: float, *, rotated: bool) -> np.ndarray:
    """[C, N] → rows above the confidence limit: box (corners; obb: centre-size), score, class, extra."""
    candidates = prediction[:, prediction[4:4 + nc].max(0) > conf].T
    box = candidates[:, :4] if rotated else _corners(candidates[:, :4])
    return _best_class(box, candidates[:, 4:4 + nc], candidates[:, 4 + nc:], conf)


def _objectness_rows(prediction: np.ndarray, nc: int, conf: float) -> np.ndarray:
    """YOLOv5's [N, 5 + nc + extra] → rows: objectness above the limit, score objectness × class."""
    candidates = prediction[prediction[:, 4] > conf]
    scores = candidates[:, 5:5 + nc] * candidates[:, 4:5]
    return _best_class(_corners(candidates[:, :4]), scores, candidates[:, 5 + nc:], conf)


def _best_class(box: np.ndarray, scores: np.ndarray, extra: np.ndarray, conf: float) -> np.ndarray:
    best = scores.argmax(1) if len(scores) else np.zeros(0, dtype=np.int64)
    score = np.take_along_axis(scores, best[:, None], 1) if len(scores) else np.zeros((0, 1), np.float32)
    rows = np.concatenate([box, score, best[:, None].astype(np.float32), extra], 1)
    return rows[score[:, 0] > conf]


def _end2end(head: YoloHead, prediction: np.ndarray, options: YoloOptions) -> np.ndarray:
    """The rows above the confidence limit, the first `max_det`; InferenceError (one line naming the file) for a
    row naming a class the head has not (its class is the model's word, not an argmax over its classes)."""
    rows = prediction[prediction[:, 4] > options.conf]
    classes = rows[:, 5]
    wrong = classes[(classes < 0) | (classes >= head.nc) | (classes != np.floor(classes))]
    if len(wrong):
        raise InferenceError(f"{head.path.name}: output '{head.output}' names class {float(wrong[0]):g} in "
                             f"{len(wrong)} {'row' if len(wrong) == 1 else 'rows'}; the head has {head.nc} "
                             f"(0 to {head.nc - 1})")
    return _kept_classes(rows, options.classes)[:options.max_det]


def _check_protos(head: YoloHead, protos: np.ndarray, box: Letterbox) -> None:
    """The prototypes as the head has them, [1, 32, mh, mw] at a quarter of the input (each side 1 to a quarter,
    rounded up): checked before their resampling matrices, which grow with their size, are made."""
    h, w = box.input_hw
    shape = protos.shape
    if (protos.ndim != 4 or shape[:2] != (1, head.mask_dim) or not 0 < shape[2] <= -(-h // 4)
            or not 0 < shape[3] <= -(-w // 4)):
        raise InferenceError(f"{head.path.name}: prototypes output '{head.protos}' is {list(shape)}; the head's "
                             f"are [1, {head.mask_dim}, H/4, W/4] of its {h}x{w} input")


MAX_MASK_PIXELS = 1 << 30  # all of one picture's instance masks together (bool: 1 GiB)


def _check_mask_pixels(head: YoloHead, boxes: np.ndarray, image_hw: tuple[int, int]) -> None:
    """The pixels every box's mask covers, at most MAX_MASK_PIXELS, before any mask is made."""
    h, w = image_hw
    widths = (np.ceil(boxes[:, 2].clip(0, w)) - np.ceil(boxes[:, 0].clip(0, w))).clip(min=0)
    heights = (np.ceil(boxes[:, 3].clip(0, h)) - np.ceil(boxes[:, 1].clip(0, h))).clip(min=0)
    total = float((widths.astype(np.float64) * heights).sum())
    if total > MAX_MASK_PIXELS:
        raise InferenceError(f"{head.path.name}: {len(boxes)} instances' masks would cover {total:,.0f} pixels of "
                             f"the {h}x{w} picture (over {MAX_MASK_PIXELS:,}): boxes this large are no answer to "
                             "decode")


def _kept_classes(rows: np.ndarray, classes: tuple[int, ...] | None) -> np.ndarray:
    return rows if classes is None else rows[np.isin(rows[:, 5], classes)]


def _corners(xywh: np.ndarray) -> np.ndarray:
    half = xywh[:, 2:4] / 2
    return np.concatenate([xywh[:, :2] - half, xywh[:, :2] + half], 1)


def _plain(head: YoloHead, row: np.ndarray, box: np.ndarray) -> Instance:
    return Instance(class_index=int(row[5]), class_name=_name(head.names, row[5]), score=float(row[4]), box=_box(box))


MAX_OBB_REACH = 16  # an oriented box's centre and sides, in picture sizes: past it, no answer about the picture


def _oriented(head: YoloHead, row: np.ndarray, box: Letterbox) -> Instance:
    """An oriented box in image pixels (scale_boxes' xywh: not clipped), its bounds as the axis-aligned box;
    InferenceError for one whose centre or sides are past MAX_OBB_REACH picture sizes (not finite, or drawn and
    written as integers that overflow)."""
    with np.errstate(over="ignore"):  # a lying head's 3e38 overflows: refused below
        cx, cy, w, h = (float(v) for v in centres_to_image(row[None, :4], box)[0])
    reach = MAX_OBB_REACH * max(box.image_hw)
    if not all(abs(v) <= reach for v in (cx, cy, w, h)):
        raise InferenceError(f"{head.path.name}: output '{head.output}' gives an oriented box (centre {cx:.4g}, "
                             f"{cy:.4g}, size {w:.4g} x {h:.4g}) over {MAX_OBB_REACH} times the "
                             f"{box.image_hw[0]}x{box.image_hw[1]} picture's size away or across")
    angle = float(row[6])
    cos, sin = np.cos(angle), np.sin(angle)
    dx, dy = abs(w / 2 * cos) + abs(h / 2 * sin), abs(w / 2 * sin) + abs(h / 2 * cos)
    return Instance(class_index=int(row[5]), class_name=_name(head.names, row[5]), score=float(row[4]),
                    box=(cx - dx, cy - dy, cx + dx, cy + dy), angle=angle, rotated=(cx, cy, w, h, angle))


def _box(values: np.ndarray) -> tuple[float, float, float, float]:
    return float(values[0]), float(values[1]), float(values[2]), float(values[3])


def _name(names: Sequence[str], index: float) -> str:
    position = int(index)
    return names[position] if 0 <= position < len(names) else f"class{position}"
