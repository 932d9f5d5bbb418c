"""The frozen CPU build: built from its own clean environment, then run with no Python on PATH.

Slow (a PyInstaller build, about two minutes); `.ci/run` runs it like every other test. `SEGLENS_FROZEN=DIR/SegLens`
tests a folder built already (`python packaging/build.py --flavor cpu --dist DIR`) instead of building one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from waiting import until, until_async

from tests.io.pacs.orthanc import free_port
from tests.station_fixtures import Subscriber, mosquitto

__all__ = ["mosquitto"]  # the broker fixture, for the station test below

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"),
                                                   reason="the Linux build is the one proven here")]


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    if os.environ.get("SEGLENS_FROZEN"):  # a build made already (packaging/build.py --dist DIR): DIR/SegLens
        return Path(os.environ["SEGLENS_FROZEN"])
    if shutil.which("uv") is None:
        pytest.skip("uv is needed to build the frozen app")
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "packaging/build.py", "--flavor", "cpu", "--dist", str(dist)], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dist / "SegLens"


def bare_env(tmp_path) -> dict:
    """What a workstation without Python has: no PYTHONPATH, no venv, a plain PATH, a fresh home."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}


# What each flavor's folder may weigh (MB: 2**20 bytes of files, links not counted), each flavor shipping the core and
# the workstation extra (pacs, remote, station, opcua). docs/PERFORMANCE.md, "What the frozen build weighs", has the
# measured table, what each extra costs and the command. cpu: 442.4 MB on a clean build (475.2 before Qt's GTK 3
# platform theme with the build machine's GTK stack it linked and Pillow's AVIF codec (24.6 MB together) and the
# static symbol tables (8.2 MB, `strip --strip-unneeded`) were left out). cuda13: 2.5 GB in packaging/README.md, not
# rebuilt since; cuda12 is scripted but has never been built here, so it has no budget yet.
SIZE_BUDGET_MB = {"cpu": 450, "cuda13": 2600}


def test_frozen_folder_weighs_within_its_flavors_budget(frozen):
    flavor = (frozen / "_internal" / "FLAVOR").read_text().strip()
    size = sum(p.stat().st_size for p in frozen.rglob("*") if p.is_file() and not p.is_symlink())
    assert size <= SIZE_BUDGET_MB[flavor] * 2**20, f"{flavor} flavor is {size / 2**20:.1f} MB"


def test_frozen_cpu_folder_has_both_executables_and_no_cuda_provider(frozen):
    assert (frozen / "SegLens").is_file() and (frozen / "seglens-cli").is_file()
    assert not list(frozen.rglob("libonnxruntime_providers_cuda*"))
    assert (frozen / "_internal" / "FLAVOR").read_text().strip() == "cpu"


def test_frozen_folder_has_icon_and_desktop_entry(frozen):
    assert (frozen / "seglens.png").is_file() and (frozen / "install-desktop-entry.sh").is_file()
    entry = (frozen / "seglens.desktop").read_text()
    assert f"Exec={frozen}/SegLens %F" in entry and f"Icon={frozen}/seglens.png" in entry
    icons = frozen / "_internal" / "resources" / "icons"
    assert (icons / "seglens-256.png").is_file() and (icons / "seglens-16.png").is_file()  # the window icon


def test_frozen_cli_runs_the_bundled_samples(frozen, tmp_path):
    models, samples = frozen / "_internal" / "models", frozen / "_internal" / "resources" / "samples"
    out = tmp_path / "out"
    done = subprocess.run([str(frozen / "seglens-cli"), "run", str(models / "surface_defects.onnx"), str(samples),
                           "--out", str(out), "--save", "mask,overlay"], env=bare_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "provider CPU" in done.stdout
    assert list(out.rglob("*_mask.png")) and (out / "seglens_report.csv").is_file()
    ct = tmp_path / "ct"  # the clinical path: the sample CT series through the CT demo model, every export
    done = subprocess.run([str(frozen / "seglens-cli"), "run", str(models / "ct_demo.onnx"), str(samples / "ct"),
                           "--out", str(ct), "--export", "dicom-seg,nifti,sc"], env=bare_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert len(list(ct.glob("*_seg.dcm"))) == 1 and len(list(ct.glob("*_mask.nii.gz"))) == 1
    assert len(list(ct.glob("*_sc/*.dcm"))) == 32
    doctor = subprocess.run([str(frozen / "seglens-cli"), "doctor"], env=bare_env(tmp_path), capture_output=True,
                            text=True, timeout=120)
    assert doctor.returncode == 0 and "CPU build of SegLens" in doctor.stdout


def test_frozen_cli_knows_the_bundled_models_by_name(frozen, tmp_path):
    listed = subprocess.run([str(frozen / "seglens-cli"), "models"], env=bare_env(tmp_path), capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert str(frozen / "_internal" / "models") in listed.stdout
    assert any(line.startswith("surface_defects ") for line in listed.stdout.splitlines())
    sample = sorted((frozen / "_internal" / "resources" / "samples" / "surface").iterdir())[0]
    out = tmp_path / "by_name"
    done = subprocess.run([str(frozen / "seglens-cli"), "run", "surface_defects", str(sample), "--out", str(out)],
                          env=bare_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (out / f"{sample.name}_mask.png").is_file()
    assert any(line.startswith("prompt_demo ") for line in listed.stdout.splitlines())  # the Smart tool's pair
    mask = tmp_path / "prompted.png"
    done = subprocess.run([str(frozen / "seglens-cli"), "prompt", "prompt_demo", str(sample), "--point", "480,270",
                           "--out", str(mask)], env=bare_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr and mask.is_file(), done.stderr
    unknown = subprocess.run([str(frozen / "seglens-cli"), "info", "xyz"], env=bare_env(tmp_path), cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: unknown model 'xyz'"), unknown.stderr


def test_frozen_gui_self_test(frozen, tmp_path):
    done = subprocess.run([str(frozen / "SegLens"), "--self-test"], env=bare_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["overlay_painted"] and result["provider"] == "CPUExecutionProvider"
    assert result["fallback_reason"] is None  # the CPU build never asked for a GPU
    assert os.listdir(tmp_path / "home")  # settings/logs went to the user's folders, not the install folder



def test_frozen_cli_watch_judges_a_dropped_sample_to_its_sinks_and_ends_with_130_on_ctrl_c(frozen, tmp_path, mosquitto):
    """Station mode frozen: watchdog (the folder), the log, paho (MQTT to Debian's mosquitto, received here) and
    asyncua (OPC UA, read by a real client from this test's Python) all collected; SIGINT ends it with 130."""
    asyncua = pytest.importorskip("asyncua")
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    url = f"opc.tcp://127.0.0.1:{free_port()}/seglens/"
    models, samples = frozen / "_internal" / "models", frozen / "_internal" / "resources" / "samples" / "anomaly"
    subscriber = Subscriber(mosquitto.port, "seglens/line-3/verdict")
    process = subprocess.Popen([str(frozen / "seglens-cli"), "watch", str(models / "surface_anomaly.onnx"), str(folder),
                                "--out", str(out), "--settle", "0.2", "--name", "line-3", "--opcua", url,
                                "--mqtt", f"mqtt://127.0.0.1:{mosquitto.port}"],
                               env=bare_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    logged = out / "verdicts.jsonl"
    try:
        until(lambda: (out / "station-journal.jsonl").exists() or process.poll() is not None, what="the station up",
              within_s=300, every_s=0.1)
        assert process.poll() is None, process.communicate()
        sample = sorted(samples.glob("*.png"))[0]
        shutil.copyfile(sample, folder / (sample.name + ".tmp"))
        (folder / (sample.name + ".tmp")).rename(folder / sample.name)  # complete at the rename
        until(lambda: logged.exists() and logged.read_text().count("\n") >= 1, what="a verdict logged", within_s=300,
              every_s=0.1)
        line = json.loads(logged.read_text().splitlines()[0])
        messages = subscriber.wait_for(1, timeout=60)

        async def read() -> tuple[str, int] | None:
            """The verdict and frame count; None while the sink's server is still starting (on its own thread)."""
            assert process.poll() is None, "the station exited"
            try:
                async with asyncua.Client(url, timeout=10) as client:
                    verdict = await client.get_node("ns=2;s=line-3.Verdict").read_value()
                    frames = await client.get_node("ns=2;s=line-3.FrameCount").read_value()
                    return verdict, frames
            except (OSError, asyncio.TimeoutError):
                return None

        verdict, frames = asyncio.run(until_async(read, what="the OPC UA server's values", within_s=120,
                                                  every_s=0.3))
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
        subscriber.close()
    assert process.returncode == 130, (stdout, stderr)
    assert line["id"] == sample.name and line["verdict"] in ("OK", "REVIEW", "NG"), line
    assert [(m["frame_id"], m["verdict"]) for _, m, _ in messages] == [(sample.name, line["verdict"])]
    assert (verdict, frames) == (line["verdict"], 1)
    assert "watch line-3: stopped; 1 frame: " in stdout and "sink problem" not in stdout, stdout
    assert "Traceback" not in stderr and "not installed" not in stderr, stderr
    journal = (out / "station-journal.jsonl").read_text().splitlines()
    assert [json.loads(text)["id"] for text in journal] == [sample.name]


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_frozen_cli_runs_a_model_on_a_remote_server_as_it_runs_it_here(frozen, tmp_path, transport):
    """The frozen client (tritonclient over gRPC and HTTP, its rapidjson and gevent collected) against the protocol's
    mock on loopback: the masks of the remote run are those of a local run on the ONNX Runtime build the mock serves
    with (this environment's; the frozen folder's own CPU build may differ in the last bits), pixel for pixel."""
    import cv2
    import numpy as np

    from app.cli import main
    from tests.remote_mocks import MockServer

    samples = frozen / "_internal" / "resources" / "samples" / "nuclei"
    env = {**bare_env(tmp_path), "SEGLENS_REMOTE_TOKEN": "frozen-token"}
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["run", "nuclei", str(samples), "--out", str(local), "--device", "cpu"]) == 0
    with MockServer(REPO / "models" / "nuclei.onnx", name="nuclei", token="frozen-token") as server:
        url = server.grpc_url if transport == "grpc" else server.http_url
        done = subprocess.run([str(frozen / "seglens-cli"), "run", "nuclei", str(samples), "--out", str(remote),
                               "--device", "remote", "--server", url], env=env, capture_output=True, text=True,
                              timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    assert "remote: 127.0.0.1:" in done.stdout
    masks = sorted(path.name for path in local.rglob("*_mask.png"))
    assert masks and masks == sorted(path.name for path in remote.rglob("*_mask.png"))
    for name in masks:  # the pixels: the frozen folder's PNG encoder (its zlib) may pack the same pixels otherwise
        mine, theirs = (cv2.imread(str(folder / name), cv2.IMREAD_UNCHANGED) for folder in (remote, local))
        assert mine is not None and theirs is not None and mine.any() and np.array_equal(mine, theirs), name


def test_frozen_cli_imports_an_nnunet_folder_and_runs_it_without_pytorch(frozen, tmp_path):
    """The workstation imports a trained nnU-Net v2 folder it is given (the checkpoint read by SegLens's own pickle
    interpreter, the network emitted with onnx's helper; no PyTorch in the folder) and runs it on a CT volume with
    nnU-Net's recipe: the mask is nnUNetPredictor's (its fold-0 segmentation, mirroring on), Dice ≥ 0.99 per class."""
    import nibabel as nib
    import numpy as np

    assert not list((frozen / "_internal").glob("torch*")), "the frozen build ships no PyTorch"
    data = REPO / "tests" / "data" / "nnunet" / "Dataset901_CTPhantom"
    model = tmp_path / "ct_phantom.onnx"
    done = subprocess.run([str(frozen / "seglens-cli"), "import", "nnunet",
                           str(data / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"), "--folds", "0",
                           "--out", str(model)], env=bare_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert model.is_file() and model.with_suffix(".yaml").is_file() and "fold 0" in done.stdout
    out = tmp_path / "out"
    volume = data / "heldout" / "heldout_000_0000.nii.gz"
    done = subprocess.run([str(frozen / "seglens-cli"), "run", str(model), str(volume), "--out", str(out)],
                          env=bare_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    (written,) = out.glob("*_mask.nii.gz")
    mask = np.asarray(nib.load(written).dataobj)
    predicted = data / "predictions" / "3d_fullres" / "folds0_mirror" / "heldout_000.nii.gz"  # nnUNetPredictor's
    reference = np.asarray(nib.load(predicted).dataobj)
    assert mask.shape == reference.shape and set(np.unique(mask).tolist()) == {0, 1, 2}  # background, liver, bone
    for label in (1, 2):  # the recipe's modules (app.inference.volume3d.nnunet) frozen too: 0.9995 and 1.0 here
        dice = 2 * ((mask == label) & (reference == label)).sum() / ((mask == label).sum() + (reference == label).sum())
        assert dice >= 0.99, f"label {label}: Dice {dice:.4f} against nnUNetPredictor"
