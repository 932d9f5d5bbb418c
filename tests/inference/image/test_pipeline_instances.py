"""An Ultralytics YOLO export opens as it is, through the same spec, session and 2D pipeline as every other model:
the spec says "instances" (or a classifier), the letterbox and the decoding are Ultralytics' own (exact parity with
their predictor: tests/inference/yolo), and the sidecar's `detect:` section changes what is kept — on a YOLO export
only: on any other model it is refused in one line naming the key, never accepted and ignored."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from yolo_models import classify_model, instance_model

from app.errors import InferenceError, SidecarError
from app.inference.decide.tuning import with_threshold
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session

REPO = Path(__file__).resolve().parents[3]
PICTURE = np.full((320, 320, 3), 90, np.uint8)  # 2 image pixels per input pixel of the 160×160 models


def run(model: Path, picture: np.ndarray = PICTURE):
    session = open_session(load_spec(model), "cpu")
    try:
        return run_image(session, picture)
    finally:
        session.close()


def test_a_detect_section_on_another_model_is_refused(tmp_path):
    model = tmp_path / "nuclei.onnx"
    shutil.copy(REPO / "models" / "nuclei.onnx", model)
    model.with_suffix(".yaml").write_text("detect:\n  conf: 0.3\n", encoding="utf-8")
    with pytest.raises(SidecarError) as refused:
        load_spec(model)
    line = str(refused.value)
    assert "nuclei.yaml" in line and "'detect.conf'" in line and "Ultralytics YOLO" in line
    assert "\n" not in line


def test_a_segment_export_gives_instances_with_their_masks(tmp_path):
    model = instance_model(tmp_path / "best.onnx")
    spec = load_spec(model)
    assert (spec.task, spec.output.kind, spec.output.fetched) == ("instances", "instances", ("output0", "output1"))
    assert spec.class_names == ("pit", "scratch", "stain") and all(c.color for c in spec.classes)
    assert spec.sources["classes"] == "metadata" and spec.sources["detect.conf"] == "default"
    result = run(model)
    assert result.task == "instances" and result.labels is None and result.instances is not None
    found = result.instances.items
    assert [(i.class_name, round(i.score, 3)) for i in found] == [("pit", 0.9), ("scratch", 0.8), ("pit", 0.6)]
    pit = found[0]  # input box (30, 30)–(50, 50) → image (60, 60)–(100, 100)
    assert np.allclose(pit.box, (60, 60, 100, 100))
    assert pit.mask is not None and pit.mask_box == (60, 60, 100, 100)
    disc = np.pi * 20 * 20  # the ellipse inscribed in a 40×40 box
    assert 0.7 * disc < pit.area_px < disc  # drawn on 10×10 prototype pixels, upsampled
    assert not pit.mask[0, 0] and pit.mask[20, 20]  # a disc: its box's corner is outside, its centre inside
    assert result.image_score == pytest.approx(0.9)
    assert result.instances.counts() == {"pit": 2, "scratch": 1}


def test_the_sidecar_detect_section_is_used(tmp_path):
    model = instance_model(tmp_path / "best.onnx")
    model.with_suffix(".yaml").write_text("detect:\n  conf: 0.1\n  classes: [pit, stain]\n", encoding="utf-8")
    spec = load_spec(model)
    assert spec.detector is not None and spec.detector.options.classes == (0, 2)
    assert spec.sources["detect.conf"] == "sidecar"
    names = [i.class_name for i in run(model).instances.items]
    assert names == ["pit", "pit", "stain"]  # the stain (0.2) above conf 0.1; the scratch not kept


def test_detect_and_obb_exports_give_boxes(tmp_path):
    for task in ("detect", "obb"):
        result = run(instance_model(tmp_path / f"{task}.onnx", task=task))
        assert [i.class_name for i in result.instances.items] == ["pit", "scratch", "pit"]
        assert all(i.mask is None for i in result.instances.items)
        assert np.allclose(result.instances.items[1].box, (60, 208, 260, 232), atol=1e-4)
        assert (result.instances.items[0].angle is not None) == (task == "obb")


def test_a_letterboxed_picture_maps_back_to_its_own_pixels(tmp_path):
    result = run(instance_model(tmp_path / "best.onnx"), np.zeros((160, 320, 3), np.uint8))
    # 320×160 → 160×80 at the input, padded 40 rows above: input y 40 is image y 0
    assert np.allclose(result.instances.items[0].box, (60, 0, 100, 20), atol=1e-4)  # clipped to the image


def test_a_classify_export_gives_top_k(tmp_path):
    result = run(classify_model(tmp_path / "cls.onnx"))
    assert result.task == "classification" and result.instances is None
    assert [(p.name, round(p.score, 3)) for p in result.predictions] == [("scratch", 0.7), ("stain", 0.2),
                                                                          ("pit", 0.1)]


def test_a_nan_in_the_head_is_one_line(tmp_path):
    model = instance_model(tmp_path / "nan.onnx", nan=True)
    with pytest.raises(InferenceError) as refused:
        run(model)
    assert "nan.onnx" in str(refused.value) and "NaN" in str(refused.value) and "\n" not in str(refused.value)


def test_a_sidecar_key_a_yolo_export_does_not_take_is_refused(tmp_path):
    model = instance_model(tmp_path / "best.onnx")
    model.with_suffix(".yaml").write_text("input:\n  resize: stretch\n", encoding="utf-8")
    with pytest.raises(SidecarError) as refused:
        load_spec(model)
    assert "'input.resize'" in str(refused.value) and "does not apply" in str(refused.value)


def test_a_chosen_score_threshold_is_the_run_s_conf(tmp_path):
    """The viewer's min score, carried to a run on all its pictures: the objects are kept above it."""
    spec, min_confidence = with_threshold(load_spec(instance_model(tmp_path / "best.onnx")), 0.7)
    assert min_confidence is None and spec.detector.options.conf == 0.7
    session = open_session(spec, "cpu")
    try:
        found = run_image(session, PICTURE).instances
    finally:
        session.close()
    assert [(i.class_name, round(i.score, 3)) for i in found.items] == [("pit", 0.9), ("scratch", 0.8)]
