"""seglens-cli calibrate on an instance model: its image score is the best object's score (0 with no object), so the
limits are chosen on it as on an anomaly score; the written sidecar keeps the instance rules beside the new score
limits, loads again, and judges with both. The model's one object scores the picture's mean brightness (0..1), so
dark pictures are OK parts and bright ones NG parts, with exactly known scores."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml
from onnx import helper
from onnx_factory import FLOAT, const, save, tensor

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.model.instance_rules import InstanceRule
from app.inference.model.rules import ScoreRule

NAMES = ("pit", "scratch")
ANCHORS = 8


def brightness_model(path: Path) -> Path:
    """A YOLO detect head `[1, 4 + 2, 8]`: one pit at (80, 80) 20×20 whose score is the input's mean (0..1)."""
    rows = np.zeros((4 + len(NAMES), ANCHORS), np.float32)
    rows[:4, 0] = (80.0, 80.0, 20.0, 20.0)
    picks = np.zeros_like(rows)
    picks[4, 0] = 1.0  # the pit's score cell takes the mean
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
             helper.make_node("Mul", ["picks", "mean"], ["scored"]),
             helper.make_node("Add", ["rows", "scored"], ["output0"])]
    inits = [const("rows", rows[None]), const("picks", picks[None])]
    meta = {"task": "detect", "names": repr(dict(enumerate(NAMES))), "imgsz": "[160, 160]", "stride": "32",
            "batch": "1"}
    return save(path, nodes, [tensor("images", FLOAT, [1, 3, 160, 160])],
                [tensor("output0", FLOAT, [1, 4 + len(NAMES), ANCHORS])], inits, meta)


def pictures(folder: Path, levels: list[int]) -> Path:
    folder.mkdir()
    for i, level in enumerate(levels):
        cv2.imwrite(str(folder / f"part_{i:02d}.png"), np.full((160, 160, 3), level, np.uint8))
    return folder


@pytest.fixture
def model(tmp_path):
    path = brightness_model(tmp_path / "parts.onnx")
    path.with_suffix(".yaml").write_text("verdict:\n  fail_if:\n    - {count_above: {scratch: 0}}\n", encoding="utf-8")
    return path


def test_calibrate_chooses_limits_on_the_best_object_score_and_keeps_the_instance_rules(model, tmp_path, capsys):
    ok = pictures(tmp_path / "ok", [20, 40, 60, 80, 100, 30, 50, 70])  # 0.08 .. 0.39: no object (below conf)
    ng = pictures(tmp_path / "ng", [160, 180, 200, 220, 240, 170, 190, 210])  # 0.63 .. 0.94
    code = main(["calibrate", str(model), "--ok", str(ok), "--ng", str(ng), "--best-f1", "--seed", "1", "--write",
                 "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 0, out
    verdict = yaml.safe_load(model.with_suffix(".yaml").read_text(encoding="utf-8"))["verdict"]
    assert verdict["fail_if"][0] == {"count_above": {"scratch": 0}}  # the instance rule kept as it was written
    limit = verdict["fail_if"][1]["score_above"]
    assert 0.39 < limit < 0.63  # between the OK images' scores (0, or below conf) and the NG images'
    spec = load_spec(model)
    assert isinstance(spec.verdict[0], InstanceRule) and spec.verdict[1] == ScoreRule(limit)


def test_a_segmentation_model_is_still_refused_and_says_instances_are_calibrated(models, tmp_path, capsys):
    ok, ng = pictures(tmp_path / "ok", [10, 20]), pictures(tmp_path / "ng", [200, 220])
    assert main(["calibrate", str(models("rgb_classes")), "--ok", str(ok), "--ng", str(ng)]) == 2
    err = capsys.readouterr().err
    assert "no image score to calibrate" in err and "instance" in err and err.count("\n") == 1
