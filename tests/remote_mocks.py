"""A minimal Open Inference Protocol (KServe v2) server written from the published schema, the "second
implementation" remote sessions are checked against (so SegLens is not only compatible with its own `serve`):

- REST on the stdlib's http.server: `v2/health/live|ready`, `v2`, `v2/models/<m>[/versions/<v>]`, `…/ready`,
  `…/infer` (JSON and the binary tensor extension both ways, `binary_data_output`, per-output `binary_data`),
  `…/stats` (Triton's statistics extension), bearer auth (401);
- gRPC on tritonclient's own generated stubs (Triton's proto is the v2 proto with its extensions), the same auth;
- both running an ONNX Runtime CPU session of a model file in this process, on loopback, optionally over TLS.

Modes a test sets on the `MockServer`: `busy` (the next N requests answer 503 / UNAVAILABLE), `hang` (infer never
answers until the server stops), `stopped` via `stop()`. Every infer response carries `compute_us` like `serve`.
A lying server (issue 36): `metadata` may be edited (a declared input of 16384²), `tamper` changes the outputs
before they are answered (another dtype, shape or NaN, each answered under its own datatype), `trickle_s` sends
a REST infer answer one byte every so many seconds, `declare_length` makes it declare that many bytes and stall,
`no_length` sends it without a Content-Length (its end the connection's close).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

ORT_TO_V2 = {"tensor(float)": "FP32", "tensor(float16)": "FP16", "tensor(double)": "FP64",
             "tensor(uint8)": "UINT8", "tensor(int8)": "INT8", "tensor(int32)": "INT32", "tensor(int64)": "INT64",
             "tensor(bool)": "BOOL"}
V2_TO_NP = {"FP32": np.float32, "FP16": np.float16, "FP64": np.float64, "UINT8": np.uint8, "INT8": np.int8,
            "INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_}
NP_TO_V2 = {np.dtype(t).name: v2 for v2, t in V2_TO_NP.items()}


def _io(args: Any) -> list[dict[str, Any]]:
    return [{"name": a.name, "datatype": ORT_TO_V2[a.type],
             "shape": [d if isinstance(d, int) else -1 for d in a.shape]} for a in args]


@dataclass
class MockState:
    """What both faces share: the model, the auth, the modes and the statistics."""

    name: str
    path: Path
    token: str | None = None
    busy: int = 0  # the next N infer requests answer 503 / UNAVAILABLE
    hang: bool = False
    die_after: int | None = None  # after N infer requests the server stops (killed mid-run), unanswered
    meet: int = 0  # > 1: every infer request after the first waits until that many are in (proof of requests
    met: int = 0  # in flight at once, never a timing); `met` counts those that met, a lone one goes on after 5 s
    barrier: Any = None
    on_die: Any = None  # set by MockServer: stops it
    device: str | None = None  # seglens_device in each answer (None: a stock server that says nothing)
    compute_us: bool = True  # False: no compute_us parameter (a stock Triton: the statistics extension only)
    drop: bool = False  # REST closes each connection after its answer, unannounced (a keep-alive gone stale)
    requests: int = 0  # infer requests seen (each retry is one)
    tamper: Any = None  # outputs → outputs, before they are answered (a lying server)
    trickle_s: float | None = None  # REST: an infer answer's bytes one at a time, this far apart
    declare_length: int | None = None  # REST: an infer answer declares this Content-Length, sends a little, stalls
    no_length: bool = False  # REST: an infer answer with no Content-Length, its end the connection's close
    stats: dict[str, list[int]] = field(default_factory=lambda: {"success": [0, 0], "compute_infer": [0, 0]})
    stopping: threading.Event = field(default_factory=threading.Event)
    connections: set[Any] = field(default_factory=set)  # open REST sockets: a stop closes them (a killed server)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        import onnxruntime as ort

        self.session = ort.InferenceSession(str(self.path), providers=["CPUExecutionProvider"])
        self.metadata = {"name": self.name, "versions": ["1"], "platform": "onnxruntime_onnx",
                         "inputs": _io(self.session.get_inputs()), "outputs": _io(self.session.get_outputs())}

    def authorised(self, header: str | None) -> bool:
        """A bearer token, or `token` "basic:user:password" for HTTP basic auth."""
        if self.token is None:
            return True
        if self.token.startswith("basic:"):
            import base64

            return header == "Basic " + base64.b64encode(self.token.removeprefix("basic:").encode()).decode()
        return header == f"Bearer {self.token}"

    def admit(self) -> str | None:
        """Count a request; 'busy' or 'hang' when a mode says it must not be answered now."""
        with self.lock:
            self.requests += 1
            if self.busy > 0:
                self.busy -= 1
                return "busy"
            dies = self.die_after is not None and self.requests > self.die_after
        if dies:
            threading.Thread(target=self.on_die, daemon=True).start()
            return "hang"  # never answered: the stop closes the connection
        if self.meet > 1 and self.requests > 1:
            self._meet()
        return "hang" if self.hang else None

    def _meet(self) -> None:
        with self.lock:
            if self.barrier is None:
                self.barrier = threading.Barrier(self.meet, timeout=15)  # generous: a loaded machine is slow
            barrier = self.barrier
        try:
            barrier.wait()
        except threading.BrokenBarrierError:  # no partner in time (the run's last request, a slow machine): the
            with self.lock:                   # next requests meet at a fresh barrier, not a broken one
                if self.barrier is barrier:
                    self.barrier = None
            return
        with self.lock:
            self.met += 1

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], int]:
        started = time.perf_counter_ns()
        outputs = self.session.run(None, feeds)
        ns = time.perf_counter_ns() - started
        with self.lock:
            for key in self.stats:
                self.stats[key][0] += 1
                self.stats[key][1] += ns
        if self.tamper is not None:
            outputs = list(self.tamper(outputs))
        return outputs, ns // 1000


class _Rest(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: MockState  # set on the subclass made per server

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.state.lock:
            self.state.connections.add(self.connection)

    def finish(self) -> None:
        with self.state.lock:
            self.state.connections.discard(self.connection)
        super().finish()

    def _send(self, code: int, obj: dict[str, Any], blob: bytes = b"", *, lie: bool = False) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        if blob:
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Inference-Header-Content-Length", str(len(body)))
        else:
            self.send_header("Content-Type", "application/json")
        declared = self.state.declare_length if lie and self.state.declare_length else len(body) + len(blob)
        if lie and self.state.no_length:  # read until the connection closes: only the bytes received say its size
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(declared))
        self.end_headers()
        if lie and (self.state.trickle_s or self.state.declare_length):
            return self._stall(body + blob)
        self.wfile.write(body + blob)
        if self.state.drop:  # no "Connection: close": the client finds out on its next request
            self.wfile.flush()
            self.close_connection = True

    def _stall(self, data: bytes) -> None:
        """A trickle (one byte every trickle_s) or a lie (a little, then nothing), until the server stops or the
        client goes."""
        try:
            if self.state.declare_length:
                self.wfile.write(data[:10])
                self.wfile.flush()
                self.state.stopping.wait()
                return
            for i in range(len(data)):
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                if self.state.stopping.wait(self.state.trickle_s):
                    return
        except OSError:  # the client gave up
            self.close_connection = True

    def _model_path(self, tail: str = "") -> set[str]:
        base = f"/v2/models/{self.state.name}"
        return {base + tail, f"{base}/versions/1{tail}"}

    def do_GET(self) -> None:  # http.server's name
        path = self.path.rstrip("/")
        if path == "/v2/health/live":  # unauthenticated: a probe's
            return self._send(200, {"live": True})
        if not self.state.authorised(self.headers.get("Authorization")):
            return self._send(401, {"error": "unauthorized"})
        if path == "/v2/health/ready":
            return self._send(200, {"ready": True})
        if path == "/v2":
            return self._send(200, {"name": "mock", "version": "0", "extensions": ["binary_tensor_data", "statistics"]})
        if path in self._model_path():
            return self._send(200, self.state.metadata)
        if path in self._model_path("/ready"):
            return self._send(200, {"name": self.state.name, "ready": True})
        if path in self._model_path("/stats"):
            with self.state.lock:
                stats = {k: {"count": c, "ns": ns} for k, (c, ns) in self.state.stats.items()}
            return self._send(200, {"model_stats": [{"name": self.state.name, "version": "1",
                                                     "inference_stats": stats}]})
        if path.startswith("/v2/models/"):
            return self._send(404, {"error": f"Model with name {path.split('/')[3]} does not exist."})
        return self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self.state.authorised(self.headers.get("Authorization")):
            return self._send(401, {"error": "unauthorized"})
        if self.path.rstrip("/") not in self._model_path("/infer"):
            return self._send(404, {"error": "Model does not exist."})
        mode = self.state.admit()
        if mode == "busy":
            return self._send(503, {"error": "Model is not ready."})
        if mode == "hang":
            self.state.stopping.wait()
            return None
        length = int(self.headers.get("Inference-Header-Content-Length", len(body)))
        request, raw = json.loads(body[:length]), body[length:]
        try:
            feeds = _rest_feeds(request, raw)
            outputs, compute_us = self.state.run(feeds)
        except Exception as exc:  # ORT's: a 400 with the reason, as KServe's InvalidInput
            return self._send(400, {"error": str(exc)})
        self._answer(request, outputs, compute_us)
        return None

    def _answer(self, request: dict[str, Any], outputs: list[np.ndarray], compute_us: int) -> None:
        every = (request.get("parameters") or {}).get("binary_data_output", False)
        wanted = {o["name"]: (o.get("parameters") or {}).get("binary_data", every)
                  for o in request.get("outputs") or []}
        listed, blob = [], b""
        for meta, array in zip(self.state.metadata["outputs"], outputs, strict=True):
            if wanted and meta["name"] not in wanted:
                continue
            datatype = NP_TO_V2.get(array.dtype.name, meta["datatype"])  # a tampered answer says its own
            item: dict[str, Any] = {"name": meta["name"], "datatype": datatype, "shape": list(array.shape)}
            if wanted.get(meta["name"], every):
                data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
                item["parameters"] = {"binary_data_size": len(data)}
                blob += data
            else:
                item["data"] = array.flatten().tolist()
            listed.append(item)
        parameters: dict[str, Any] = {"compute_us": compute_us} if self.state.compute_us else {}
        if self.state.device:
            parameters.update(seglens_device=self.state.device, seglens_fallback="")
        self._send(200, {"model_name": self.state.name, "model_version": "1", "id": request.get("id", ""),
                         "parameters": parameters, "outputs": listed}, blob, lie=True)


def _rest_feeds(request: dict[str, Any], raw: bytes) -> dict[str, np.ndarray]:
    feeds, offset = {}, 0
    for item in request["inputs"]:
        dtype = V2_TO_NP[item["datatype"]]
        size = (item.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            feeds[item["name"]] = np.frombuffer(raw[offset:offset + size], dtype).reshape(item["shape"])
            offset += size
        else:
            feeds[item["name"]] = np.asarray(item["data"], dtype).reshape(item["shape"])
    return feeds


def _grpc_servicer(state: MockState) -> Any:
    import grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pbg

    def check(context: Any) -> None:
        header = dict(context.invocation_metadata()).get("authorization")
        if not state.authorised(header):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unauthorized")

    class Servicer(pbg.GRPCInferenceServiceServicer):  # type: ignore[misc]
        def ServerLive(self, request: Any, context: Any) -> Any:
            return pb.ServerLiveResponse(live=True)

        def ServerReady(self, request: Any, context: Any) -> Any:
            check(context)
            return pb.ServerReadyResponse(ready=True)

        def ModelReady(self, request: Any, context: Any) -> Any:
            check(context)
            return pb.ModelReadyResponse(ready=request.name == state.name)

        def ModelMetadata(self, request: Any, context: Any) -> Any:
            check(context)
            if request.name != state.name:
                context.abort(grpc.StatusCode.NOT_FOUND, f"Model with name {request.name} does not exist.")
            tensor = pb.ModelMetadataResponse.TensorMetadata
            meta = state.metadata
            return pb.ModelMetadataResponse(name=state.name, versions=["1"], platform=meta["platform"],
                                            inputs=[tensor(**m) for m in meta["inputs"]],
                                            outputs=[tensor(**m) for m in meta["outputs"]])

        def ModelInfer(self, request: Any, context: Any) -> Any:
            check(context)
            if request.model_name != state.name:
                context.abort(grpc.StatusCode.NOT_FOUND, "Model does not exist.")
            mode = state.admit()
            if mode == "busy":
                context.abort(grpc.StatusCode.UNAVAILABLE, "Model is not ready.")
            if mode == "hang":
                state.stopping.wait()
                context.abort(grpc.StatusCode.CANCELLED, "stopping")
            feeds = {i.name: np.frombuffer(raw, V2_TO_NP[i.datatype]).reshape(i.shape)
                     for i, raw in zip(request.inputs, request.raw_input_contents, strict=True)}
            try:
                outputs, compute_us = state.run(feeds)
            except Exception as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            response = pb.ModelInferResponse(model_name=state.name, model_version="1", id=request.id)
            if state.compute_us:
                response.parameters["compute_us"].int64_param = compute_us
            if state.device:
                response.parameters["seglens_device"].string_param = state.device
            wanted = [o.name for o in request.outputs]
            for meta, array in zip(state.metadata["outputs"], outputs, strict=True):
                if wanted and meta["name"] not in wanted:
                    continue
                response.outputs.add(name=meta["name"], datatype=NP_TO_V2.get(array.dtype.name, meta["datatype"]),
                                     shape=list(array.shape))
                response.raw_output_contents.append(np.ascontiguousarray(array).tobytes())
            return response

        def ModelStatistics(self, request: Any, context: Any) -> Any:
            check(context)
            with state.lock:
                (count, ns), (done, total) = state.stats["compute_infer"], state.stats["success"]
            stats = pb.InferStatistics(success=pb.StatisticDuration(count=done, ns=total),
                                       compute_infer=pb.StatisticDuration(count=count, ns=ns))
            return pb.ModelStatisticsResponse(model_stats=[pb.ModelStatistics(name=state.name, version="1",
                                                                               inference_stats=stats)])

    return Servicer()


class MockServer:
    """`with MockServer(path, name="nuclei", token=…) as server:` → server.http_url / server.grpc_url.
    `tls=(cert_pem_path, key_pem_path)` serves https:// and grpcs:// instead."""

    def __init__(self, path: Path, *, name: str = "nuclei", token: str | None = None,
                 tls: tuple[Path, Path] | None = None, device: str | None = None, grpc_port: int = 0) -> None:
        self.state = MockState(name, Path(path), token=token, device=device)
        self.state.on_die = self.stop
        self.tls = tls
        handler = type("Handler", (_Rest,), {"state": self.state})
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._http.daemon_threads = True
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self._grpc, self.grpc_port = self._grpc_server(tls, grpc_port)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def _grpc_server(self, tls: tuple[Path, Path] | None, port: int) -> tuple[Any, int]:
        import grpc
        from tritonclient.grpc import service_pb2_grpc as pbg

        server = grpc.server(futures.ThreadPoolExecutor(8), options=[
            ("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 256 << 20)])
        pbg.add_GRPCInferenceServiceServicer_to_server(_grpc_servicer(self.state), server)
        if tls is None:
            return server, server.add_insecure_port(f"127.0.0.1:{port}")
        credentials = grpc.ssl_server_credentials([(tls[1].read_bytes(), tls[0].read_bytes())])
        return server, server.add_secure_port(f"127.0.0.1:{port}", credentials)

    @property
    def http_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._http.server_address[1]}"

    @property
    def grpc_url(self) -> str:
        return f"{'grpcs' if self.tls else 'grpc'}://127.0.0.1:{self.grpc_port}"

    def __enter__(self) -> MockServer:
        self._thread.start()
        self._grpc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop both faces (a hung request is let go): later requests find the ports closed."""
        if self.state.stopping.is_set():
            return
        self.state.stopping.set()
        self._grpc.stop(0)
        if self._thread.is_alive():
            self._http.shutdown()
        self._http.server_close()
        with self.state.lock:
            open_sockets = list(self.state.connections)
        for sock in open_sockets:  # keep-alive connections die with a killed server too
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def self_signed(folder: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for `host` (an IP and 'localhost' in its names): (cert.pem, key.pem)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(host))]
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path
