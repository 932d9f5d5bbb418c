"""Folder runs on Ray (`run --ray`): one local Ray instance on loopback with 2 CPUs for the module; the same masks
and report as a local run, every input exactly once when an actor is killed mid-run, and --resume after the
driver was killed with SIGKILL."""

from __future__ import annotations

import csv
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from waiting import until

from app.cli import main
from app.inference.model.runtime_options import RuntimeOptions

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a local Ray instance per module: seconds to start, ~40 s in all
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cluster():
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # workers use this environment as it is
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             _node_ip_address="127.0.0.1")
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _images(folder: Path, count: int, size: tuple[int, int] = (48, 64)) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    paths = []
    for i in range(count):
        path = folder / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (*size, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def _rows(report: Path) -> list[dict]:
    with open(report, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _comparable(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "node" and not k.endswith("_ms")}


def test_ray_local_gives_the_local_run_byte_for_byte(cluster, models, tmp_path):
    folder = tmp_path / "in"
    _images(folder, 21)
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)  # an error row on both sides
    model = models("rgb_classes")
    assert main(["run", str(model), str(folder), "--out", str(tmp_path / "local"), "--save", "mask,overlay"]) == 1
    assert main(["run", str(model), str(folder), "--out", str(tmp_path / "ray"), "--save", "mask,overlay",
                 "--ray", "--ray-actors", "2"]) == 1
    local = sorted(p.name for p in (tmp_path / "local").glob("*.png"))
    assert local and local == sorted(p.name for p in (tmp_path / "ray").glob("*.png"))
    for name in local:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name
    local_rows, ray_rows = _rows(tmp_path / "local" / "seglens_report.csv"), _rows(tmp_path / "ray" /
                                                                                  "seglens_report.csv")
    assert [_comparable(r) for r in local_rows] == [_comparable(r) for r in ray_rows]
    nodes = {r["node"] for r in ray_rows if r["status"] == "ok"}
    assert len(nodes) == 1 and nodes.pop()  # one node, named on every row
    assert next(r for r in ray_rows if r["path"].endswith("broken.png"))["status"] == "error"


def test_an_actor_killed_mid_run_still_gives_every_input_once(cluster, models, tmp_path):
    from app.inference.model.builder import load_spec
    from app.io.discover import discover
    from app.runs.cluster import driver as ray_driver
    from app.runs.cluster import run as ray_run
    from app.runs.outputs.report import ReportWriter

    folder, out = tmp_path / "in", tmp_path / "out"
    paths = _images(folder, 30)
    model = models("rgb_classes")
    probe = ray_run.make_probe(out)
    job = ray_run.make_job(model, None, device="cpu", runtime=RuntimeOptions(intra_op_threads=1), threshold=None,
                           tile=None, out_dir=str(out), save=("mask",), batch=1, volumes=None, decoders=2,
                           extra_columns=(), probe=str(probe))
    factory = ray_run.ActorFactory(job, cpus=1, gpus=0)
    actors = ray_run.start_actors(factory, 2)
    first = actors[0]

    def kill_one(finished: int) -> None:
        if finished == 1:
            ray.kill(first)  # its queued chunk fails and goes to a replacement

    with ReportWriter(out / "report.csv", load_spec(model), extra_columns=[ray_run.NODE_COLUMN]) as report:
        summary = ray_driver.run_on_ray(actors, factory, discover([folder]), report=report,
                                     options=ray_run.RayOptions(chunk=2), save=("mask",), out_dir=out,
                                     on_chunk=kill_one)
    rows = _rows(out / "report.csv")
    assert [r["path"] for r in rows] == [str(p) for p in sorted(paths, key=lambda p: int(p.stem[3:]))]
    assert all(r["status"] == "ok" for r in rows) and summary.ok == 30 and summary.failed == 0
    assert first not in actors  # replaced
    assert len(list(out.glob("*_mask.png"))) == 30


def test_resume_after_the_driver_is_killed_finishes_the_job(cluster, models, tmp_path):
    folder, out = tmp_path / "in", tmp_path / "out"
    paths = _images(folder, 160, size=(256, 256))
    model = models("blurred_binary", kernel=15)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(model), str(folder), "--out", str(out),
                               "--ray", cluster, "--ray-actors", "2"], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    partial = out / "seglens_report.csv.partial"
    until(lambda: driver.poll() is not None or (partial.is_file() and len(partial.read_text().splitlines()) > 1 + 16),
          what="16 rows in the partial report", within_s=120)
    assert driver.poll() is None, "the run ended before it could be killed: " + driver.stderr.read().decode()[-500:]
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=30)
    assert not (out / "seglens_report.csv").exists()
    assert main(["run", str(model), str(folder), "--out", str(out), "--ray", cluster, "--ray-actors", "2",
                 "--resume"]) == 0
    rows = _rows(out / "seglens_report.csv")
    assert sorted(r["path"] for r in rows) == sorted(str(p) for p in paths)  # each exactly once
    assert all(r["status"] == "ok" for r in rows) and len(list(out.glob("*_mask.png"))) == 160


def _job(model: Path, out: Path, probe: Path):
    from app.runs.cluster import run as ray_run

    return ray_run.make_job(model, None, device="cpu", runtime=RuntimeOptions(intra_op_threads=1), threshold=None,
                            tile=None, out_dir=str(out), save=("mask",), batch=1, volumes=None, decoders=2,
                            extra_columns=(), probe=str(probe))


def test_ctrl_c_keeps_finished_rows_in_order_and_lists_the_rest_as_skipped(cluster, models, tmp_path):
    from app.inference.model.builder import load_spec
    from app.io.discover import discover
    from app.runs.cluster import driver as ray_driver
    from app.runs.cluster import run as ray_run
    from app.runs.outputs.report import ReportWriter

    folder, out = tmp_path / "in", tmp_path / "out"
    _images(folder, 24)
    model = models("rgb_classes")
    factory = ray_run.ActorFactory(_job(model, out, ray_run.make_probe(out)), cpus=1, gpus=0)
    actors = ray_run.start_actors(factory, 2)

    def interrupt(finished: int) -> None:
        if finished == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), ReportWriter(out / "r.csv", load_spec(model),
                                                        extra_columns=[ray_run.NODE_COLUMN]) as report:
        ray_driver.run_on_ray(actors, factory, discover([folder]), report=report, options=ray_run.RayOptions(chunk=3),
                           save=("mask",), out_dir=out, on_chunk=interrupt)
    rows = _rows(out / "r.csv.partial")  # interrupted: the report keeps its .partial name, for --resume
    statuses = [r["status"] for r in rows]
    assert len(rows) == 24 and len({r["path"] for r in rows}) == 24
    assert statuses.count("ok") == 6 and statuses.count("skipped") == 18  # two chunks of 3 came back first
    # (whichever two: actors finish in any order; the rows still stand in input order)
    assert [r["path"] for r in rows] == [str(folder / f"img{i}.png") for i in range(24)]  # input order, once each
    assert all(r["error"] == "not processed: the run was cancelled" for r in rows if r["status"] == "skipped")


def test_an_output_folder_a_node_cannot_see_is_refused_in_one_line(cluster, models, tmp_path):
    from app.errors import SegLensError
    from app.runs.cluster import run as ray_run

    out = tmp_path / "out"
    probe = ray_run.make_probe(out)
    probe.unlink()  # as on a node where --out is a local folder of the head node only
    factory = ray_run.ActorFactory(_job(models("rgb_classes"), out, probe), cpus=1, gpus=0)
    with pytest.raises(SegLensError, match="is not reachable from node .*must be a folder they share"):
        ray_run.start_actors(factory, 1)


def test_doctor_reports_every_node(cluster, capsys):
    assert main(["doctor", "--ray", cluster]) == 0
    text = capsys.readouterr().out
    assert text.startswith("== node ") and "CUDA" in text


def test_an_address_where_nothing_answers_is_one_line_at_once():
    import socket

    with socket.socket() as free:  # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    from app.runs.cluster import run as ray_run

    with pytest.raises(Exception) as err:
        ray_run._check_reachable(f"127.0.0.1:{port}", timeout=2)
    assert f"nothing answers at 127.0.0.1:{port}" in str(err.value) and "ray start --head" in str(err.value)
    with pytest.raises(Exception, match="expected local, auto"):
        ray_run._check_reachable("somewhere")
