"""Where the doctor looks for NVIDIA's libraries: only where onnxruntime itself looks, never the working folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from app.inference.runtime import doctor, providers


def _plant(root: Path, package: str = "evil") -> Path:
    lib = root / "nvidia" / package / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.13").write_bytes(b"")  # an empty file is enough to show it would be picked
    return lib


def test_the_working_folder_is_never_searched(tmp_path, monkeypatch):
    """`''`, `.` and relative sys.path entries mean the working folder: a planted ./nvidia/evil/lib used to be
    listed, and `doctor` then loaded (ran) the library found there."""
    _plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", ".", "nvidia/..", *sys.path])
    listed = providers.nvidia_wheel_dirs()
    assert not [d for d in listed if Path(d).resolve().is_relative_to(tmp_path)], listed
    assert all(os.path.isabs(d) for d in listed)


def test_doctor_does_not_load_a_planted_library(tmp_path, monkeypatch):
    _plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", ".", *sys.path])
    loaded = []

    def fake_cdll(name):
        loaded.append(name)
        raise OSError("not loaded in tests")

    monkeypatch.setattr(doctor.ctypes, "CDLL", fake_cdll)
    doctor.find_cuda_libraries("13")
    assert not [n for n in loaded if os.sep in n and Path(n).resolve().is_relative_to(tmp_path)], loaded


def test_site_packages_and_the_frozen_bundle_are_searched(tmp_path, monkeypatch):
    site_dir, bundle = tmp_path / "site-packages", tmp_path / "bundle"
    wheel, frozen = _plant(site_dir, "cuda_runtime"), _plant(bundle, "cudnn")
    monkeypatch.setattr(providers.site, "getsitepackages", lambda: [str(site_dir)])
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)
    listed = providers.nvidia_wheel_dirs()
    assert str(wheel) in listed and str(frozen) in listed
