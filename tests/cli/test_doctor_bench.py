"""doctor's verdict logic on faked facts, and both commands end to end on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest
from conftest import REPO, stripes
from PIL import Image

from app.cli import main
from app.inference.runtime.doctor import Facts, ProviderCheck, decide, install_kind
from app.inference.runtime.providers import CPU as CPU_EP
from app.inference.runtime.providers import CUDA as CUDA_EP

MISSING_LIBS = {"libcudart.so.13": None, "libcublasLt.so.13": None, "libcudnn.so.9": "/x/nvidia/cudnn/lib"}


def facts(**changes) -> Facts:
    base = Facts(ort_packages={"onnxruntime-gpu": "1.31.1"}, built_providers=[CUDA_EP, CPU_EP], build_cuda="13",
                 provider_checks=[ProviderCheck(CUDA_EP, False, "the CUDA provider could not be loaded: ..."),
                                  ProviderCheck(CPU_EP, True, "ran")],
                 driver_version="580.65", gpus=["GPU 0: NVIDIA L4, 22.5 GB, 0.3 GB used"],
                 cuda_libraries={"libcudart.so.13": "/usr/lib", "libcublasLt.so.13": "/usr/lib"},
                 nvidia_gpu="/proc/driver/nvidia/version", install="installed")
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def test_gpu_ready():
    verdict = decide(facts(provider_checks=[ProviderCheck(CUDA_EP, True, "ran on CUDA")]))
    assert verdict.gpu_ready and "NVIDIA L4" in verdict.summary and verdict.fix is None


def test_both_onnxruntime_packages_installed():
    verdict = decide(facts(ort_packages={"onnxruntime": "1.31.1", "onnxruntime-gpu": "1.31.1"}))
    assert not verdict.gpu_ready and "both installed" in verdict.summary
    assert "pip uninstall -y onnxruntime onnxruntime-gpu" in verdict.fix


def _fake_dist(site, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_an_onnxruntime_shadowed_by_an_earlier_folder_is_no_conflict(tmp_path, monkeypatch):
    """As on the lent GPU machine: the GPU build first on PYTHONPATH, the CPU build in site-packages."""
    from app.inference.runtime import diagnostics, providers

    _fake_dist(tmp_path, "onnxruntime", "1.30.0")
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    assert providers.installed_ort_packages() == {"onnxruntime-gpu": metadata.version("onnxruntime-gpu")}
    assert providers.shadowed_ort_packages() == {f"onnxruntime ({tmp_path.resolve()})": "1.30.0"}
    assert diagnostics.versions()["onnxruntime packages (shadowed, not used)"].endswith("1.30.0")


def test_the_fix_for_two_onnxruntime_packages_fits_the_install():
    both = {"onnxruntime": "1.31.1", "onnxruntime-gpu": "1.31.1"}
    assert decide(facts(ort_packages=both, install="checkout")).fix == "uv sync --reinstall-package onnxruntime-gpu"
    assert decide(facts(built_providers=[], install="checkout")).fix == "uv sync --reinstall-package onnxruntime-gpu"
    assert decide(facts(built_providers=[], install="installed")).fix.startswith("reinstall seglens (pip install")


def test_two_onnxruntime_packages_in_one_folder_are_a_conflict(tmp_path):
    (tmp_path / "onnxruntime").mkdir()
    (tmp_path / "onnxruntime" / "__init__.py").write_text("")  # found first, never imported by the check
    _fake_dist(tmp_path, "onnxruntime", "1.30.0")
    _fake_dist(tmp_path, "onnxruntime-gpu", "1.31.1")
    code = ("import json; from app.inference.runtime import providers as p; "
            "print(json.dumps(p.installed_ort_packages()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])})
    assert json.loads(done.stdout) == {"onnxruntime": "1.30.0", "onnxruntime-gpu": "1.31.1"}, done.stderr


def test_cpu_only_onnxruntime():
    verdict = decide(facts(built_providers=[CPU_EP], provider_checks=[]))
    assert "no CUDA provider" in verdict.summary and "seglens[cuda]" in verdict.fix
    assert "CPU build of SegLens" in decide(facts(built_providers=[CPU_EP], flavor="cpu")).summary


def test_no_driver():
    verdict = decide(facts(driver_version=None, gpus=[], nvml_error="NVML Shared Library Not Found",
                           cuda_libraries=MISSING_LIBS))
    assert "no NVIDIA driver" in verdict.summary and "libcudart.so.13" in verdict.summary
    assert "R580+" in verdict.fix


def test_no_gpu_at_all_is_no_fault_and_needs_no_fix_here():
    verdict = decide(facts(driver_version=None, gpus=[], nvml_error="NVML Shared Library Not Found",
                           cuda_libraries=MISSING_LIBS, nvidia_gpu=None, install="checkout"))
    assert verdict.summary.startswith("No NVIDIA GPU on this machine: models run on the CPU (expected")
    assert "libcublasLt" not in verdict.summary and verdict.fix.startswith("nothing to fix here; on a machine with")
    assert verdict.fix.endswith("and uv sync --extra cuda")


def test_cuda_working_where_the_probe_saw_no_gpu_is_said():
    verdict = decide(facts(provider_checks=[ProviderCheck(CUDA_EP, True, "ran on CUDA")], nvidia_gpu=None))
    assert verdict.gpu_ready and "`--device auto` did not detect the GPU" in verdict.summary
    assert verdict.fix == "pass --device cuda"


@pytest.mark.parametrize(("install", "command"), [
    ("checkout", "uv sync --extra cuda (NVIDIA's CUDA and cuDNN wheels)"),
    ("installed", "pip install 'seglens[cuda]' (NVIDIA's CUDA and cuDNN wheels)"),
    ("frozen", "use the complete cuda13 build of SegLens (it bundles them)")])
def test_the_fix_for_missing_libraries_fits_the_install(install, command):
    verdict = decide(facts(cuda_libraries=MISSING_LIBS, install=install))
    assert verdict.fix.startswith(command)
    assert ("pip" in verdict.fix) == (install == "installed")


def test_cpu_only_onnxruntime_in_a_checkout_is_fixed_with_uv():
    assert decide(facts(built_providers=[CPU_EP], provider_checks=[], install="checkout")).fix == \
        "uv sync --extra cuda"


def test_install_kind(monkeypatch):
    assert (REPO / "uv.lock").is_file() and install_kind() == "checkout"  # the tests run from a clone
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert install_kind() == "frozen"


def test_no_driver_but_every_library_bundled():
    verdict = decide(facts(driver_version=None, gpus=[], nvml_error="NVML Shared Library Not Found"))
    assert "all present" in verdict.summary and "nothing else is missing" in verdict.fix


def test_old_driver_for_cuda13():
    verdict = decide(facts(driver_version="550.54.15"))
    assert "too old" in verdict.summary and "cuda12" in verdict.fix


def test_missing_cuda_libraries():
    verdict = decide(facts(cuda_libraries=MISSING_LIBS))
    assert verdict.summary.startswith("CUDA 13 libraries not found (libcudart.so.13, libcublasLt.so.13)")
    assert "seglens[cuda]" in verdict.fix


def test_other_cuda_failure_is_quoted():
    verdict = decide(facts(provider_checks=[ProviderCheck(CUDA_EP, False, "CUDA failure 999: unknown error")]))
    assert "CUDA failure 999" in verdict.summary


def test_doctor_on_this_machine(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"versions", "built_providers", "provider_checks", "driver_version", "cuda_libraries", "ort_packages",
            "gpus"} <= set(data["facts"])
    checks = {c["provider"]: c for c in data["facts"]["provider_checks"]}
    assert data["facts"]["install"] == "checkout"
    assert checks[CPU_EP]["ok"]
    verdict = data["verdict"]
    assert main(["doctor"]) == 0
    text = capsys.readouterr().out
    if verdict["gpu_ready"]:  # a GPU machine: CUDA really ran, nothing to fix
        assert checks[CUDA_EP]["ok"] and verdict["fix"] is None and f"OK: {verdict['summary']}" in text
    else:  # no GPU: a verdict with its cause and a fix, in JSON and in text
        assert verdict["summary"] and verdict["fix"]
        assert f"Verdict: {verdict['summary']}" in text and f"Fix: {verdict['fix']}" in text


@pytest.mark.parametrize("save", ["mask", "none"])
def test_bench_json(models, tmp_path, capsys, save):
    Image.fromarray(stripes(64, 96)).save(tmp_path / "a.png")
    assert main(["bench", str(models("rgb_classes")), "--images", str(tmp_path), "--runs", "6", "--json",
                 "--save", save, "--device", "cpu"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["raw"]["runs"] == 6 and data["pipeline"]["runs"] == 6
    assert data["raw"]["p50_ms"] > 0 and data["raw"]["p95_ms"] >= data["raw"]["p50_ms"]
    assert data["pipeline_over_raw"] > 0 and data["provider"] == "CPU" and data["image_size"] == "96×64"
