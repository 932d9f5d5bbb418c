"""SegLens's YOLO room, and the app's 2D pipeline (spec, session, run_image) on the same export, against
Ultralytics' own predictor, on the same ONNX file and the same images: every head
layout (v8/11 anchors, v5u, NMS in the graph, the end-to-end heads of v10 and 26; fixed and dynamic input) of
segment, detect, obb and classify, built from Ultralytics' YAMLs with seeded random weights
(tests/inference/yolo/yolo_reference.py), run on pictures of other sizes and aspect ratios than the model's. The
same count and classes, boxes within 1 px, scores within 1e-3, mask IoU at least 0.98 per instance, class
probabilities within 1e-3.

Ultralytics is a test-only reference (AGPL-3.0, never imported by app/): .ci/run installs it and the torchvision it
needs beside the project's CPU torch (.ci/torchvision_cpu.sh, which a developer's venv can run too); where it does not
import these tests skip, and fail in CI.

Exactly equal scores are ordered by index here and in no defined order by torch's argsort, so where some anchors
tie (the letterbox's uniform grey gives neighbouring anchors the same score), which of two tied boxes NMS keeps is
not defined; each image's confidence limit is raised above its highest tied candidate (in both predictors alike).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yolo_reference as reference
from yolo_models import ClassScores, YoloRun, open_yolo, require_ultralytics

from app.inference.image.pipeline import Result, run_image
from app.inference.model.builder import load_spec
from app.inference.model.instances import Instances
from app.inference.model.yolo_options import YoloOptions
from app.inference.runtime.session import open_session
from app.inference.yolo.letterbox import preprocess

require_ultralytics()

IMAGES = ((240, 400), (333, 187), (150, 150))  # wide, tall (odd sides), square but smaller than the model


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("yolo-exports")
    return {name: reference.build(variant, folder) for name, variant in reference.VARIANTS.items()}


def picture(hw: tuple[int, int], seed: int) -> np.ndarray:
    """A BGR picture with texture and a few solid shapes (something for random weights to respond to)."""
    import cv2

    rng = np.random.default_rng(seed)
    image = cv2.GaussianBlur((rng.random((*hw, 3)) * 255).astype(np.uint8), (0, 0), 2)
    for _ in range(4):
        centre = (int(rng.integers(0, hw[1])), int(rng.integers(0, hw[0])))
        color = tuple(int(v) for v in rng.integers(0, 256, 3))
        cv2.circle(image, centre, int(rng.integers(8, max(9, min(hw) // 3))), color, -1)
    return image


def untied_conf(model: YoloRun, image: np.ndarray, conf: float = 0.25) -> float:
    """`conf`, or above the highest candidate score that two anchors share (see the module's docstring)."""
    if model.head.layout == "end2end":
        return conf
    tensor, _ = preprocess(image, model.head.imgsz, stride=model.head.stride if model.head.dynamic else None)
    out = model.raw(tensor)[0]
    scores = out[4:4 + model.head.nc].max(0) if model.head.layout == "anchors" else out[:, 4]
    values, counts = np.unique(scores[scores > conf], return_counts=True)
    tied = values[counts > 1]
    return float(max(conf, tied.max())) if len(tied) else conf


def untied_picture(path: Path, hw: tuple[int, int]) -> tuple[np.ndarray, float]:
    """The first of a few seeded pictures with an instance above its untied confidence limit, and that limit."""
    model = open_yolo(path, device="cpu")
    for seed in range(8):
        image = picture(hw, seed=hw[0] + seed)
        conf = untied_conf(model, image)
        if len(open_yolo(path, device="cpu", options=YoloOptions(conf=conf)).predict(image)):
            return image, conf
    raise AssertionError(f"{path.name}: no picture of {hw} has an untied instance: nothing to compare")


DETECTORS = [name for name, v in reference.VARIANTS.items() if v.task != "classify"]


def through_the_pipeline(path: Path, image_bgr: np.ndarray, folder: Path, *, conf: float | None = None) -> Result:
    """The export opened as the app opens any model (spec, session, 2D pipeline), `conf` from its sidecar."""
    model = folder / path.name
    shutil.copy(path, model)
    if conf is not None:
        model.with_suffix(".yaml").write_text(f"detect:\n  conf: {conf!r}\n", encoding="utf-8")
    session = open_session(load_spec(model), "cpu")
    try:
        return run_image(session, np.ascontiguousarray(image_bgr[..., ::-1]))  # the pipeline takes RGB
    finally:
        session.close()


def assert_same_instances(ours: Instances, theirs: reference.Reference, *, task: str, hw: tuple[int, int]) -> None:
    """The same count and classes, boxes within 1 px, scores within 1e-3, mask IoU at least 0.98 per instance."""
    assert len(ours) >= 1
    assert len(ours) == len(theirs.scores)
    assert [item.class_index for item in ours.items] == theirs.classes.tolist()
    np.testing.assert_allclose([item.score for item in ours.items], theirs.scores, atol=1e-3)
    if task == "obb":
        rotated = np.array([item.rotated for item in ours.items])
        np.testing.assert_allclose(rotated[:, :4], theirs.boxes[:, :4], atol=1.0)
        np.testing.assert_allclose(rotated[:, 4], theirs.boxes[:, 4], atol=1e-3)
    else:
        np.testing.assert_allclose([item.box for item in ours.items], theirs.boxes, atol=1.0)
    if task == "segment":
        assert theirs.masks is not None
        for item, mask in zip(ours.items, theirs.masks, strict=True):
            full = item.full_mask(hw)
            assert (full & mask).sum() / max(1, (full | mask).sum()) >= 0.98


@pytest.mark.parametrize("name", DETECTORS)
@pytest.mark.parametrize("hw", IMAGES)
def test_instances_equal_ultralytics(exports: dict[str, Path], name: str, hw: tuple[int, int],
                                     tmp_path: Path) -> None:
    """The YOLO room's own predictor and the app's 2D pipeline on the export, each against Ultralytics'."""
    variant = reference.VARIANTS[name]
    image, conf = untied_picture(exports[name], hw)
    theirs = reference.predict(exports[name], image, variant=variant, conf=conf)
    ours = open_yolo(exports[name], device="cpu", options=YoloOptions(conf=conf)).predict(image)
    assert isinstance(ours, Instances)
    assert_same_instances(ours, theirs, task=variant.task, hw=hw)
    result = through_the_pipeline(exports[name], image, tmp_path, conf=conf)
    assert result.task == "instances" and result.instances is not None
    assert_same_instances(result.instances, theirs, task=variant.task, hw=hw)


@pytest.mark.parametrize("hw", IMAGES)
def test_class_scores_equal_ultralytics(exports: dict[str, Path], hw: tuple[int, int], tmp_path: Path) -> None:
    image = picture(hw, seed=hw[1])
    ours = open_yolo(exports["v8-cls"], device="cpu").predict(image)
    theirs = reference.predict(exports["v8-cls"], image, variant=reference.VARIANTS["v8-cls"])
    assert isinstance(ours, ClassScores) and theirs.probs is not None
    np.testing.assert_allclose(ours.scores, theirs.probs, atol=1e-3)
    assert ours.top1 == int(theirs.probs.argmax())
    result = through_the_pipeline(exports["v8-cls"], image, tmp_path)  # top-k, best first
    assert result.predictions[0].index == int(theirs.probs.argmax())
    np.testing.assert_allclose([p.score for p in result.predictions], theirs.probs[[p.index for p in
                                                                                      result.predictions]], atol=1e-3)


def test_sidecar_overrides_reach_both_alike(exports: dict[str, Path]) -> None:
    """conf, iou, max_det, agnostic and classes as Ultralytics' predict arguments of the same names."""
    image = picture((240, 400), seed=7)
    options = YoloOptions(conf=0.3, iou=0.5, max_det=5, agnostic=True, classes=(0, 2))
    ours = open_yolo(exports["v8-det"], device="cpu", options=options).predict(image)
    theirs = reference.predict(exports["v8-det"], image, variant=reference.VARIANTS["v8-det"], conf=0.3, iou=0.5,
                               max_det=5, agnostic_nms=True, classes=[0, 2])
    assert isinstance(ours, Instances)
    assert 1 <= len(ours) <= 5
    assert {item.class_index for item in ours.items} <= {0, 2}
    assert [item.class_index for item in ours.items] == theirs.classes.tolist()
    np.testing.assert_allclose([item.box for item in ours.items], theirs.boxes, atol=1.0)


def test_a_dynamic_export_without_onnxslim_equals_ultralytics(tmp_path: Path) -> None:
    """Not simplified by onnxslim (simplify=False), every size is symbolic: the channels follow from the names."""
    variant = replace(reference.VARIANTS["v8-seg-dynamic"], name="v8-seg-dynamic-unsimplified", simplify=False)
    path = reference.build(variant, tmp_path)
    image, conf = untied_picture(path, (240, 400))
    ours = open_yolo(path, device="cpu", options=YoloOptions(conf=conf)).predict(image)
    theirs = reference.predict(path, image, variant=variant, conf=conf)
    assert isinstance(ours, Instances)
    assert [item.class_index for item in ours.items] == theirs.classes.tolist()
    np.testing.assert_allclose([item.box for item in ours.items], theirs.boxes, atol=1.0)
