"""Versions and environment facts for About/Diagnostics (and the CLI's doctor). Qt-free; never raises."""

from __future__ import annotations

import importlib.util
import platform
import sys
from importlib import metadata
from pathlib import Path

from app import __version__


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


_ORT_NAMES = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino", "ort-nightly-gpu")


def onnxruntime_packages() -> dict[str, str]:
    """The ONNX Runtime distributions installed in the folder `onnxruntime` is imported from: two there overwrite
    each other's files. One in another folder of the path (shadowed, as by PYTHONPATH) is no conflict."""
    found = _ort_distributions()
    home = _import_home("onnxruntime")
    here = {name: version for name, version, folder in found if folder == home}
    return here or {name: version for name, version, _ in found}


def shadowed_onnxruntime_packages() -> dict[str, str]:
    """ONNX Runtime distributions Python does not import from (another folder earlier on the path wins)."""
    home = _import_home("onnxruntime")
    return {f"{name} ({folder})": version for name, version, folder in _ort_distributions()
            if home is not None and folder != home}


def _ort_distributions() -> list[tuple[str, str, str]]:
    seen = []
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in _ORT_NAMES:
            entry = (name, dist.version, str(Path(str(dist.locate_file(""))).resolve()))
            if entry not in seen:
                seen.append(entry)
    return seen


def _import_home(module: str) -> str | None:
    """The site folder a top-level package is imported from, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
        locations = list(spec.submodule_search_locations or []) if spec else []
    except (ImportError, ValueError):
        return None
    return str(Path(locations[0]).resolve().parent) if locations else None


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
    info["onnxruntime packages"] = ", ".join(f"{k} {v}" for k, v in onnxruntime_packages().items()) or "none"
    shadowed = shadowed_onnxruntime_packages()
    if shadowed:
        info["onnxruntime packages (shadowed, not used)"] = ", ".join(f"{k} {v}" for k, v in shadowed.items())
    for module, label in (("numpy", "numpy"), ("cv2", "OpenCV"), ("PIL", "Pillow")):
        info[label] = _module_version(module)
    info["PySide6"] = package_version("PySide6-Essentials") or package_version("PySide6") or "n/a"
    if "PySide6.QtCore" in sys.modules:  # the CLI never imports Qt just to print its version
        info["Qt"] = _qt_version()
    return info


def gpu_facts() -> dict[str, str]:
    from app.inference import telemetry

    facts = {"NVIDIA driver": telemetry.driver_version() or f"not found ({telemetry.nvml_error() or 'no NVML'})"}
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
    try:
        from PySide6 import QtCore

        return QtCore.qVersion()
    except Exception:
        return None


def _build_info(key: str) -> str | None:
    try:
        from onnxruntime.capi import build_and_package_info

        return getattr(build_and_package_info, key, None)
    except Exception:
        return None
