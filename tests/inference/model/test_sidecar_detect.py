"""A sidecar's `detect:` section (a YOLO head's conf, iou, max_det …) is checked key by key, but the 2D pipeline
does not run YOLO exports yet: on any model it is refused in one line naming the key, never accepted and ignored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.errors import SidecarError
from app.inference.model.builder import load_spec

REPO = Path(__file__).resolve().parents[3]


def test_a_detect_section_is_refused_until_yolo_models_run(tmp_path):
    model = tmp_path / "nuclei.onnx"
    shutil.copy(REPO / "models" / "nuclei.onnx", model)
    model.with_suffix(".yaml").write_text("detect:\n  conf: 0.3\n", encoding="utf-8")
    with pytest.raises(SidecarError) as refused:
        load_spec(model)
    line = str(refused.value)
    assert "nuclei.yaml" in line and "'detect.conf'" in line and "does not run yet" in line
    assert "\n" not in line


def test_without_the_section_the_model_opens(tmp_path):
    model = tmp_path / "nuclei.onnx"
    shutil.copy(REPO / "models" / "nuclei.onnx", model)
    assert load_spec(model).name
