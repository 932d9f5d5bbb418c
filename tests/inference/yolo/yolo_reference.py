"""Ultralytics as the reference (test-only, AGPL-3.0: never imported by app/): models built from its own YAMLs with
seeded random weights, exported to ONNX at a small working size, and its predictor's answer on the same file and
image as plain arrays.

Random weights score every class near the detection head's prior (a few 1e-4), and untouched batch norms let whole
levels of the head collapse to one value (every anchor of a level tied). So the batch norms' statistics are taken
from a few random images, and the last layer of each class branch is scaled by the variant's `gain` and biased to its
`bias` (with a seeded jitter): hundreds of candidates of distinct scores above Ultralytics' default conf 0.25, dozens to
hundreds of instances after NMS at iou 0.7 — NMS, max_det and the masks all at work. The gains are per family: the
11 heads' logits are larger (a gain of 0.03 saturates their scores at exactly 1.0, tied).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLASSES = 3
@dataclass(frozen=True)
class Variant:
    """One export: the model YAML, its task, and the export's options."""

    name: str
    yaml: str
    task: str
    nms: bool = False
    imgsz: int | tuple[int, int] = 160
    dynamic: bool = False  # free height and width: Ultralytics predicts at its default 640 unless told the size
    simplify: bool = True  # onnxslim over the exported graph (Ultralytics' default; without it a dynamic export's
    #                        channels are symbolic)
    gain: float = 0.03  # the class logits' last layer scaled by it
    bias: float = -1.5  # … and biased to it


VARIANTS = {
    "v8-seg": Variant("v8-seg", "yolov8n-seg.yaml", "segment"),
    "11-seg": Variant("11-seg", "yolo11n-seg.yaml", "segment", imgsz=(160, 224), gain=0.005),
    "v8-det": Variant("v8-det", "yolov8n.yaml", "detect"),
    "11-det": Variant("11-det", "yolo11n.yaml", "detect", imgsz=(192, 160), gain=0.005),
    "v5u-det": Variant("v5u-det", "yolov5n.yaml", "detect", bias=-1.0),  # yolov5.yaml: the anchor-free v5u head
    "v8-cls": Variant("v8-cls", "yolov8n-cls.yaml", "classify", imgsz=96),
    "v8-obb": Variant("v8-obb", "yolov8n-obb.yaml", "obb"),
    "v8-det-nms": Variant("v8-det-nms", "yolov8n.yaml", "detect", nms=True),
    "v8-seg-nms": Variant("v8-seg-nms", "yolov8n-seg.yaml", "segment", nms=True),
    "v8-seg-dynamic": Variant("v8-seg-dynamic", "yolov8n-seg.yaml", "segment", dynamic=True),
    "11-det-dynamic": Variant("11-det-dynamic", "yolo11n.yaml", "detect", imgsz=(192, 160), dynamic=True,
                              gain=0.005),
    "v10-e2e": Variant("v10-e2e", "yolov10n.yaml", "detect"),
    "26-seg-e2e": Variant("26-seg-e2e", "yolo26n-seg.yaml", "segment"),
}


def build(variant: Variant, folder: Path, *, seed: int = 0) -> Path:
    """The variant exported to `folder/<name>.onnx` (random weights from `seed`, class scores spread as above)."""
    import torch
    from ultralytics import YOLO
    from ultralytics.nn.tasks import yaml_model_load
    from ultralytics.utils import YAML

    config = yaml_model_load(variant.yaml)  # yolov8n-seg.yaml: yolov8-seg.yaml at scale n
    config["nc"] = CLASSES
    config.pop("yaml_file", None)
    yaml_path = folder / variant.yaml
    YAML.save(yaml_path, config)
    torch.manual_seed(seed)
    model = YOLO(str(yaml_path), task=variant.task)
    _calibrate_norms(model.model, variant.imgsz)
    _spread_scores(model.model, variant, seed)
    exported = model.export(format="onnx", imgsz=variant.imgsz, nms=variant.nms, dynamic=variant.dynamic,
                            simplify=variant.simplify, verbose=False)
    target = folder / f"{variant.name}.onnx"
    Path(exported).rename(target)
    return target


def _calibrate_norms(model: object, imgsz: int | tuple[int, int]) -> None:
    """Batch norms' running statistics from a few random images (train mode, no gradient, a plain average: their
    momentum of 0.03 would barely move them): untouched (mean 0, variance 1) they let whole levels of the head
    collapse to constants, every anchor of a level scoring alike."""
    import torch

    h, w = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]  # type: ignore[attr-defined]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average
    model.train()  # type: ignore[attr-defined]
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand(4, 3, h, w))  # type: ignore[operator]
    model.eval()  # type: ignore[attr-defined]


def _spread_scores(model: object, variant: Variant, seed: int) -> None:
    """The last layer of every class branch (cv3, one2one_cv3): its weights times the variant's gain, its biases at
    its bias plus a seeded jitter."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    head = model.model[-1]  # type: ignore[attr-defined]
    for branch in ("cv3", "one2one_cv3"):
        for level in getattr(head, branch, ()):
            last = level[-1]
            with torch.no_grad():
                last.weight.mul_(variant.gain)
                last.bias.copy_(variant.bias + 0.5 * torch.randn(last.bias.shape, generator=generator))


@dataclass(frozen=True)
class Reference:
    """Ultralytics' answer for one image, as arrays in image pixels."""

    classes: np.ndarray  # [N] int
    scores: np.ndarray  # [N]
    boxes: np.ndarray  # [N, 4] corners (obb: [N, 5] cx, cy, w, h, angle)
    masks: np.ndarray | None  # [N, H, W] bool (segment)
    probs: np.ndarray | None  # classify


def predict(path: Path, image_bgr: np.ndarray, *, variant: Variant, **options: object) -> Reference:
    """Ultralytics' predictor on the ONNX file at `path` (retina masks, as SegLens makes them; a dynamic export at
    the size it was exported at, which SegLens reads from its metadata)."""
    from ultralytics import YOLO

    task = variant.task
    if variant.dynamic:
        options = {"imgsz": variant.imgsz, **options}
    result = YOLO(str(path), task=task).predict(image_bgr, retina_masks=True, verbose=False, **options)[0]
    if task == "classify":
        probs = result.probs.data.cpu().numpy()
        return Reference(np.zeros(0, int), np.zeros(0), np.zeros((0, 4)), None, probs)
    found = result.obb if task == "obb" else result.boxes
    boxes = (found.xywhr if task == "obb" else found.xyxy).cpu().numpy()
    masks = result.masks.data.cpu().numpy().astype(bool) if result.masks is not None else None
    if task == "segment" and masks is None:
        masks = np.zeros((0, *image_bgr.shape[:2]), dtype=bool)
    return Reference(found.cls.cpu().numpy().astype(int), found.conf.cpu().numpy(), boxes, masks, None)
