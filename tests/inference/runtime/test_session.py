"""The session tells the truth about where the model runs."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from app.inference.model.builder import load_spec
from app.inference.model.runtime_options import RuntimeOptions, parse_runtime_arguments
from app.inference.runtime.options import cuda_provider_options, providers_for
from app.inference.runtime.providers import CUDA, TENSORRT, explain_cuda_failure
from app.inference.runtime.session import DeviceRequest, open_session

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
    model = open_session(load_spec(models("rgb_classes")), "cpu", warm_up=False)
    info = model.warm_up(measure_warm=True)
    assert info.provider == "CPUExecutionProvider" and info.fallback_reason is None and not info.on_gpu
    assert info.first_run_ms > 0 and info.warm_run_ms > 0
    assert open_session(load_spec(models("rgb_classes")), "cpu").info.warm_run_ms == 0  # viewer: one run only


@pytest.mark.skipif(CUDA_WORKS, reason="this machine has an NVIDIA driver")
def test_cuda_request_without_gpu_falls_back_and_says_why(models):
    info = open_session(load_spec(models("rgb_classes")), "cuda").info
    assert info.requested == "cuda"
    assert info.provider == "CPUExecutionProvider" and info.providers == ("CPUExecutionProvider",)
    assert info.fallback_reason and "\n" not in info.fallback_reason
    if CUDA in ort.get_available_providers():  # onnxruntime-gpu: the captured C++ log names the library
        assert "could not be loaded" in info.fallback_reason and ".so" in info.fallback_reason
    # "CPU (no NVIDIA GPU)" where the probe finds none
    # (tests/inference/runtime/test_gpu_presence.py plays both machines)
    assert info.provider_label.startswith("CPU")


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
    driverless = line.replace("libcublasLt.so.13", "libcuda.so.1")
    assert explain_cuda_failure([driverless]) == "no NVIDIA driver is installed (libcuda.so.1 not found)"


def test_cuda_provider_options_are_passed_through():
    options = RuntimeOptions(cudnn_conv_algo_search="EXHAUSTIVE", gpu_mem_limit_mb=2048,
                             arena_extend_strategy="kSameAsRequested", prefer_nhwc=True, use_tf32=False)
    assert cuda_provider_options(options, 1) == {
        "device_id": "1", "cudnn_conv_algo_search": "EXHAUSTIVE", "arena_extend_strategy": "kSameAsRequested",
        "prefer_nhwc": "1", "use_tf32": "0", "gpu_mem_limit": str(2048 << 20)}
    assert cuda_provider_options(RuntimeOptions(), 0)["cudnn_conv_algo_search"] == "HEURISTIC"


def test_provider_list_puts_tensorrt_first_with_a_cache_and_cpu_last(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    providers = providers_for(RuntimeOptions(tensorrt=True, tensorrt_fp16=True),
                              gpu=True, device_id=0, available=[TENSORRT, CUDA, "CPUExecutionProvider"])
    assert [p if isinstance(p, str) else p[0] for p in providers] == [TENSORRT, CUDA, "CPUExecutionProvider"]
    trt = providers[0][1]
    assert trt["trt_engine_cache_enable"] == "True" and trt["trt_fp16_enable"] == "True"
    assert trt["trt_engine_cache_path"].startswith(str(tmp_path))
    cpu_only = providers_for(RuntimeOptions(tensorrt=True), gpu=False, device_id=0, available=[])
    assert cpu_only == ["CPUExecutionProvider"]


def test_runtime_arguments_are_validated():
    parsed = parse_runtime_arguments(["tensorrt=true", "gpu_mem_limit_mb=4096", "device_argmax=off", "use_tf32=true"])
    assert parsed == RuntimeOptions(tensorrt=True, gpu_mem_limit_mb=4096, device_argmax="off")
    assert parsed.given == {"tensorrt", "gpu_mem_limit_mb", "device_argmax", "use_tf32"}  # use_tf32's default, given
    with pytest.raises(ValueError, match="--runtime use_tf32: must be true or false"):
        parse_runtime_arguments(["use_tf32=maybe"])
    with pytest.raises(ValueError, match="KEY one of"):
        parse_runtime_arguments(["warp_speed=9"])


def test_sidecar_runtime_section_reaches_the_session(models):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text("runtime:\n  intra_op_threads: 1\n  io_binding: on\n")
    spec = load_spec(path)
    assert spec.runtime == RuntimeOptions(intra_op_threads=1, io_binding="on")
    assert spec.runtime.given == {"intra_op_threads", "io_binding"}
    assert open_session(spec, "cpu").uses_io_binding
    cli = parse_runtime_arguments(["io_binding=off"])
    assert not open_session(spec, "cpu", runtime=cli).uses_io_binding  # CLI wins
    assert spec.runtime.merged(cli) == RuntimeOptions(intra_op_threads=1, io_binding="off")  # the sidecar's rest kept
    assert spec.runtime.merged(parse_runtime_arguments(["io_binding=auto"])).io_binding == "auto"  # a default, given


def test_device_argmax_and_io_binding_give_the_same_masks(models):
    import numpy as np
    from conftest import stripes

    from app.inference.image.pipeline import run_image

    spec = load_spec(models("fixed_size_classes", size=64))
    image = stripes(64, 64)
    plain = run_image(open_session(spec, "cpu", runtime=RuntimeOptions(device_argmax="off", io_binding="off")), image)
    fused = open_session(spec, "cpu", runtime=RuntimeOptions(device_argmax="on", io_binding="on"))
    assert fused.spec.output.kind == "labels" and fused.uses_io_binding
    np.testing.assert_array_equal(run_image(fused, image).mask, plain.mask)


def test_intra_op_spinning_is_off_unless_asked_for(models):
    from app.inference.model.builder import load_spec
    spec = load_spec(models("rgb_classes"))

    def entry(model) -> str | None:
        try:
            return model._session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
        except RuntimeError:  # not set: ONNX Runtime's default, spinning
            return None

    assert entry(open_session(spec, "cpu", warm_up=False)) == "0"
    spinning = open_session(spec, "cpu", warm_up=False, runtime=parse_runtime_arguments(["allow_spinning=true"]))
    assert entry(spinning) is None
