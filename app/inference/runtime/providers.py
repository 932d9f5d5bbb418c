"""The one place that knows ONNX Runtime's execution providers: their names, loading NVIDIA's libraries,
capturing what ONNX Runtime's C++ logger says, turning that into a plain reason, and which onnxruntime
distributions are installed.

`onnxruntime.get_available_providers()` only says what the wheel was built with; a CUDA provider that cannot
start falls back to the CPU silently, leaving only C++ log lines on stderr (file descriptor 2, not Python's
`sys.stderr`). session.py, doctor.py and diagnostics.py all use what is here.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import io
import logging
import os
import re
import shutil
import site
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.inference.model.session import CPU as CPU  # the provider names SessionInfo speaks in, re-exported
from app.inference.model.session import CUDA as CUDA
from app.inference.model.session import TENSORRT as TENSORRT
from app.io.native import FD2_LOCK

log = logging.getLogger(__name__)

ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino",
                     "ort-nightly-gpu")
_stderr_lock = FD2_LOCK  # one owner of file descriptor 2 at a time, the image decoders included


# --- is there an NVIDIA GPU at all ----------------------------------------------------------------------------

# What an installed NVIDIA driver leaves behind, whatever CUDA libraries are (or are not) installed: the kernel
# module's /proc entry and device nodes (native Linux, containers given the GPU), WSL2's GPU node and its libcuda.
_LINUX_SIGNS = ("/proc/driver/nvidia/version", "/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg",
                "/usr/lib/wsl/lib/libcuda.so.1")
_WINDOWS_SIGNS = ("nvcuda", "nvml")  # nvcuda.dll / nvml.dll, which the driver puts into System32


def detect_nvidia_gpu() -> str | None:
    """What shows that this machine has an NVIDIA GPU with a driver (a path, or `nvidia-smi on PATH`), else None.

    File checks only (no subprocess, no CUDA library loaded): cheap enough for every session that is opened.
    `auto` does not try the CUDA provider without one, so a laptop without NVIDIA hardware is calmly on the CPU
    instead of warning about CUDA libraries it has no use for. Callers look it up on this module at call time
    (`providers.detect_nvidia_gpu()`), so a test can play a machine with or without one."""
    if sys.platform == "win32":
        import ctypes.util

        found = next((name for name in _WINDOWS_SIGNS if ctypes.util.find_library(name)), None)
        return f"{found}.dll" if found else _nvidia_smi()
    for sign in _LINUX_SIGNS:
        if os.path.exists(sign):
            return sign
    return _nvidia_smi()


def _nvidia_smi() -> str | None:
    return "nvidia-smi on PATH" if shutil.which("nvidia-smi") else None


# --- loading the CUDA libraries ------------------------------------------------------------------------------

def preload_cuda_libraries(ort: Any) -> list[str]:
    """Load CUDA/cuDNN from NVIDIA's pip wheels where present; what `preload_dlls` printed, as lines (it prints
    instead of raising, and those lines are the cause when the CUDA provider then fails)."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return []
    printed = io.StringIO()
    # Frozen: NVIDIA's wheels are bundled beside onnxruntime in their package layout; never look for torch's.
    kwargs = {"directory": ""} if getattr(sys, "frozen", False) else {}
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            preload(**kwargs)
        except Exception as exc:  # it is documented not to raise; a broken install must not stop the app
            print(f"preload_dlls failed: {exc}")
    notes = [line for line in printed.getvalue().splitlines() if line.strip()]
    for line in notes:
        log.debug("preload_dlls: %s", line)
    return notes


def nvidia_wheel_dirs() -> list[str]:
    """lib/ (bin/ on Windows) folders of NVIDIA's pip wheels, where onnxruntime itself looks for them."""
    folders = []
    for root in _wheel_roots():
        for pattern in (("nvidia", "*", "lib"), ("nvidia", "*", "bin"), ("nvidia", "cu*", "lib")):
            folders += glob.glob(os.path.join(glob.escape(root), *pattern))
    return sorted(set(folders))


def _wheel_roots() -> list[str]:
    """The site-packages folders, the one onnxruntime is imported from, and a frozen bundle: absolute paths only.
    Never all of sys.path: '', '.' and relative entries are the working folder, and the doctor loads (runs) the
    libraries found, so a planted ./nvidia/x/lib/libcudart.so would run its code."""
    roots = []
    with contextlib.suppress(AttributeError):  # site may be trimmed (embedded or frozen interpreters)
        roots += site.getsitepackages()
    if getattr(site, "ENABLE_USER_SITE", False):  # off under -s / -I and in virtual environments
        roots.append(site.getusersitepackages())
    roots.append(_import_home("onnxruntime") or "")
    if getattr(sys, "frozen", False):
        roots.append(getattr(sys, "_MEIPASS", ""))
    return list(dict.fromkeys(os.path.normpath(r) for r in roots if r and os.path.isabs(r)))


# --- what ONNX Runtime's native logger says ------------------------------------------------------------------

class CapturedLog:
    """The text written to file descriptor 2 during a `capture_native_stderr` block (set when it ends)."""

    text = ""

    @property
    def lines(self) -> list[str]:
        return native_log_lines(self.text)


@contextlib.contextmanager
def capture_native_stderr() -> Iterator[CapturedLog]:
    """Redirect file descriptor 2 (where ONNX Runtime's C++ logger writes) into a buffer for the block."""
    captured = CapturedLog()
    with _stderr_lock:
        with contextlib.suppress(AttributeError, ValueError):  # sys.stderr may be None in a windowed app
            sys.stderr.flush()
        try:
            saved = os.dup(2)
        except OSError:  # no stderr at all (a windowed frozen app): nothing to capture
            yield captured
            return
        with tempfile.TemporaryFile(mode="w+b") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield captured
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                captured.text = sink.read().decode("utf-8", "replace")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def native_log_lines(text: str) -> list[str]:
    """The logger's non-empty lines without colour codes."""
    return [line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()]


def explain_cuda_failure(lines: list[str]) -> str:
    """One plain line from ONNX Runtime's log about why the CUDA provider did not start."""
    text = "\n".join(lines)
    missing = re.search(r"Failed to load library \S*?(libonnxruntime_providers_cuda\S*|\S+) with error: "
                        r"([^\s:]+): cannot open shared object file", text)
    if missing and missing.group(2).startswith(("libcuda.so", "nvcuda")):
        return f"no NVIDIA driver is installed ({missing.group(2)} not found)"
    if missing:
        return (f"the CUDA provider could not be loaded: {missing.group(2)} not found "
                f"(CUDA/cuDNN libraries for this onnxruntime build are missing or no NVIDIA driver is installed)")
    generic = re.search(r"Failed to load library .*? with error: (.+)", text)
    if generic:
        return f"the CUDA provider could not be loaded: {generic.group(1).strip()}"
    for pattern in (r"(CUDA failure \d+: [^;\n]+)", r"(no CUDA-capable device is detected)",
                    r"(CUDA driver version is insufficient[^\n]*)", r"Failed to create CUDAExecutionProvider"):
        found = re.search(pattern, text)
        if found:
            return found.group(0).strip()
    return "ONNX Runtime did not enable the CUDA provider and logged no reason"


# --- installed onnxruntime distributions ---------------------------------------------------------------------

def installed_ort_packages() -> dict[str, str]:
    """The ONNX Runtime distributions installed in the folder `onnxruntime` is imported from: two there overwrite
    each other's files. One in another folder of the path (shadowed, as by PYTHONPATH) is no conflict."""
    found = _ort_distributions()
    home = _import_home("onnxruntime")
    here = {name: version for name, version, folder in found if folder == home}
    return here or {name: version for name, version, _ in found}


def shadowed_ort_packages() -> dict[str, str]:
    """ONNX Runtime distributions Python does not import from (another folder earlier on the path wins)."""
    home = _import_home("onnxruntime")
    return {f"{name} ({folder})": version for name, version, folder in _ort_distributions()
            if home is not None and folder != home}


def ort_packages_text() -> str:
    """`onnxruntime-gpu 1.31.1` (or the conflicting pair), for messages."""
    return ", ".join(f"{name} {version}" for name, version in installed_ort_packages().items()) or "unknown"


def _ort_distributions() -> list[tuple[str, str, str]]:
    from importlib import metadata  # ~14 ms of imports (email, …): not on the viewer's way to its first overlay

    seen = []
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in ORT_DISTRIBUTIONS:
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
