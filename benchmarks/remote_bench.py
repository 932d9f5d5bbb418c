"""Remote inference on loopback (issue 30): what the wire costs, through `seglens-cli serve`.

    uv run python benchmarks/remote_bench.py [--runs 10] [--json-runs 3] [--images 60] [--rounds 3]
        [--model nuclei] [--part transport,folder]

Every figure is measured, none asserted (this is not a test); medians, side by side in one run.

transport: one 1080p RGB image as the tensor a model takes it (1×3×1080×1920 FP32, 24.9 MB) through an identity
  ONNX model served by `seglens-cli serve --device cpu` (built here: the server's compute is one copy, so the time
  is the wire's), as SegLens's client sends it: REST with the binary tensor extension, REST JSON, gRPC raw, and
  REST binary through stock kserve 0.21.0's decode (serve started with its decode patch undone). Request and
  response bytes are the bodies on the wire (HTTP: the body; gRPC: the protobuf message); ms is the client's round
  trip, encoding and decoding included (tritonclient's own request builder and response parser over http.client,
  one keep-alive connection; gRPC through tritonclient.grpc).
folder: `seglens-cli run MODEL FOLDER --device cpu` against `--device remote --server grpc://…` (and http://) on a
  `seglens-cli serve MODEL --device cpu` on this machine, the same images (the bundled nuclei samples, copied to
  --images files), rounds alternating local/remote. Throughput = the difference in images over the difference
  in wall time between a --images run and a 10-image run (the process start, model load and warm-up cancel out).
  The client keeps RemoteSession.in_flight requests going (app.runs.folder.batch).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TOKEN = "bench-token"
SMALL = 10  # images of the short run whose time is subtracted
FAILURES: list[str] = []  # runs that failed and were run again

# serve with kserve's stock binary decode (app.serve.kserve's replacement undone), for the comparison only
STOCK_DECODE = """
import sys
argv, sys.argv = sys.argv, sys.argv[:1]
from kserve.protocol.infer_type import InferRequest
stock = InferRequest.__dict__["from_bytes"]
sys.argv = argv
import app.serve.kserve as kserve_setup
patched = kserve_setup.load_kserve
def load_kserve():
    patched()
    InferRequest.from_bytes = stock
kserve_setup.load_kserve = load_kserve
import app.serve.server
app.serve.server.load_kserve = load_kserve
from app.cli import main
sys.exit(main(["serve", *sys.argv[1:]]))
"""


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [int(s.getsockname()[1]) for s in sockets]
    for s in sockets:
        s.close()
    return ports


def identity_model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    graph = helper.make_graph([helper.make_node("Identity", ["input"], ["output"])], "identity", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


class Server:
    """`seglens-cli serve MODEL --device cpu` on free ports with a token; stopped by SIGINT."""

    def __init__(self, model: str, *, stock_decode: bool = False) -> None:
        self.port, self.grpc_port = free_ports(2)
        args = [model, "--port", str(self.port), "--grpc-port", str(self.grpc_port), "--device", "cpu"]
        command = ([sys.executable, "-c", STOCK_DECODE, *args] if stock_decode
                   else [sys.executable, "-m", "app.cli", "serve", *args])
        env = {**os.environ, "SEGLENS_SERVE_TOKEN": TOKEN}
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)  # its startup and "stopped" lines
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"serve exited with {self.process.returncode}")
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v2/health/ready",
                                                 headers={"Authorization": f"Bearer {TOKEN}"})
                with urllib.request.urlopen(request, timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        raise SystemExit("serve not ready within 180 s")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(60)


def http_round_trip(connection: http.client.HTTPConnection, x: np.ndarray, *, binary: bool) -> tuple[int, int, float]:
    """(request bytes, response bytes, ms) of one infer through tritonclient.http's own encoder and parser."""
    import tritonclient.http as th

    started = time.perf_counter()
    tensor = th.InferInput("input", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=binary)
    outputs = [th.InferRequestedOutput("output", binary_data=binary)]
    body, json_size = th.InferenceServerClient.generate_request_body([tensor], outputs=outputs)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    if json_size is not None:
        headers = {"Authorization": f"Bearer {TOKEN}", "Inference-Header-Content-Length": str(json_size),
                   "Content-Type": "application/octet-stream"}
    connection.request("POST", "/v2/models/identity/infer", body=body, headers=headers)
    answer = connection.getresponse()
    payload = answer.read()
    if answer.status != 200:
        raise SystemExit(f"HTTP {answer.status}: {payload[:300]!r}")
    header_length = answer.getheader("Inference-Header-Content-Length")
    result = th.InferenceServerClient.parse_response_body(
        payload, header_length=int(header_length) if header_length else None)
    y = result.as_numpy("output")
    ms = (time.perf_counter() - started) * 1000
    assert y.tobytes() == x.tobytes()
    return len(body), len(payload), ms


def grpc_round_trip(client: Any, x: np.ndarray) -> tuple[int, int, float]:
    import tritonclient.grpc as tg
    from tritonclient.grpc import service_pb2

    started = time.perf_counter()
    tensor = tg.InferInput("input", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("identity", [tensor], headers={"authorization": f"Bearer {TOKEN}"}, client_timeout=120)
    y = result.as_numpy("output")
    ms = (time.perf_counter() - started) * 1000
    assert y.tobytes() == x.tobytes()
    request = service_pb2.ModelInferRequest(model_name="identity", raw_input_contents=[x.tobytes()])
    spec = request.inputs.add()
    spec.name, spec.datatype = "input", "FP32"
    spec.shape.extend(x.shape)
    return request.ByteSize(), result.get_response().ByteSize(), ms


def transport(runs: int, json_runs: int, scratch: Path) -> list[dict[str, Any]]:
    import tritonclient.grpc as tg

    model = str(identity_model(scratch / "identity.onnx"))
    x = np.random.default_rng(30).random((1, 3, 1080, 1920), dtype=np.float32)
    rows = []
    server = Server(model)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        for name, binary, count in (("REST binary", True, runs), ("REST JSON", False, json_runs)):
            http_round_trip(connection, x, binary=binary)  # warm: the connection, the server's first request
            samples = [http_round_trip(connection, x, binary=binary) for _ in range(count)]
            rows.append(_row(name, samples))
        connection.close()
        client = tg.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        grpc_round_trip(client, x)
        rows.append(_row("gRPC raw", [grpc_round_trip(client, x) for _ in range(runs)]))
        client.close()
    finally:
        server.stop()
    server = Server(model, stock_decode=True)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        http_round_trip(connection, x, binary=True)
        samples = [http_round_trip(connection, x, binary=True) for _ in range(max(3, runs // 2))]
        rows.append(_row("REST binary, stock kserve 0.21.0 decode", samples))
        connection.close()
    finally:
        server.stop()
    return rows


def _row(name: str, samples: list[tuple[int, int, float]]) -> dict[str, Any]:
    return {"transport": name, "request_mb": round(samples[0][0] / 1e6, 2),
            "response_mb": round(samples[0][1] / 1e6, 2),
            "ms_median": round(statistics.median(s[2] for s in samples), 1), "runs": len(samples)}


def folder(model: str, images: int, rounds: int, scratch: Path) -> dict[str, Any]:
    samples = sorted((REPO / "resources" / "samples" / "nuclei").glob("*.png"))
    sets = {}
    for count in (SMALL, images):
        target = scratch / f"images_{count}"
        target.mkdir()
        for i in range(count):
            shutil.copy(samples[i % len(samples)], target / f"img_{i:04d}{samples[i % len(samples)].suffix}")
        sets[count] = target
    server = Server(model)
    times: dict[str, dict[int, list[float]]] = {k: {SMALL: [], images: []} for k in ("local", "grpc", "http")}
    try:
        for _ in range(rounds):
            for kind in ("local", "grpc", "http"):
                for count, target in sets.items():
                    times[kind][count].append(_run_once(model, target, scratch / "out", kind, server))
    finally:
        server.stop()
    throughput = {}
    for kind, by_count in times.items():
        big, small = statistics.median(by_count[images]), statistics.median(by_count[SMALL])
        throughput[kind] = round((images - SMALL) / max(big - small, 1e-9), 1)
    return {"model": model, "images": images, "rounds": rounds, "images_per_s": throughput,
            "remote_over_local": {k: round(throughput[k] / throughput["local"], 2) for k in ("grpc", "http")},
            "wall_s_median": {k: {n: round(statistics.median(v), 2) for n, v in by.items()} for k, by in times.items()}}


def _run_once(model: str, images: Path, out: Path, kind: str, server: Server) -> float:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "app.cli", "run", model, str(images), "--out", str(out), "--no-progress"]
    if kind == "local":
        command += ["--device", "cpu"]
    else:
        url = f"grpc://127.0.0.1:{server.grpc_port}" if kind == "grpc" else f"http://127.0.0.1:{server.port}"
        command += ["--device", "remote", "--server", url]
    for _attempt in range(3):  # a failed run is said and run again (its time is not kept)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, env={**os.environ, "SEGLENS_REMOTE_TOKEN": TOKEN},
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode == 0:
            return wall
        FAILURES.append(f"{kind} run failed ({done.returncode}): {done.stderr.strip().splitlines()[-1][:300]}")
        print(FAILURES[-1], file=sys.stderr, flush=True)
    raise SystemExit(f"{kind} run failed 3 times")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="round trips per binary transport (default 10)")
    parser.add_argument("--json-runs", type=int, default=3, help="round trips for REST JSON (default 3)")
    parser.add_argument("--images", type=int, default=60, help="images in the folder run (default 60)")
    parser.add_argument("--rounds", type=int, default=3, help="local/remote alternations (default 3)")
    parser.add_argument("--model", default="nuclei", help="the folder part's model (default nuclei)")
    parser.add_argument("--part", default="transport,folder", help="transport, folder or both (default)")
    args = parser.parse_args()
    parts = {p.strip() for p in args.part.split(",")}
    report: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="seglens-remote-bench-") as scratch:
        if "transport" in parts:
            report["transport"] = transport(args.runs, args.json_runs, Path(scratch))
            for row in report["transport"]:
                print(f"{row['transport']:<42} request {row['request_mb']:>6.2f} MB  response "
                      f"{row['response_mb']:>6.2f} MB  {row['ms_median']:>8.1f} ms  (median of {row['runs']})",
                      flush=True)
        if "folder" in parts:
            report["folder"] = folder(args.model, args.images, args.rounds, Path(scratch))
            f = report["folder"]
            print(f"folder run, {f['model']}, {f['images']} images: images/s local {f['images_per_s']['local']}, "
                  f"remote gRPC {f['images_per_s']['grpc']} ({f['remote_over_local']['grpc']}×), "
                  f"remote HTTP {f['images_per_s']['http']} ({f['remote_over_local']['http']}×)", flush=True)
    report["load_after"] = os.getloadavg()
    report["failed_runs"] = FAILURES
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
