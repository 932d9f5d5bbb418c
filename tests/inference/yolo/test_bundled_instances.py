"""The bundled instance demo model (models/surface_instances.onnx, trained by models/training in the YOLOv8-seg
layout) on the surface samples (resources/samples/surface/): read as an Ultralytics segment export from its own
metadata (not claiming Ultralytics as its author), and on each sample, at its sidecar's settings, it finds the
scratches, pits and stains the generator drew, each as an instance whose mask lies on it (a scratch is sometimes
found as two), and nothing on the clean frame. No torch: the
samples' objects are regenerated with the sample generator (models/training, numpy + OpenCV only)."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
import yaml
from yolo_models import open_yolo

from app.inference.model.instances import Instances
from app.inference.model.yolo_options import YoloOptions

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "models" / "surface_instances.onnx"
SAMPLES = REPO / "resources" / "samples" / "surface"


@pytest.fixture(scope="module")
def model():
    """The model with its sidecar's `detect:` settings (conf, NMS IoU), as SegLens opens the bundled model."""
    detect = yaml.safe_load(MODEL.with_suffix(".yaml").read_text())["detect"]
    return open_yolo(MODEL, device="cpu", options=YoloOptions(conf=detect["conf"], iou=detect["iou"]))


@pytest.fixture(scope="module")
def make_samples():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from models.training import make_samples

    return make_samples


def test_it_is_read_as_a_yolov8_seg_export_from_its_metadata(model):
    head = model.head
    assert (head.task, head.layout, head.names, head.imgsz, head.stride) == \
        ("segment", "anchors", ("scratch", "pit", "stain"), (544, 960), 32)
    assert {head.sources[k] for k in ("task", "imgsz", "stride")} == {"metadata"}
    assert head.sources["names"] == "sidecar"  # the sidecar lists them with their colours (the metadata has them too)
    meta = {p.key: p.value for p in onnx.load(str(MODEL), load_external_data=False).metadata_props}
    assert not meta["author"].startswith("Ultralytics") and meta["license"] == "MIT"
    assert MODEL.stat().st_size <= 5 * 1024 * 1024


def _found(model, name: str) -> Instances:
    found = model.predict(cv2.imread(str(SAMPLES / name)))
    assert isinstance(found, Instances) and found.image_hw == (1080, 1920)
    return found


def _overlap(found, obj) -> float:
    """The best mask IoU of a found instance of the object's class with the object."""
    truth = np.zeros((1080, 1920), bool)
    truth[obj.y0:obj.y0 + obj.mask.shape[0], obj.x0:obj.x0 + obj.mask.shape[1]] = obj.mask
    best = 0.0
    for item in found.items:
        if item.class_index == obj.cls:
            mask = item.full_mask((1080, 1920))
            best = max(best, (mask & truth).sum() / (mask | truth).sum())
    return best


@pytest.mark.parametrize("index", range(5))
def test_each_defect_of_a_sample_is_found_as_its_own_instance(model, make_samples, index):
    name = Path(make_samples.SURFACES[index][0]).name
    _, objs = make_samples.surface_sample_instances(index)
    found = _found(model, name)
    ious = [_overlap(found, obj) for obj in objs]
    # most objects are covered by an instance of their class, most of them closely (the hard cases: one of
    # surface_01's crossing scratches is found at IoU ~0.3, one of surface_02's seven pits is missed)
    covered, close = (sum(iou >= limit for iou in ious) / len(objs) for limit in (0.25, 0.5))
    assert covered >= 0.8 and close >= 0.6, f"{name}: mask IoUs {ious}"
    names = ("scratch", "pit", "stain")
    truth = {names[k]: sum(o.cls == k for o in objs) for k in range(3)}
    for cls, count in found.counts().items():  # at most one invented instance, no object split into many
        assert count <= 2 * truth[cls] + 1, f"{name}: found {found.counts()}, drawn {truth}"


def test_the_clean_sample_has_no_instance(model):
    assert len(_found(model, "surface_clean_01.jpg")) == 0


def test_the_demo_line_s_verdicts_on_the_samples(model):
    """The sidecar's rules: NG past 2 scratches or 3 pits, REVIEW for any object below that, OK when clean."""
    from app.inference.decide.verdict import verdict_of
    from app.inference.image.pipeline import run_image

    verdicts = {}
    for name in ("surface_01_scratches.jpg", "surface_03_stain.jpg", "surface_clean_01.jpg"):
        result = run_image(model.session, cv2.cvtColor(cv2.imread(str(SAMPLES / name)), cv2.COLOR_BGR2RGB))
        verdict = verdict_of(model.spec, result)
        verdicts[name] = (verdict.state, verdict.reason)
    state, reason = verdicts["surface_01_scratches.jpg"]
    assert state == "NG" and reason.startswith("scratch count")
    assert verdicts["surface_03_stain.jpg"][0] == "REVIEW"
    assert verdicts["surface_clean_01.jpg"] == ("OK", "")
