"""`seglens-cli doctor`: does the GPU setup really work, and if not, why and what to do.

Facts are gathered by really trying (a tiny session on each provider, loading the CUDA libraries), then a pure
function turns them into a plain-language verdict with a fix, so the verdict logic is testable with fakes.
Qt-free; never raises on a broken environment (describing one is its job).
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.errors import one_line
from app.inference.runtime import diagnostics, providers
from app.inference.runtime.providers import (
    CPU,
    CUDA,
    TENSORRT,
    capture_native_stderr,
    explain_cuda_failure,
    installed_ort_packages,
    nvidia_wheel_dirs,
    preload_cuda_libraries,
)
from app.paths import install_kind

# The libraries onnxruntime-gpu's CUDA provider needs, per CUDA major version it was built for.
CUDA_LIBRARIES = {
    "13": ["libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcufft.so.12",
           "libcudnn.so.9"],
    "12": ["libcudart.so.12", "libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcufft.so.11",
           "libcudnn.so.9"],
}
MIN_DRIVER = {"13": 580, "12": 525}


@dataclass
class ProviderCheck:
    provider: str
    ok: bool
    detail: str  # "ran on CUDAExecutionProvider" or the captured reason


@dataclass
class Facts:
    versions: dict[str, str | None] = field(default_factory=dict)
    ort_packages: dict[str, str] = field(default_factory=dict)
    built_providers: list[str] = field(default_factory=list)
    build_cuda: str | None = None  # CUDA major version onnxruntime was built for ("13")
    provider_checks: list[ProviderCheck] = field(default_factory=list)
    driver_version: str | None = None
    nvml_error: str | None = None
    gpus: list[str] = field(default_factory=list)  # "NVIDIA H100, 80.0 GB"
    cuda_libraries: dict[str, str | None] = field(default_factory=dict)  # file name -> where it loaded from, or None
    flavor: str = "source"
    install: str = "installed"  # "checkout" (a clone run through uv), "installed" (pip) or "frozen"
    nvidia_gpu: str | None = None  # what shows an NVIDIA GPU is present (providers.detect_nvidia_gpu), or None


@dataclass
class Verdict:
    gpu_ready: bool
    summary: str
    fix: str | None


def gather() -> Facts:
    from app.inference.runtime import telemetry

    facts = Facts(versions=diagnostics.versions(), ort_packages=installed_ort_packages(),
                  flavor=_flavor(), install=install_kind(), nvidia_gpu=providers.detect_nvidia_gpu())
    try:
        import onnxruntime as ort

        facts.built_providers = list(ort.get_available_providers())
        facts.build_cuda = (getattr(ort, "cuda_version", "") or "").split(".")[0] or None
    except Exception as exc:
        facts.provider_checks.append(ProviderCheck("onnxruntime", False, f"cannot import: {exc}"))
        return facts
    facts.driver_version = telemetry.driver_version()
    facts.nvml_error = telemetry.nvml_error()
    for index in range(telemetry.gpu_count()):
        memory = telemetry.gpu_memory(index)
        if memory:
            facts.gpus.append(f"GPU {index}: {memory.name}, {memory.total_mb / 1024:.1f} GB, "
                              f"{memory.used_mb / 1024:.1f} GB used")
    if CUDA in facts.built_providers:
        facts.cuda_libraries = find_cuda_libraries(facts.build_cuda or "13")
    facts.provider_checks = [check_provider(p) for p in facts.built_providers if p != TENSORRT or _wants_trt()]
    return facts


def check_provider(provider: str) -> ProviderCheck:
    """Open a one-node session on `provider` and report what really ran it."""
    import onnxruntime as ort

    notes = preload_cuda_libraries(ort) if provider != CPU else []
    providers = [provider] if provider == CPU else [provider, CPU]
    with capture_native_stderr() as captured:
        try:
            session = ort.InferenceSession(_tiny_model(), providers=providers)
            active = session.get_providers()[0]
        except Exception as exc:
            return ProviderCheck(provider, False, one_line(exc, most=300))
    if active == provider:
        return ProviderCheck(provider, True, f"ran on {provider}")
    lines = captured.lines + notes
    reason = explain_cuda_failure(lines) if provider == CUDA else _first_error(lines)
    return ProviderCheck(provider, False, reason)


def find_cuda_libraries(cuda_major: str) -> dict[str, str | None]:
    """Where each CUDA library the provider needs loads from: NVIDIA's pip wheels, the system, or None."""
    found: dict[str, str | None] = {}
    wheel_dirs = nvidia_wheel_dirs()
    for name in CUDA_LIBRARIES.get(cuda_major, CUDA_LIBRARIES["13"]):
        in_wheel = next((str(Path(d) / name) for d in wheel_dirs if (Path(d) / name).exists()), None)
        try:
            ctypes.CDLL(in_wheel or name)
            found[name] = in_wheel or "system library path"
        except OSError:
            found[name] = None
    return found


def decide(facts: Facts) -> Verdict:
    """The plain-language verdict and the fix, from facts alone."""
    if len(facts.ort_packages) > 1:
        names = " and ".join(facts.ort_packages)
        return Verdict(False, f"Broken install: {names} are both installed and overwrite each other's files.",
                       _reinstall_command(facts.install, " ".join(facts.ort_packages)))
    if not facts.built_providers:
        return Verdict(False, "onnxruntime cannot be imported.", _reinstall_command(facts.install))
    cuda = next((c for c in facts.provider_checks if c.provider == CUDA), None)
    if cuda is not None and cuda.ok:
        where = f" on {facts.gpus[0].split(': ', 1)[1]}" if facts.gpus else ""
        if facts.nvidia_gpu is None:  # CUDA works, yet the cheap probe `auto` relies on saw no GPU: never hide that
            return Verdict(True, f"GPU ready: models run with CUDA{where}, but `--device auto` did not detect the "
                                 "GPU and runs on the CPU.", "pass --device cuda")
        return Verdict(True, f"GPU ready: models run with CUDA{where}.", None)
    if CUDA not in facts.built_providers:
        if facts.flavor == "cpu":
            return Verdict(False, "This is the CPU build of SegLens: models run on the CPU.",
                           "for an NVIDIA GPU, use the cuda13 (driver R580+) or cuda12 build")
        reinstall = cuda_extra_command(facts.install)
        return Verdict(False, "This onnxruntime build has no CUDA provider: models run on the CPU.",
                       reinstall if facts.install == "checkout" else f"pip uninstall -y onnxruntime && {reinstall}")
    major = facts.build_cuda or "13"
    missing = [name for name, where in facts.cuda_libraries.items() if where is None]
    if facts.driver_version is None and not facts.gpus:
        driver = f"install the NVIDIA driver (R{MIN_DRIVER.get(major, 580)}+ for CUDA {major})"
        if facts.nvidia_gpu is None:  # nothing to fix: a machine without one runs on the CPU, as it should
            needs = f" and {cuda_extra_command(facts.install)}" if missing else ""
            return Verdict(False, "No NVIDIA GPU on this machine: models run on the CPU (expected; `--device auto` "
                                  "does not try CUDA here).",
                           f"nothing to fix here; on a machine with an NVIDIA GPU, {driver}{needs}")
        if missing:
            return Verdict(False, "CUDA unavailable: no NVIDIA driver was found "
                                  f"({facts.nvml_error or 'NVML not found'}), so models run on the CPU. The CUDA "
                                  f"{major} libraries are missing too ({', '.join(missing[:3])}).",
                           f"on a machine with an NVIDIA GPU, {driver} and {cuda_extra_command(facts.install)}")
        return Verdict(False, "CUDA unavailable: no NVIDIA driver was found "
                              f"({facts.nvml_error or 'NVML not found'}), so models run on the CPU. The CUDA "
                              f"{major} and cuDNN libraries are all present.",
                       f"on a machine with an NVIDIA GPU, {driver}; nothing else is missing")
    driver_major = _driver_major(facts.driver_version)
    if driver_major is not None and driver_major < MIN_DRIVER.get(major, 0):
        return Verdict(False, f"CUDA unavailable: NVIDIA driver {facts.driver_version} is too old for this "
                              f"onnxruntime build (CUDA {major} needs R{MIN_DRIVER[major]}+).",
                       f"update the driver to R{MIN_DRIVER[major]}+, or use the cuda12 build "
                       "(onnxruntime-gpu 1.26.x) that works with R525+")
    if missing:
        if facts.install == "frozen":
            return Verdict(False, f"CUDA {major} libraries not found ({', '.join(missing)}): models run on the "
                                  "CPU.", f"use the complete cuda{major} build of SegLens (it bundles them), or "
                                          f"install CUDA {major} + cuDNN 9 and put their lib folders on PATH")
        return Verdict(False, f"CUDA {major} libraries not found ({', '.join(missing)}): models run on the CPU.",
                       f"{cuda_extra_command(facts.install)} (NVIDIA's CUDA and cuDNN wheels), or install CUDA "
                       f"{major} + cuDNN 9 and put their lib folders on LD_LIBRARY_PATH / PATH")
    reason = cuda.detail if cuda else "the CUDA provider was not tried"
    return Verdict(False, f"CUDA provider failed: {reason}", "run `seglens-cli -v doctor` and see the log lines")


def report(facts: Facts, verdict: Verdict) -> str:
    lines = ["SegLens doctor", "", f"  {'build flavor':<34}{facts.flavor}", f"  {'installed as':<34}{facts.install}"]
    lines += [f"  {k:<34}{v}" for k, v in facts.versions.items()]
    lines += ["", "Providers (really tried, not just compiled in):"]
    lines += [f"  {c.provider:<34}{'OK' if c.ok else 'FAILED'}: {c.detail}" for c in facts.provider_checks]
    lines += ["", "NVIDIA:"]
    lines.append(f"  {'GPU present':<34}{'yes (' + facts.nvidia_gpu + ')' if facts.nvidia_gpu else _NO_GPU_SIGN}")
    lines.append(f"  {'driver':<34}{facts.driver_version or 'not found (' + (facts.nvml_error or '') + ')'}")
    lines += [f"  {g}" for g in facts.gpus]
    if facts.cuda_libraries:
        lines += ["", f"CUDA {facts.build_cuda} libraries the CUDA provider needs:"]
        lines += [f"  {k:<34}{v or 'NOT FOUND'}" for k, v in facts.cuda_libraries.items()]
    lines += ["", ("OK: " if verdict.gpu_ready else "Verdict: ") + verdict.summary]
    if verdict.fix:
        lines.append(f"Fix: {verdict.fix}")
    return "\n".join(lines)


def as_json(facts: Facts, verdict: Verdict) -> dict[str, Any]:
    return {"facts": asdict(facts), "verdict": asdict(verdict)}


def _tiny_model() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "doctor",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    serialized: bytes = model.SerializeToString()
    return serialized


def _first_error(lines: list[str]) -> str:
    return next((line for line in lines if "rror" in line or "ail" in line), "no reason was logged")[:300]


def _driver_major(version: str | None) -> int | None:
    try:
        return int(str(version).split(".")[0])
    except (TypeError, ValueError):
        return None


def _wants_trt() -> bool:
    return os.environ.get("SEGLENS_DOCTOR_TENSORRT", "") == "1"


_NO_GPU_SIGN = "no (no /proc/driver/nvidia, /dev/nvidia0, /dev/dxg, nvcuda.dll or nvidia-smi)"


def cuda_extra_command(install: str) -> str:
    """How this kind of install (app.paths.install_kind) gets NVIDIA's CUDA and cuDNN wheels (a frozen build
    cannot install packages)."""
    if install == "frozen":
        return "the cuda13 (driver R580+) or cuda12 build of SegLens"
    return "uv sync --extra cuda" if install == "checkout" else "pip install 'seglens[cuda]'"


def _reinstall_command(install: str, remove: str = "") -> str:
    """How this kind of install gets onnxruntime-gpu back whole (`remove`: the distributions to take out first).
    `uv sync` removes what the lock file does not list, so in a clone it takes the CPU build out by itself."""
    if install == "checkout":
        return "uv sync --reinstall-package onnxruntime-gpu"
    if install == "frozen":
        return "reinstall SegLens from its download (the build's files are damaged)"
    if remove:
        return f"pip uninstall -y {remove} && pip install onnxruntime-gpu"
    return "reinstall seglens (pip install --force-reinstall onnxruntime-gpu)"


def _flavor() -> str:
    """Which build this is: "source", or the frozen flavor written by the packaging script."""
    marker = Path(getattr(sys, "_MEIPASS", "")) / "FLAVOR" if getattr(sys, "frozen", False) else None
    if marker and marker.is_file():
        return marker.read_text().strip()
    return "source"
