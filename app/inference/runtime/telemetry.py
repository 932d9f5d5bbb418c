"""GPU memory from NVML and process memory. Optional by nature: without a driver everything is None.

Nothing here may raise: a status bar asks every second, on machines with and without NVIDIA drivers.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Any

_lock = threading.Lock()
_nvml_state: dict[str, Any] = {}  # "module": pynvml or None (it ships no types), "error": why not


@dataclass(frozen=True)
class GpuMemory:
    index: int
    name: str
    used_mb: float
    total_mb: float
    process_mb: float | None  # this process's share, where the driver reports it

    def text(self) -> str:
        own = f", this app {self.process_mb / 1024:.2f} GB" if self.process_mb is not None else ""
        return f"GPU {self.index} mem {self.used_mb / 1024:.1f}/{self.total_mb / 1024:.1f} GB{own}"


def _nvml() -> Any:
    """The initialised pynvml module, or None (no package, no driver, no GPU); tried once per process."""
    with _lock:
        if "module" not in _nvml_state:
            _nvml_state["module"] = None
            try:
                import pynvml

                pynvml.nvmlInit()
                _nvml_state["module"] = pynvml
            except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ImportError, ...
                _nvml_state["error"] = f"{type(exc).__name__}: {exc}"
        return _nvml_state["module"]


def nvml_error() -> str | None:
    """Why NVML is unavailable ('NVMLError_LibraryNotFound: NVML Shared Library Not Found'), if it is."""
    _nvml()
    error: str | None = _nvml_state.get("error")
    return error


def driver_version() -> str | None:
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        version = nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        return None


def gpu_count() -> int:
    nvml = _nvml()
    if nvml is None:
        return 0
    try:
        return int(nvml.nvmlDeviceGetCount())
    except Exception:
        return 0


def gpu_memory(index: int = 0) -> GpuMemory | None:
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        name = nvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
        return GpuMemory(index, name, info.used / 2**20, info.total / 2**20, _process_mb(nvml, handle))
    except Exception:
        return None


def _process_mb(nvml: Any, handle: Any) -> float | None:  # pynvml and its device handle
    with contextlib.suppress(Exception):
        for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                return float(proc.usedGpuMemory / 2**20)
    return None


def process_rss_mb() -> float | None:
    """Resident memory of this process in MB (Linux: /proc; elsewhere peak RSS as a stand-in)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except Exception:
        return None
