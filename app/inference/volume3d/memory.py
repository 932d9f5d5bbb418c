"""How much memory a 3D prediction needs, said before anything is allocated, and the refusal when it cannot fit.

predict_volume holds, at its peak, either (while the window slides) the model-grid image, the float32 accumulator
of K classes and the float32 weight sum, or (while resampling back) the accumulator, the kept float16
probabilities and the uint8 labels on the native grid; plus a batch of patches and their outputs. The model's own
activations inside ONNX Runtime are not counted (the session measures those when it is created).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import numpy as np

from app.errors import SegLensError

Shape3 = tuple[int, int, int]
GB = 1024**3


def estimate_bytes(native_shape: Shape3, model_shape: Shape3, classes: int, *, channels: int = 1,
                   patch: Shape3 = (1, 1, 1), batch: int = 1) -> int:
    """Peak bytes of predict_volume for a volume of `native_shape` run on the model's grid `model_shape`."""
    native = int(np.prod(native_shape, dtype=np.int64))
    padded = int(np.prod([max(m, p) for m, p in zip(model_shape, patch, strict=True)], dtype=np.int64))
    voxels = int(np.prod(patch, dtype=np.int64))
    model = int(np.prod(model_shape, dtype=np.int64))
    image = channels * 4 * (model + (padded if padded != model else 0))  # a volume below the patch: a padded copy
    sliding = image + padded * 4 * (classes + 1)  # image(s), accumulator, weight sum (float32)
    back = padded * 4 * classes + native * (2 * classes + 1)  # accumulator, float16 probabilities, uint8 labels
    # per batch: the patches, a flipped copy, the raw output, its activation and the TTA sum (float32)
    patches = max(1, batch) * voxels * 4 * (2 * channels + 3 * classes) + voxels * 4 * classes
    slices = 4 * (channels + classes) * 4 * max(native_shape[1] * native_shape[2], model_shape[1] * model_shape[2])
    return max(sliding, back) + patches + slices


def available_memory() -> int | None:
    """Physical memory available to a new allocation now, in bytes; None where the system does not say."""
    if sys.platform == "win32":
        return _windows_available()
    meminfo = Path("/proc/meminfo")
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _windows_available() -> int | None:
    class _Status(ctypes.Structure):
        _fields_ = [("length", ctypes.c_ulong), ("load", ctypes.c_ulong), ("total", ctypes.c_ulonglong),
                    ("available", ctypes.c_ulonglong), ("page_total", ctypes.c_ulonglong),
                    ("page_available", ctypes.c_ulonglong), ("virtual_total", ctypes.c_ulonglong),
                    ("virtual_available", ctypes.c_ulonglong), ("extended", ctypes.c_ulonglong)]

    status = _Status()
    status.length = ctypes.sizeof(_Status)
    windll = getattr(ctypes, "windll", None)
    if windll is None or not windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        return None
    return int(status.available)


def size_text(count: int) -> str:
    """Bytes as people read them: 812 MB, 3.4 GB."""
    return f"{count / GB:.1f} GB" if count >= GB else f"{max(1, round(count / 1024**2))} MB"


def check_memory(needed: int, limit: int | None, *, model_shape: Shape3, classes: int) -> None:
    """SegLensError (one line naming the estimate and the limit) when `needed` exceeds `limit`; None: what the
    system has available now (no check where it does not say)."""
    if limit is None:
        limit = available_memory()
    if limit is None or needed <= limit:
        return
    grid = "×".join(map(str, model_shape))
    kinds = "1 class" if classes == 1 else f"{classes} classes"
    raise SegLensError(f"the 3D model needs about {size_text(needed)} for this volume ({grid} voxels on the model's "
                       f"grid, {kinds}), more than the {size_text(limit)} available")
