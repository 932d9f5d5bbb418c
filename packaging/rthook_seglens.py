"""PyInstaller runtime hook: runs before the app's own code in the frozen build.

- On Windows, NVIDIA's CUDA/cuDNN wheels keep their DLLs in nvidia/<package>/bin: put those folders on the DLL
  search path so onnxruntime's CUDA provider finds them (Linux needs nothing: preload_dlls loads by full path).
- A windowed app has no console: sys.stdout/stderr may be None, and a print() must not crash it.
- highdicom's big tables of the DICOM standard ship gzipped (seglens.spec): pkgutil.get_data falls back to the
  `.gz` beside a missing highdicom `.json`.
"""

import contextlib
import glob
import gzip
import os
import pkgutil
import sys

base = getattr(sys, "_MEIPASS", os.path.dirname(sys.executable))
if sys.platform == "win32" and hasattr(os, "add_dll_directory"):
    for folder in glob.glob(os.path.join(base, "nvidia", "*", "bin")):
        with contextlib.suppress(OSError):
            os.add_dll_directory(folder)

# `env -i` or a bare service account leaves the C locale; Qt wants UTF-8 and would warn about switching.
if sys.platform.startswith("linux") and not any(
        "UTF-8" in os.environ.get(k, "").upper() or "UTF8" in os.environ.get(k, "").upper()
        for k in ("LC_ALL", "LC_CTYPE", "LANG")):
    os.environ["LC_CTYPE"] = "C.UTF-8"

for name in ("stdout", "stderr"):
    if getattr(sys, name) is None:
        setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (lives with the process)


_get_data = pkgutil.get_data


def _get_data_or_gzipped(package, resource):
    try:
        return _get_data(package, resource)
    except OSError:
        if package != "highdicom" or not resource.endswith(".json"):
            raise
        packed = _get_data(package, resource + ".gz")
        return None if packed is None else gzip.decompress(packed)


pkgutil.get_data = _get_data_or_gzipped
