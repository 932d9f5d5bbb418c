"""The session tells the truth about where the model runs."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from app.inference.session import CUDA, DeviceRequest, SessionOptions, explain_cuda_failure, open_session
from app.inference.spec import load_spec

CUDA_WORKS = False
try:  # a GPU machine: the fallback tests below do not apply there
    import ctypes

    ctypes.CDLL("libcuda.so.1")
    CUDA_WORKS = True
except OSError:
    pass


def test_device_request_parsing():
    assert DeviceRequest.parse("auto") == DeviceRequest("auto")
    assert DeviceRequest.parse("CUDA:1") == DeviceRequest("cuda", 1)
    assert str(DeviceRequest.parse("cuda:2")) == "cuda:2"
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        DeviceRequest.parse("tpu")


def test_cpu_request_runs_on_cpu_with_no_reason(models):
    info = open_session(load_spec(models("rgb_classes")), "cpu").info
    assert info.provider == "CPUExecutionProvider" and info.fallback_reason is None and not info.on_gpu
    assert info.first_run_ms > 0 and info.warm_run_ms > 0


@pytest.mark.skipif(CUDA_WORKS, reason="this machine has an NVIDIA driver")
def test_cuda_request_without_gpu_falls_back_and_says_why(models):
    info = open_session(load_spec(models("rgb_classes")), "cuda").info
    assert info.requested == "cuda"
    assert info.provider == "CPUExecutionProvider" and info.providers == ("CPUExecutionProvider",)
    assert info.fallback_reason and "\n" not in info.fallback_reason
    if CUDA in ort.get_available_providers():  # onnxruntime-gpu: the captured C++ log names the library
        assert "could not be loaded" in info.fallback_reason and ".so" in info.fallback_reason
    assert info.provider_label == "CPU"


@pytest.mark.skipif(CUDA_WORKS, reason="this machine has an NVIDIA driver")
def test_native_log_is_captured_not_printed(models, capfd):
    open_session(load_spec(models("rgb_classes")), "cuda")
    assert "Failed to load library" not in capfd.readouterr().err


def test_explain_cuda_failure_from_real_log_lines():
    line = ("2026-11-29 [E:onnxruntime:Default, provider_bridge_ort.cc:2458 operator()] ... FAIL : Failed to load "
            "library /x/onnxruntime/capi/libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: cannot "
            "open shared object file: No such file or directory")
    assert "libcublasLt.so.13 not found" in explain_cuda_failure([line])
    assert "no CUDA-capable device" in explain_cuda_failure(["CUDA failure 100: no CUDA-capable device is detected"])
    assert "logged no reason" in explain_cuda_failure([])


def test_cuda_provider_options_are_passed_through():
    options = SessionOptions(cudnn_conv_algo_search="EXHAUSTIVE", gpu_mem_limit=2 << 30,
                             arena_extend_strategy="kSameAsRequested")
    assert options.cuda_provider_options(1) == {
        "device_id": "1", "cudnn_conv_algo_search": "EXHAUSTIVE",
        "arena_extend_strategy": "kSameAsRequested", "gpu_mem_limit": str(2 << 30)}
    assert SessionOptions().cuda_provider_options(0)["cudnn_conv_algo_search"] == "HEURISTIC"
