"""Held-out evaluation of the surface_instances demo model through SegLens's own pipeline.

Each held-out frame (``instances_data.eval_item``, seed common.EVAL_SEED, mostly 1920x1080, never trained on)
goes through the spec, the session and ``app.inference.image.pipeline.run_image`` exactly as SegLens runs an
Ultralytics export (letterbox, ONNX Runtime, the sidecar's conf and NMS IoU — and Ultralytics' defaults 0.25 and 0.7 for
reference —, class-aware NMS, masks at the image's pixels); its instances are
scored against the generator's objects by ``app.runs.labels.metrics`` (COCOeval's matching and 101-point
interpolated AP): mask AP50 and box AP50 per class, and mask AP50:95 over the classes.
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np

from . import common
from . import instances_data as data

NAME = "surface_instances"


def truth(objs: list[data.Obj], hw: tuple[int, int]):
    """The generator's objects as SegLens Instances (mask inside its tight box)."""
    from app.inference.model.instances import Instance, Instances

    items = []
    for o in objs:
        x0, y0, x1, y1 = (int(v) for v in o.box())
        mask = o.mask[y0 - o.y0:y1 - o.y0, x0 - o.x0:x1 - o.x0].copy()
        items.append(Instance(o.cls, data.NAMES[o.cls], 1.0, (x0, y0, x1, y1), mask=mask, mask_box=(x0, y0, x1, y1)))
    return Instances(tuple(items), hw)


def boxes_only(found):
    return dataclasses.replace(found, items=tuple(dataclasses.replace(i, mask=None, mask_box=None)
                                                 for i in found.items))


def class_ap(pairs, cls: int) -> tuple[float, float]:
    """(AP50, AP50:95) of one class over the pairs (reference, found), COCOeval's."""
    from app.runs.labels.metrics import _class_precision

    p = _class_precision(pairs, cls)
    return (float("nan"), float("nan")) if p is None else (float(p[0].mean()), float(p.mean()))


def evaluate(n: int = 60) -> dict:
    """Scores at the sidecar's `detect:` settings (what SegLens runs the bundled model with) and, for reference, at
    Ultralytics' defaults (conf 0.25, IoU 0.7)."""
    import yaml

    detect = yaml.safe_load((common.MODELS_DIR / f"{NAME}.yaml").read_text()).get("detect") or {}
    frames = [data.eval_item(common.EVAL_SEED, i) for i in range(n)]
    truths = [truth(objs, img.shape[:2]) for img, objs in frames]
    images = [cv2.cvtColor(img, cv2.COLOR_RGB2BGR) for img, _ in frames]
    res = {"eval_images": n, "eval_seed": common.EVAL_SEED, "eval_backend": "app-yolo",
           "conf": detect.get("conf", 0.25), "iou": detect.get("iou", 0.7),
           **scores(truths, images, detect.get("conf", 0.25), detect.get("iou", 0.7))}
    res["defaults"] = scores(truths, images, 0.25, 0.7)
    print(f"{NAME} (conf {res['conf']}, iou {res['iou']}): mask AP50 {res['mask_ap50']} (mean "
          f"{res['mask_ap50_mean']:.4f}); box AP50 {res['box_ap50']} (mean {res['box_ap50_mean']:.4f}); mask AP50:95 "
          f"mean {res['mask_ap50_95_mean']:.4f}; objects {res['instances_truth']}, found {res['instances_found']}")
    d = res["defaults"]
    print(f"  at conf 0.25, iou 0.7: mask AP50 {d['mask_ap50']} (mean {d['mask_ap50_mean']:.4f}); found "
          f"{d['instances_found']}")
    return {NAME: res}


def scores(truths, images, conf: float, iou: float) -> dict:
    pairs = [(t, found) for t, found in zip(truths, predicted(images, conf, iou))]
    box_pairs = [(boxes_only(a), boxes_only(b)) for a, b in pairs]
    mask50, box50, mask5095 = {}, {}, {}
    for k, name in enumerate(data.NAMES):
        mask50[name], mask5095[name] = (round(v, 4) for v in class_ap(pairs, k))
        box50[name] = round(class_ap(box_pairs, k)[0], 4)

    def count(side: int) -> dict:
        return {name: sum(i.class_index == k for pair in pairs for i in pair[side].items)
                for k, name in enumerate(data.NAMES)}

    return {"mask_ap50": mask50, "mask_ap50_mean": round(float(np.mean(list(mask50.values()))), 4),
            "box_ap50": box50, "box_ap50_mean": round(float(np.mean(list(box50.values()))), 4),
            "mask_ap50_95": mask5095, "mask_ap50_95_mean": round(float(np.mean(list(mask5095.values()))), 4),
            "instances_truth": count(0), "instances_found": count(1)}


def predicted(images, conf: float, iou: float) -> list:
    """Each BGR image's instances as SegLens runs the model (spec, session, the 2D pipeline), at `conf` and `iou`."""
    from dataclasses import replace

    import numpy as np

    from app.inference.image.pipeline import run_image
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session

    spec = load_spec(common.MODELS_DIR / f"{NAME}.onnx")
    options = replace(spec.detector.options, conf=conf, iou=iou)
    spec = replace(spec, detector=replace(spec.detector, options=options))
    session = open_session(spec, "cpu")
    try:
        return [run_image(session, np.ascontiguousarray(image[..., ::-1])).instances for image in images]
    finally:
        session.close()
