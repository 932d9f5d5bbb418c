"""Verdict rules on instances: counts per class, an object's area in px and mm², a class's score, `min_score`, the
REVIEW band, the refusals of a rule that does not fit the model (one line naming the key) and fail-closed judging.
The model (tests/yolo_models.py) answers the same objects whatever the picture: a pit 0.9 (1000 px), a scratch
0.8 (3904 px), a pit 0.6 (744 px) on a 320×320 picture, so every limit below sits on a known value."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from yolo_models import instance_model

from app.errors import SidecarError
from app.inference.decide.verdict import Verdict, decide
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.model.instance_rules import ClassLimit, InstanceRule
from app.inference.model.instances import Instances
from app.inference.runtime.session import open_session

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """`judge(verdict_yaml)`: the verdict of the model's one answer under that sidecar verdict section."""
    folder = tmp_path_factory.mktemp("instances")
    model = instance_model(folder / "best.onnx")
    session = open_session(load_spec(model), "cpu")
    try:
        result = run_image(session, np.full((320, 320, 3), 90, np.uint8))
    finally:
        session.close()
    assert [(i.class_name, i.area_px) for i in result.instances.items] == [("pit", 1000), ("scratch", 3904),
                                                                            ("pit", 744)]

    def judge(section: str, result=result) -> Verdict:
        model.with_suffix(".yaml").write_text("verdict:\n" + section, encoding="utf-8")
        spec = load_spec(model)
        return decide(spec.verdict or (), result, spec, review=spec.review)

    judge.result = result  # type: ignore[attr-defined]
    judge.model = model  # type: ignore[attr-defined]
    return judge


def refusal(model: Path, section: str) -> str:
    model.with_suffix(".yaml").write_text("verdict:\n" + section, encoding="utf-8")
    with pytest.raises(SidecarError) as refused:
        load_spec(model)
    line = str(refused.value)
    assert "\n" not in line
    return line


@pytest.mark.parametrize(("rule", "state", "reason"), [
    ("{count_above: {pit: 1}}", "NG", "pit count 2 > 1"),
    ("{count_above: {pit: 2}}", "OK", ""),
    ("{count_above: {pit: 1}, min_score: 0.7}", "OK", ""),  # only the 0.9 pit counts
    ("{count_above: {scratch: 0}}", "NG", "scratch count 1 > 0"),
    ("{count_above: {stain: 0}}", "OK", ""),  # the stain scored below the model's conf
    ("{count_above: 2}", "NG", "object count 3 > 2"),
    ("{count_above: {stain: 0, pit: 1}}", "NG", "pit count 2 > 1"),
    ("{max_area_px: {scratch: 3904}}", "OK", ""),
    ("{max_area_px: {scratch: 3903}}", "NG", "scratch area 3904 px > 3903"),
    ("{max_area_px: 999}", "NG", "object area 3904 px > 999"),
    ("{max_area_px: {pit: 999}, min_score: 0.7}", "NG", "pit area 1000 px > 999"),
    ("{max_area_px: {pit: 1000}, min_score: 0.7}", "OK", ""),
    ("{max_area_mm2: {scratch: 9.77}, mm_per_px: 0.05}", "OK", ""),  # 3904 × 0.0025 = 9.76
    ("{max_area_mm2: {scratch: 9.7}, mm_per_px: 0.05}", "NG", "scratch area 9.76 mm² > 9.7 (at 0.05 mm/px)"),
    ("{max_area_mm2: {pit: 4}, mm_per_px: [0.1, 0.05]}", "NG", "pit area 5 mm² > 4 (at 0.1 × 0.05 mm/px)"),
    ("{score_above: {pit: 0.85}}", "NG", "pit score 0.9 > 0.85"),
    ("{score_above: {scratch: 0.85}}", "OK", ""),
    ("{score_above: 0.85}", "NG", "score 0.9 > 0.85"),  # the image score: the best object's
])
def test_an_instance_rule_judges_the_objects(judged, rule, state, reason):
    verdict = judged(f"  fail_if:\n    - {rule}\n")
    assert (verdict.state, verdict.reason) == (state, reason)


def test_a_review_band_on_counts(judged):
    band = "  fail_if:\n    - {count_above: {pit: 2}}\n  review_if:\n    - {count_above: {pit: %d}}\n"
    assert (judged(band % 1).state, judged(band % 1).reason) == ("REVIEW", "review: pit count 2 > 1")
    assert judged(band % 0).state == "REVIEW"
    assert judged("  fail_if:\n    - {count_above: {pit: 1}}\n  review_if:\n    - {count_above: {pit: 0}}\n"
                  ).state == "NG"  # REVIEW never hides an NG


def test_a_review_limit_at_the_fail_limit_is_refused(judged):
    line = refusal(judged.model, "  fail_if:\n    - {count_above: {pit: 2}}\n  review_if:\n"
                                 "    - {count_above: {pit: 2, scratch: 5}}\n")
    assert "'verdict.review_if[0].count_above.pit' is 2, not below verdict.fail_if[0]'s 2" in line
    # another min_score measures other objects: a band of its own, not refused
    assert judged("  fail_if:\n    - {count_above: {pit: 2}}\n  review_if:\n"
                  "    - {count_above: {pit: 2}, min_score: 0.5}\n").state == "OK"


@pytest.mark.parametrize(("rule", "key", "words"), [
    ("{class: pit, min_total_fraction: 0.1}", "verdict.fail_if[0].min_total_fraction",
     "applies to segmentation models, but this model's task is instances"),
    ("{class: pit, min_area_px: 10}", "verdict.fail_if[0].min_area_px", "on objects: max_area_px"),
    ("{max_area_mm2: {pit: 4}}", "verdict.fail_if[0].mm_per_px", "is needed by max_area_mm2"),
    ("{count_above: {dent: 1}}", "verdict.fail_if[0].count_above", "is 'dent', not a class of this model"),
    ("{score_above: {pit: 1.5}}", "verdict.fail_if[0].score_above", "must map class names to limits"),
    ("{count_above: {pit: 1.5}}", "verdict.fail_if[0].count_above", "whole number"),
    ("{score_above: {pit: 0.5}, min_score: 0.2}", "verdict.fail_if[0]", "has unknown key 'min_score'"),
    ("{count_above: 1, min_score: 2}", "verdict.fail_if[0].min_score", "between 0 and 1"),
    ("{max_area_mm2: 4, mm_per_px: 0}", "verdict.fail_if[0].mm_per_px", "more than 0 mm"),
])
def test_a_rule_that_does_not_fit_is_refused_naming_its_key(judged, rule, key, words):
    line = refusal(judged.model, f"  fail_if:\n    - {rule}\n")
    assert f"'{key}" in line and words in line


@pytest.mark.parametrize("rule", ["{count_above: {nucleus: 1}}", "{max_area_px: 10}", "{score_above: {x: 0.5}}"])
def test_an_instance_rule_on_a_segmentation_model_is_refused(tmp_path, rule):
    model = tmp_path / "nuclei.onnx"
    shutil.copy(REPO / "models" / "nuclei.onnx", model)
    line = refusal(model, f"  fail_if:\n    - {rule}\n")
    assert "'verdict.fail_if[0]." in line and "applies to instance models" in line
    assert "this model's task is segmentation" in line


def test_fail_closed(judged):
    rule = InstanceRule("count_above", (ClassLimit("pit", frozenset({0}), 5.0),))
    judged.model.with_suffix(".yaml").unlink(missing_ok=True)
    spec = load_spec(judged.model)
    without = dataclasses.replace(judged.result, instances=None)
    assert decide((rule,), without, spec) == Verdict(False, "no instances to judge pit count > 5 by")
    assert decide((), without, spec, review=(rule,)).state == "NG"  # a review rule that cannot judge: NG too
    items = judged.result.instances.items
    nan = Instances((dataclasses.replace(items[0], score=float("nan")), *items[1:]), judged.result.instances.image_hw)
    broken = decide((rule,), dataclasses.replace(judged.result, instances=nan), spec)
    assert broken == Verdict(False, "pit score nan is not finite")
    unsized = InstanceRule("max_area_mm2", (ClassLimit(None, frozenset(), 100.0),))
    assert decide((unsized,), judged.result, spec) == Verdict(False, "no pixel size to judge object area > 100 mm² by")


def test_an_empty_image_passes_every_instance_rule(judged):
    judged.model.with_suffix(".yaml").unlink(missing_ok=True)
    spec = load_spec(judged.model)
    empty = dataclasses.replace(judged.result, instances=Instances((), (320, 320)), image_score=0.0)
    rules = (InstanceRule("count_above", (ClassLimit(None, frozenset(), 0.0),)),
             InstanceRule("max_area_px", (ClassLimit(None, frozenset(), 0.0),)),
             InstanceRule("score_above", (ClassLimit("pit", frozenset({0}), 0.0),)))
    assert decide(rules, empty, spec) == Verdict(True)


def test_the_rules_written_back_read_the_same(judged):
    section = ("  fail_if:\n    - {count_above: {pit: 1, scratch: 0}, min_score: 0.5}\n"
               "    - {max_area_mm2: 4, mm_per_px: [0.1, 0.05]}\n    - {score_above: {pit: 0.5}}\n")
    judged.model.with_suffix(".yaml").write_text("verdict:\n" + section, encoding="utf-8")
    spec = load_spec(judged.model)
    written = [rule.as_dict() for rule in spec.verdict]
    assert written == [{"count_above": {"pit": 1, "scratch": 0}, "min_score": 0.5},
                       {"max_area_mm2": 4.0, "mm_per_px": [0.1, 0.05]}, {"score_above": {"pit": 0.5}}]
    assert [rule.describe() for rule in spec.verdict] == [
        "pit count > 1 or scratch count > 0 (objects scoring >= 0.5)", "object area > 4 mm² at 0.1 × 0.05 mm/px",
        "pit score > 0.5"]
