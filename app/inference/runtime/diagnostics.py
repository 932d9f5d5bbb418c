"""Versions and environment facts for About/Diagnostics (and the CLI's doctor). Qt-free; never raises."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from app import __version__
from app.inference.runtime.providers import installed_ort_packages, shadowed_ort_packages


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    info: dict[str, str | None] = {
        "seglens": __version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "frozen": "yes" if getattr(sys, "frozen", False) else "no",
    }
    try:
        import onnxruntime as ort

        info["onnxruntime"] = ort.__version__
        info["onnxruntime build CUDA"] = getattr(ort, "cuda_version", None) or _build_info("cuda_version")
        info["onnxruntime providers (built in)"] = ", ".join(ort.get_available_providers())
    except Exception as exc:  # a broken install is exactly what diagnostics must describe
        info["onnxruntime"] = f"cannot import: {exc}"
    info["onnxruntime packages"] = ", ".join(f"{k} {v}" for k, v in installed_ort_packages().items()) or "none"
    shadowed = shadowed_ort_packages()
    if shadowed:
        info["onnxruntime packages (shadowed, not used)"] = ", ".join(f"{k} {v}" for k, v in shadowed.items())
    for module, label in (("numpy", "numpy"), ("cv2", "OpenCV"), ("PIL", "Pillow")):
        info[label] = _module_version(module)
    info["PySide6"] = package_version("PySide6-Essentials") or package_version("PySide6") or "n/a"
    if "PySide6.QtCore" in sys.modules:  # the CLI never imports Qt just to print its version
        info["Qt"] = _qt_version()
    return info


def gpu_facts() -> dict[str, str]:
    from app.inference.runtime import providers, telemetry

    facts = {"NVIDIA GPU": providers.detect_nvidia_gpu() or "none found (the CPU is used)",
             "NVIDIA driver": telemetry.driver_version() or f"not found ({telemetry.nvml_error() or 'no NVML'})"}
    for index in range(telemetry.gpu_count()):
        memory = telemetry.gpu_memory(index)
        if memory:
            facts[f"GPU {index}"] = f"{memory.name}, {memory.total_mb / 1024:.1f} GB"
    return facts


def _module_version(module: str) -> str | None:
    try:
        imported = __import__(module)
        return str(getattr(imported, "__version__", "unknown"))
    except Exception as exc:
        return f"cannot import: {exc}"


def _qt_version() -> str | None:
    """The Qt runtime's version, read from the QtCore the viewer already loaded: the core never imports Qt."""
    try:
        version: str = sys.modules["PySide6.QtCore"].qVersion()
        return version
    except Exception:
        return None


def _build_info(key: str) -> str | None:
    try:
        from onnxruntime.capi import build_and_package_info

        return getattr(build_and_package_info, key, None)
    except Exception:
        return None
