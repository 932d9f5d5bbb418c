"""The GPU check's local parts (benchmarks/gpu_bundle.py, gpu_check.sh/.py), tested without a GPU or a download.

The wheels are re-packed from this environment's own installed distributions (stored, not compressed), so the
whole path — parts, receive, assemble, pip install into a scratch site, import — runs as on the GPU machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_bundle", REPO / "benchmarks" / "gpu_bundle.py")
gpu_bundle = sys.modules.setdefault("gpu_bundle", importlib.util.module_from_spec(spec))
spec.loader.exec_module(gpu_bundle)
HERE = sys.version_info[:2]


def repack(distribution: str, target: Path, keep=lambda name: True) -> Path:
    """An installed distribution as a wheel again (its RECORD's files), named `target`."""
    dist = metadata.distribution(distribution)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for entry in dist.files:
            name = str(entry)
            source = Path(str(dist.locate_file(entry)))
            if name.startswith("..") or "__pycache__" in name or not source.is_file() or not keep(name):
                continue
            info = zipfile.ZipInfo(name)
            info.external_attr = (source.stat().st_mode & 0o777) << 16
            wheel.writestr(info, source.read_bytes())
    return target


@pytest.fixture(scope="module")
def offline_wheels(tmp_path_factory) -> Path:
    """The wheels uv.lock pins for this Python, made from what is installed here."""
    folder = tmp_path_factory.mktemp("wheels")
    locked = gpu_bundle.locked_wheels(REPO / "uv.lock", HERE)
    names = {"onnxruntime-gpu": "onnxruntime-gpu", "pydicom": "pydicom", "platformdirs": "platformdirs",
             "shiboken6": "shiboken6", "pyside6-essentials": "PySide6-Essentials"}
    for name, wheel in locked.items():
        keep = (lambda n: gpu_bundle.QT_KEEP.fullmatch(n) or n.endswith(("QtGui.abi3.so", "libQt6Gui.so.6"))) \
            if name == "pyside6-essentials" else (lambda n: True)
        repack(names[name], folder / wheel.filename, keep)
    return folder


def test_the_lock_pins_cp312_wheels_for_the_gpu_machine():
    wheels = gpu_bundle.locked_wheels(REPO / "uv.lock", (3, 12))
    assert set(wheels) == {"onnxruntime-gpu", "pydicom", "platformdirs", "shiboken6", "pyside6-essentials"}
    ort = wheels["onnxruntime-gpu"]
    assert ort.filename.startswith(f"onnxruntime_gpu-{ort.version}-cp312-cp312-manylinux")
    assert len(ort.sha256) == 64
    assert wheels["pydicom"].filename.endswith("py3-none-any.whl")


@pytest.mark.parametrize(("filename", "fits"), [
    ("onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl", True),
    ("onnxruntime_gpu-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl", False),
    ("onnxruntime_gpu-1.31.1-cp312-cp312-win_amd64.whl", False),
    ("pyside6_essentials-6.11.3-cp310-abi3-manylinux_2_34_x86_64.whl", True),
    ("pyside6_essentials-6.11.3-cp310-abi3-manylinux_2_39_aarch64.whl", False),
    ("numpy-2.2.6-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", True),
    ("future-1.0-cp312-cp312-manylinux_2_40_x86_64.whl", False),
    ("pydicom-3.0.2-py3-none-any.whl", True),
])
def test_wheel_fits_the_gpu_machine(filename, fits):
    assert gpu_bundle.wheel_fits(filename, (3, 12)) is fits


def test_every_printed_call_stays_under_the_device_limit():
    tree = gpu_bundle.tree_bytes()
    payload = 260 * 2**20  # onnxruntime-gpu 1.31.1 (244 MiB) + the small wheels + QtCore
    size = gpu_bundle.part_size(payload, tree)
    count = -(-payload // size)
    manifest = {"tree_bytes": tree, "parts": [{"name": f"part-{i:02d}"} for i in range(1, count + 1)]}
    sequence = gpu_bundle.calls(manifest)
    assert len(sequence) == count >= 5
    assert all(tree + size + 64 * 1024 <= gpu_bundle.CALL_LIMIT for _ in sequence)
    assert [c["command"] for c in sequence[:-1]] == [f"bash benchmarks/gpu_check.sh --receive {i}"
                                                     for i in range(1, count)]
    assert sequence[-1]["command"] == "bash benchmarks/gpu_check.sh"
    assert sequence[-1]["carry"] == [".gpu/manifest.json", f".gpu/part-{count:02d}"]
    assert sum(c["timeout_s"] for c in sequence) <= 12 * 60  # the whole lease is 15 min: room to run the check again


@pytest.mark.slow  # re-packs and pip-installs onnxruntime into a scratch site: ~35 s
def test_parts_reassemble_into_an_importable_gpu_onnxruntime(offline_wheels, tmp_path, monkeypatch):
    bundle, stage, site = tmp_path / "bundle", tmp_path / "stage", tmp_path / "site"
    bundle.mkdir()
    manifest = gpu_bundle.prepare(lock=REPO / "uv.lock", bundle=bundle, python=HERE, offline=offline_wheels,
                                  part_bytes=128 * 2**20, tree=0)
    assert len(manifest["parts"]) >= 3
    for index in range(1, len(manifest["parts"])):  # every call but the last moves its part out of the tree
        assert gpu_bundle.receive(index, bundle=bundle, stage=stage).startswith(f"part {index}/")
        assert not (bundle / f"part-{index:02d}").exists()
    torch_site = tmp_path / "torch-site"  # where PyTorch's NVIDIA wheels live on the GPU machine
    (torch_site / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(torch_site), *sys.path])
    env = gpu_bundle.assemble(bundle=bundle, stage=stage, site=site)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(site)
    assert (site / "nvidia").resolve() == (torch_site / "nvidia").resolve()  # found by preload_dlls there
    assert not (site / "PySide6" / "QtGui.abi3.so").exists()  # PySide6 travels trimmed to QtCore
    probe = ("import json, onnxruntime as o, PySide6, PySide6.QtCore as C; app = C.QCoreApplication([]); "
             "print(json.dumps([o.__file__, o.get_available_providers(), PySide6.__file__, C.qVersion()]))")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    ort_file, providers, pyside_file, _ = json.loads(done.stdout)
    assert ort_file.startswith(str(site)) and pyside_file.startswith(str(site))  # the scratch site shadows
    assert "CUDAExecutionProvider" in providers  # the GPU build (a build fact, true without a GPU)
    assert gpu_bundle.assemble(bundle=bundle, stage=stage, site=site) == env  # a rerun reuses the install


def test_a_damaged_or_missing_part_is_named(tmp_path):
    bundle, stage = tmp_path / "bundle", tmp_path / "stage"
    bundle.mkdir()
    payload = tmp_path / "payload"
    payload.write_bytes(os.urandom(3 * 4096))
    parts = gpu_bundle.split_payload(payload, bundle, 4096)
    (bundle / "manifest.json").write_text(json.dumps({"parts": parts}))
    with (bundle / "part-01").open("r+b") as part:
        part.write(b"\xff" * 16)
    with pytest.raises(SystemExit, match=r"part 1: .*part-01 is damaged .*send it again"):
        gpu_bundle.receive(1, bundle=bundle, stage=stage)
    (bundle / "part-02").unlink()
    with pytest.raises(SystemExit, match=r"part 2: .*part-02 did not arrive"):
        gpu_bundle.receive(2, bundle=bundle, stage=stage)
    assert gpu_bundle.receive(3, bundle=bundle, stage=stage) == f"part 3/3 ok (0.0 MiB) → {stage}"
    with pytest.raises(SystemExit, match=r"part-01 is missing: send its call again"):
        gpu_bundle._find_part(parts[0], bundle / "gone", stage)


def test_the_check_says_no_gpu_in_one_line(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(out), "SEGLENS_GPU_BUNDLE": str(tmp_path / "none")}
    done = subprocess.run(["bash", "benchmarks/gpu_check.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 3, done.stdout + done.stderr
    no_gpu = [line for line in done.stdout.splitlines() if line.startswith("no GPU: ")]
    assert len(no_gpu) == 1 and "runs on CPU" in no_gpu[0]
    summary = json.loads((out / "gpu_summary.json").read_text())
    assert summary["probe"]["provider"] == "CPUExecutionProvider" and summary["probe"]["fallback_reason"]
    assert summary["gpu"] is None and "figures" not in summary
    assert (out / "gpu_check.log").read_text().count("no GPU: ") == 1


def test_the_viewer_worker_check_runs_one_image_on_its_thread():
    image = REPO / "resources/samples/surface/surface_01_scratches.jpg"
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "worker", "models/surface_defects.onnx",
                           str(image), "cpu"], cwd=REPO, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.splitlines()[-1])
    assert facts["provider"] == "CPUExecutionProvider" and facts["session_on_worker_thread"] is True
    assert 1 in facts["mask_classes"]  # the scratches sample: class 1 (scratch) found
    assert set(facts["timings_ms"]) >= {"decode", "preprocess", "inference", "postprocess"}
    assert facts["nvml"] is None  # no driver here: "n/a", never a made-up figure


def _bench_json(provider: str, raw_per_s: float, p50: float, ratio: float) -> dict:
    stats = {"runs": 10, "p50_ms": p50, "p95_ms": p50 * 1.2, "mean_ms": p50, "images_per_s": raw_per_s}
    return {"provider": provider, "fallback_reason": None if provider != "CPU" else "no driver",
            "raw": stats, "pipeline": {**stats, "images_per_s": raw_per_s * ratio}, "pipeline_over_raw": ratio,
            "gpu_mem_used_before_mb": 500, "gpu_mem_used_after_mb": 1800}


@pytest.mark.parametrize("gpu_provider", ["CUDA (GPU 0)", "CPU"])
def test_the_summary_computes_gpu_figures_only_from_gpu_runs(tmp_path, gpu_provider):
    (tmp_path / "cpu.json").write_text(json.dumps(_bench_json("CPU", 8.0, 120.0, 0.8)))
    (tmp_path / "gpu.json").write_text(json.dumps(_bench_json(gpu_provider, 200.0, 14.0, 0.9)))
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "summary", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    figures = json.loads(done.stdout)["figures"]
    if gpu_provider == "CPU":
        assert figures is None and "fell back to the CPU (no driver)" in done.stderr
    else:
        assert figures == {"gpu_over_cpu_raw": 25.0, "gpu_1080p_end_to_end_p50_ms": 14.0,
                           "gpu_pipeline_over_raw": 0.9, "vram_before_after_mb": [500, 1800]}
