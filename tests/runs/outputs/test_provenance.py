"""The run record (`<report>.run.json`): provider, effective thresholds and settings hash, and --resume's checks."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, replace

import pytest

from app.inference.model.builder import load_spec
from app.inference.model.session import SessionInfo
from app.runs.outputs.provenance import (
    PNG_KEY,
    RunIdentity,
    effective_thresholds,
    record_path,
    record_run,
    resume_problem,
    settings_hash,
)

CPU_INFO = SessionInfo(requested="cuda", provider="CPUExecutionProvider", providers=("CPUExecutionProvider",),
                       fallback_reason="no NVIDIA driver")


@pytest.fixture
def identity(models):
    return RunIdentity.of(load_spec(models("rgb_classes")), session=CPU_INFO)


def test_the_record_carries_provider_fallback_thresholds_and_settings(identity, tmp_path):
    report = tmp_path / "seglens_report.csv"
    record_run(report, identity)
    record = json.loads(record_path(report).read_text())
    assert (record["provider"], record["requested_device"]) == ("CPU", "cuda")
    assert record["fallback_reason"] == "no NVIDIA driver"
    assert record["thresholds"] == {} and record["verdict_rules"] == []  # a multi-class model without --threshold
    assert len(record["settings_sha256"]) == 64


def test_effective_thresholds_per_kind(models):
    binary = load_spec(models("binary_logits"))
    assert effective_thresholds(binary) == {"threshold": 0.5}
    anomaly = models("anomaly_named")
    anomaly.with_suffix(".yaml").write_text("output:\n  threshold: 0.4\n  image_threshold: 0.7\n")
    assert effective_thresholds(load_spec(anomaly)) == {"threshold": 0.4, "image_threshold": 0.7}
    assert effective_thresholds(load_spec(models("rgb_classes")), 0.6) == {"min_confidence": 0.6}
    assert effective_thresholds(load_spec(models("classifier"))) == {}


def test_verdict_rules_are_recorded_as_info_describes_them(models):
    model = models("rgb_classes")
    model.with_suffix(".yaml").write_text("classes: [bg, green, blue]\n"
                                          "verdict:\n  fail_if:\n    - {class: green, min_area_px: 50}\n")
    identity = RunIdentity.of(load_spec(model))
    assert identity.verdict_rules == ("a green component of >= 50 px",)
    assert json.loads(identity.png_texts(load_spec(model))["mask"][PNG_KEY])["verdict"] == list(
        identity.verdict_rules)


def test_the_settings_hash_ignores_paths_but_not_settings(models, tmp_path):
    model = models("rgb_classes")
    moved = tmp_path / "elsewhere" / "renamed.onnx"
    moved.parent.mkdir()
    shutil.copy(model, moved)
    assert settings_hash(load_spec(model)) == settings_hash(load_spec(moved))
    assert settings_hash(load_spec(model)) != settings_hash(load_spec(model), 0.5)  # multi-class --threshold
    model.with_suffix(".yaml").write_text("postprocess:\n  min_area: 5\n")
    assert settings_hash(load_spec(model)) != settings_hash(load_spec(moved))


def test_resume_is_refused_when_the_settings_hash_differs(identity, tmp_path):
    report = tmp_path / "r.csv"
    record_run(report, identity)
    problem = resume_problem(report, replace(identity, settings_sha256="f" * 64))
    assert problem and "effective-settings hash" in problem and identity.settings_sha256[:12] in problem


def test_resume_is_accepted_when_only_the_provider_differs(identity, tmp_path):
    report = tmp_path / "r.csv"
    record_run(report, identity)
    on_gpu = replace(identity, provider="CUDA (GPU 0)", requested_device="auto", fallback_reason=None)
    assert resume_problem(report, on_gpu) is None


def test_a_record_from_before_the_new_keys_is_judged_as_before(identity, tmp_path):
    report = tmp_path / "r.csv"
    old_keys = ("model", "model_sha256", "sidecar", "sidecar_sha256", "seglens")  # no threshold key either
    record_path(report).write_text(json.dumps({k: v for k, v in asdict(identity).items() if k in old_keys}))
    assert resume_problem(report, identity) is None
    assert "--threshold" in resume_problem(report, replace(identity, threshold=0.3))
    assert "model file" in resume_problem(report, replace(identity, model_sha256="0" * 64))


def test_png_texts_are_short_and_name_the_classes_on_masks_only(identity, models):
    texts = identity.png_texts(load_spec(models("rgb_classes")))
    assert set(texts) == {"mask", "overlay", "heatmap", "scores"}
    mask = json.loads(texts["mask"][PNG_KEY])
    assert mask["model_sha256"] == identity.model_sha256[:12] and len(mask["settings_sha256"]) == 12
    assert mask["provider"] == "CPU" and mask["classes"] == ["background", "class 1", "class 2"]
    assert "classes" not in json.loads(texts["overlay"][PNG_KEY])
    assert texts["heatmap"]["Software"] == f"SegLens {identity.seglens}"


@pytest.mark.parametrize(("info", "label"), [
    (SessionInfo(requested="auto", provider="CPUExecutionProvider", providers=("CPUExecutionProvider",),
                 fallback_reason="no NVIDIA GPU", gpu_present=False), "CPU (no NVIDIA GPU)"),
    (SessionInfo(requested="cuda", provider="CUDAExecutionProvider",
                 providers=("CUDAExecutionProvider", "CPUExecutionProvider"), device_id=0, gpu_present=True),
     "CUDA (GPU 0)"),
])
def test_the_provenance_names_the_provider_as_every_other_line_does(info, label, models, tmp_path):
    """The record, the PNG chunk and the terminal's provenance line say `CUDA (GPU 0)` as the run's first line and
    the status bar do, not ONNX Runtime's `CUDAExecutionProvider`."""
    spec = load_spec(models("rgb_classes"))
    identity = RunIdentity.of(spec, session=info)
    report = tmp_path / "seglens_report.csv"
    record_run(report, identity)
    assert json.loads(record_path(report).read_text())["provider"] == label == info.provider_label
    assert json.loads(identity.png_texts(spec)["mask"][PNG_KEY])["provider"] == label
    assert f", provider {label}, " in identity.summary_line(report)


def test_the_provenance_line_names_each_threshold_once(models, tmp_path):
    """It read "thresholds threshold 0.5"; now "threshold 0.5", an anomaly model's "image threshold …" beside it."""
    report = tmp_path / "seglens_report.csv"
    binary = RunIdentity.of(load_spec(models("binary_logits")), session=CPU_INFO).summary_line(report)
    assert ", threshold 0.5; " in binary and "thresholds" not in binary, binary
    multi = RunIdentity.of(load_spec(models("rgb_classes")), session=CPU_INFO).summary_line(report)
    assert ", no thresholds; " in multi, multi
    scored = replace(RunIdentity.of(load_spec(models("binary_logits")), session=CPU_INFO),
                     thresholds={"threshold": 0.5, "image_threshold": 0.785})
    assert ", threshold 0.5, image threshold 0.785; " in scored.summary_line(report)
