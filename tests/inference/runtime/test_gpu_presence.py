"""No NVIDIA GPU is a calm "CPU (no NVIDIA GPU)"; a GPU that is there but unusable, or `--device cuda`, warns.

The probe (`providers.detect_nvidia_gpu`) is replaced to play each machine; ONNX Runtime is the real one, so on
this CPU-only machine the CUDA provider really fails when it is tried (its libraries are not installed).
"""

from __future__ import annotations

import json

import onnxruntime as ort
import pytest
from conftest import stripes
from PIL import Image

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.model.session import NO_GPU
from app.inference.runtime import providers
from app.inference.runtime.providers import CUDA
from app.inference.runtime.session import open_session

CUDA_TRIED_AND_FAILS = CUDA in ort.get_available_providers() and providers.detect_nvidia_gpu() is None
needs_failing_cuda = pytest.mark.skipif(not CUDA_TRIED_AND_FAILS,
                                        reason="needs onnxruntime-gpu on a machine where CUDA cannot start")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(providers, "detect_nvidia_gpu", lambda: None)


@pytest.fixture
def gpu_present(monkeypatch):
    """A machine whose driver is there (/dev/nvidia0) but whose CUDA libraries are not: CUDA fails when tried."""
    monkeypatch.setattr(providers, "detect_nvidia_gpu", lambda: "/dev/nvidia0")


def test_probe_needs_no_cuda_library_and_names_what_it_found(monkeypatch):
    monkeypatch.setattr(providers.os.path, "exists", lambda path: path == "/dev/dxg")
    monkeypatch.setattr(providers.sys, "platform", "linux")
    assert providers.detect_nvidia_gpu() == "/dev/dxg"  # WSL2
    monkeypatch.setattr(providers.os.path, "exists", lambda path: False)
    monkeypatch.setattr(providers.shutil, "which", lambda name: None)
    assert providers.detect_nvidia_gpu() is None
    monkeypatch.setattr(providers.shutil, "which", lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    assert providers.detect_nvidia_gpu() == "nvidia-smi on PATH"


@pytest.mark.skipif(CUDA not in ort.get_available_providers(), reason="a CPU-only onnxruntime never tries CUDA")
def test_auto_without_a_gpu_is_calm_and_does_not_try_cuda(models, no_gpu):
    info = open_session(load_spec(models("rgb_classes")), "auto").info
    assert info.provider == "CPUExecutionProvider" and info.gpu_present is False
    assert info.fallback_reason == NO_GPU == "no NVIDIA GPU"  # kept (info, run record), never hidden
    assert not info.fallback_warns and info.provider_label == "CPU (no NVIDIA GPU)"
    assert not any("Failed to load" in line for line in info.log_lines)  # the CUDA provider was not even loaded


@needs_failing_cuda
def test_auto_with_a_gpu_present_but_cuda_unusable_warns_with_the_cause(models, gpu_present):
    info = open_session(load_spec(models("rgb_classes")), "auto").info
    assert info.provider == "CPUExecutionProvider" and info.gpu_present is True and info.fallback_warns
    assert info.fallback_reason.startswith("the CUDA provider could not be loaded:") and ".so" in info.fallback_reason
    assert info.provider_label == "CPU"


@needs_failing_cuda
def test_cuda_by_name_without_a_gpu_warns_and_says_there_is_none(models, no_gpu):
    info = open_session(load_spec(models("rgb_classes")), "cuda").info
    assert info.fallback_warns and info.requested == "cuda"
    assert info.fallback_reason.startswith("no NVIDIA GPU on this machine (and the CUDA provider could not be loaded")


def _run(models, tmp_path, capsys, device: str) -> tuple[str, str, dict]:
    Image.fromarray(stripes()).save(tmp_path / "a.png")
    out = tmp_path / f"out_{device}"
    assert main(["run", str(models("rgb_classes")), str(tmp_path / "a.png"), "--out", str(out),
                 "--device", device]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err, json.loads((out / "seglens_report.csv.run.json").read_text())


@pytest.mark.skipif(CUDA not in ort.get_available_providers(), reason="a CPU-only onnxruntime never tries CUDA")
def test_cli_run_without_a_gpu_prints_no_note_and_records_why(models, tmp_path, capsys, no_gpu):
    out, err, record = _run(models, tmp_path, capsys, "auto")
    assert "note:" not in err and "warning:" not in err and "libcublas" not in err
    assert "provider CPU (no NVIDIA GPU);" in out
    assert record["provider"] == "CPU (no NVIDIA GPU)" and record["fallback_reason"] == "no NVIDIA GPU"


@needs_failing_cuda
def test_cli_run_with_an_unusable_gpu_notes_the_cause(models, tmp_path, capsys, gpu_present):
    out, err, record = _run(models, tmp_path, capsys, "auto")
    assert "note: running on the CPU (the CUDA provider could not be loaded: " in err
    assert "provider CPU;" in out and record["fallback_reason"].startswith("the CUDA provider could not be loaded")


@needs_failing_cuda
def test_cli_run_cuda_by_name_without_a_gpu_warns(models, tmp_path, capsys, no_gpu):
    _, err, record = _run(models, tmp_path, capsys, "cuda")
    assert "warning: CUDA was requested but rgb_classes.onnx runs on the CPU: no NVIDIA GPU on this machine" in err
    assert record["requested_device"] == "cuda" and record["fallback_reason"].startswith("no NVIDIA GPU on this")


@pytest.mark.skipif(CUDA not in ort.get_available_providers(), reason="a CPU-only onnxruntime never tries CUDA")
def test_info_text_keeps_the_reason_visible(models, capsys, no_gpu):
    assert main(["info", str(models("rgb_classes"))]) == 0
    text = capsys.readouterr().out
    assert "provider      CPU (no NVIDIA GPU) (requested auto;" in text and "not on GPU    no NVIDIA GPU" in text


def test_ray_nodes_without_a_gpu_are_not_announced_as_a_fallback(capsys):
    from types import SimpleNamespace

    from app.cli.cluster import _announce_actors

    base = {"provider": "CPUExecutionProvider", "requested": "auto", "provider_label": "CPU"}
    _announce_actors([{**base, "node": "cpu-node", "fallback_reason": NO_GPU, "fallback_warns": False},
                      {**base, "node": "gpu-node", "fallback_reason": "libcublasLt.so.13 not found",
                       "fallback_warns": True}], SimpleNamespace(path=SimpleNamespace(name="m.onnx")))
    err = capsys.readouterr().err
    assert "cpu-node" not in err and "note: on node gpu-node, running on the CPU (libcublasLt.so.13 not found)" in err
