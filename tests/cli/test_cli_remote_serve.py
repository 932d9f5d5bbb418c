"""End to end on loopback: `seglens-cli run|info --device remote` (the client, app.inference.remote.session) against
`seglens-cli serve` (the server, app.serve.server) in another process — the same masks as a local CPU run, the same
`info`, the token's refusals in one line, and a server killed in the middle of a folder run."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from waiting import until

from tests import serve_fixtures
from tests.serve_fixtures import REPO, TOKEN, Served, start_serve

served = serve_fixtures.served  # the module's server: nuclei on CPU, token TOKEN
SAMPLES = REPO / "resources" / "samples" / "nuclei"


def _cli(*args: str, token: str | None = TOKEN, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SEGLENS_REMOTE_TOKEN"}
    if token is not None:
        env["SEGLENS_REMOTE_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _masks(folder: Path) -> dict[str, np.ndarray]:
    return {p.name: cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(folder.glob("*_mask.png"))}


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local")
    done = _cli("run", "nuclei", str(SAMPLES), "--out", str(out), "--device", "cpu", "--no-progress", token=None)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_run_on_the_server_writes_the_masks_a_local_cpu_run_writes(served: Served, local_run: Path,
                                                                   tmp_path: Path, scheme: str):
    server = served.grpc_url if scheme == "grpc" else served.url
    done = _cli("run", "nuclei", str(SAMPLES), "--out", str(tmp_path), "--device", "remote", "--server", server,
                "--no-progress")
    assert done.returncode == 0, done.stderr
    host = served.grpc_address if scheme == "grpc" else f"127.0.0.1:{served.port}"
    assert f"provider remote: {host}/nuclei (onnxruntime_onnx, CPU)" in done.stdout
    local, remote = _masks(local_run), _masks(tmp_path)
    assert sorted(remote) == sorted(local) and len(local) == 4
    for name, mask in local.items():
        assert mask.dtype == remote[name].dtype and mask.tobytes() == remote[name].tobytes(), name
    assert [row["status"] for row in _rows(tmp_path)] == ["ok"] * 4
    assert {row["provider"] for row in _rows(tmp_path)} == {f"remote: {host}/nuclei (onnxruntime_onnx, CPU)"}


_SESSION_ONLY = {"model", "opset", "producer", "session", "remote"}  # where it runs, not what the model is


def _spec_facts(info: dict) -> dict:
    """`info --json` less the session's facts and the file's own (path, opset, producer), dimension names (the
    protocol's metadata has -1 where the graph has a name) folded to None."""
    def folded(value: object) -> object:
        if isinstance(value, dict):
            return {k: folded(v) for k, v in value.items()}
        if isinstance(value, list):
            return [None if isinstance(v, str) and v == "batch" else folded(v) for v in value]
        return value

    return folded({k: v for k, v in info.items() if k not in _SESSION_ONLY})  # type: ignore[return-value]


def test_info_over_the_wire_matches_info_of_the_file(served: Served):
    local = _cli("info", "nuclei", "--device", "cpu", "--json", token=None)
    remote = _cli("info", "nuclei", "--device", "remote", "--server", served.grpc_url, "--json")
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    local_info, remote_info = json.loads(local.stdout), json.loads(remote.stdout)
    assert _spec_facts(remote_info) == _spec_facts(local_info)
    assert remote_info["remote"]["platform"] == "onnxruntime_onnx"
    assert remote_info["remote"]["server_device"] == "CPU"


@pytest.mark.parametrize("token", [None, "wrong"])
@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_no_token_or_a_wrong_one_is_one_line_and_nothing_is_written(served: Served, tmp_path: Path,
                                                                    token: str | None, scheme: str):
    server = served.grpc_url if scheme == "grpc" else served.url
    done = _cli("run", "nuclei", str(SAMPLES), "--out", str(tmp_path / "out"), "--device", "remote",
                "--server", server, "--no-progress", token=token)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: remote 127.0.0.1:")
    assert "401" in done.stderr or "UNAUTHENTICATED" in done.stderr or "unauthorized" in done.stderr
    assert TOKEN not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "seglens_report.csv").exists()


def test_a_server_killed_mid_run_keeps_the_finished_rows_and_makes_the_rest_error_rows(local_run: Path,
                                                                                     tmp_path: Path):
    images = tmp_path / "images"
    images.mkdir()
    for i in range(120):  # enough work that the kill lands in the middle of it
        shutil.copy(SAMPLES / "nuclei_01.png", images / f"img_{i:03d}.png")
    server = start_serve(tmp_path / "server", "nuclei")
    out = tmp_path / "out"
    env = {**os.environ, "SEGLENS_REMOTE_TOKEN": TOKEN}
    run = subprocess.Popen([sys.executable, "-m", "app.cli", "run", "nuclei", str(images), "--out", str(out),
                            "--device", "remote", "--server", server.grpc_url, "--retries", "0", "--no-progress"],
                           cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: (out / "img_003.png_mask.png").exists() or run.poll() is not None, what="the fourth mask",
              within_s=300)
        server.stop(signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
        server.stop(signal.SIGKILL)
    rows = _rows(out)
    assert [row["path"] for row in rows] == [str(images / f"img_{i:03d}.png") for i in range(120)]  # all, in order
    ok = [row for row in rows if row["status"] == "ok"]
    failed = [row for row in rows if row["status"] != "ok"]
    assert ok and failed, (len(ok), stderr[-500:])  # the kill landed mid-run
    assert run.returncode == 1
    assert {row["status"] for row in failed} == {"error"}
    for row in failed:
        assert row["error"].startswith(f"{row['path']}: remote {server.grpc_address}/nuclei: ")
        assert "\n" not in row["error"]
    expected = _masks(local_run)["nuclei_01.png_mask.png"]
    masks = _masks(out)
    assert sorted(masks) == sorted(f"{Path(row['path']).name}_mask.png" for row in ok)  # no mask for a failed row
    for name, mask in masks.items():  # each one whole: nothing half-written
        assert mask is not None and mask.tobytes() == expected.tobytes(), name
    assert not [p for p in out.rglob("*") if p.name.startswith(".") or p.suffix in (".tmp", ".part")]
    assert f"{len(ok)} ok, {len(failed)} failed" in stdout
