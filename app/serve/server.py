"""`seglens-cli serve`: ONNX models over the Open Inference Protocol (KServe v2 / Triton), REST and gRPC, on
KServe's Python server pieces composed here.

Why composed rather than `kserve.ModelServer.start()`: its REST server binds 0.0.0.0 whatever is asked, its gRPC
server `[::]`, insecure only and with 8 MiB messages (a 1080p RGB FP32 tensor is 24.9 MB), and it installs its
own signal handlers. So this module takes KServe's DataPlane (the protocol's semantics), its FastAPI app and
RESTServer (uvicorn, TLS) and its gRPC servicer, and binds, secures and stops them itself:

- REST: the RESTServer's uvicorn config with the host asked for, run by a uvicorn.Server whose signal capture is
  off (ours stops both servers); the bearer-token middleware on KServe's app.
- gRPC: a grpc.aio server with KServe's servicer behind our token interceptor and KServe's exception mapping,
  message limits raised to `MAX_MESSAGE_BYTES`, a secure port when a certificate is given.
- SIGINT / SIGTERM: both servers stop (requests in flight get `GRACE_S`), `serve_forever` returns the signal. A
  second one during that stop is `on_second_signal`'s (the CLI ends the process at once, in one line); without
  it, uvicorn is told to stop without waiting. The handlers stay until both servers have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import SegLensError, one_line
from app.serve.auth import Auth, grpc_interceptor, rest_middleware
from app.serve.kserve import load_kserve
from app.serve.v2 import add_v2_routes, body_limit, v2_body

if TYPE_CHECKING:
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.runtime.session import DeviceRequest
    from app.serve.model import OnnxModel

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 256 << 20  # gRPC: a 4K RGB FP32 tensor (~100 MB) with room; KServe's stock limit is 8 MiB
GRACE_S = 5.0  # requests in flight at a stop get this long to finish


@dataclass(frozen=True)
class ServeConfig:
    """Where and how to serve: host, ports, the token, TLS files."""

    host: str = "127.0.0.1"
    port: int = 8000
    grpc_port: int | None = 8001  # None: REST only
    auth: Auth = field(default_factory=Auth)
    tls_cert: Path | None = None
    tls_key: Path | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    def rest_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{_url_host(self.host)}:{self.port}"

    def grpc_url(self) -> str | None:
        if self.grpc_port is None:
            return None
        return f"{'grpcs' if self.tls else 'grpc'}://{_url_host(self.host)}:{self.grpc_port}"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def check_tls(cert: Path, key: Path) -> None:
    """The certificate and key are readable PEM files that make a pair; else one line naming the file."""
    import ssl

    read_tls(cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise SegLensError(f"{cert}: the TLS certificate and the key {key.name} do not load as a pair "
                           f"({exc.reason or exc})") from exc


def read_tls(cert: Path, key: Path) -> tuple[bytes, bytes]:
    """The certificate and key files' bytes (PEM), a missing or unreadable one named in one line; read through
    app.guard.untrusted (a FIFO or device named by mistake is refused at once, not waited on; at most 1 MiB)."""
    from app.guard.untrusted import SMALL_FILE_LIMIT, read_untrusted

    pems = []
    for what, path in (("certificate", cert), ("key", key)):
        try:
            data = read_untrusted(path, limit=SMALL_FILE_LIMIT)
        except OSError as exc:
            raise SegLensError(f"{path}: cannot read the TLS {what}: {exc.strerror or exc}") from exc
        if b"-----BEGIN" not in data:
            raise SegLensError(f"{path}: the TLS {what} is not a PEM file")
        pems.append(data)
    return pems[0], pems[1]


def open_models(paths: list[Path], device: DeviceRequest, *, runtime: RuntimeOptions) -> list[OnnxModel]:
    """One warmed session per model file, named by its stem; two files with one name are refused in one line."""
    load_kserve()
    from app.serve.model import open_model

    models: list[OnnxModel] = []
    for path in paths:
        if any(m.name == path.stem for m in models):
            raise SegLensError(f"two models named '{path.stem}' (the served name is the file's stem): rename one")
        models.append(open_model(path, device, runtime=runtime))
    return models


def serve_forever(models: list[OnnxModel], config: ServeConfig, *, on_ready: Callable[[], None] | None = None,
                  on_second_signal: Callable[[int], None] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; returns the signal number that stopped it. `on_second_signal` is called with
    a signal that comes while the first one's graceful stop is under way (module docstring). Raises SegLensError
    (one line) when a port cannot be bound or TLS cannot be set up."""
    load_kserve()
    return asyncio.run(_serve(models, config, on_ready, on_second_signal))


async def _serve(models: list[OnnxModel], config: ServeConfig, on_ready: Callable[[], None] | None,
                 on_second_signal: Callable[[int], None] | None) -> int:
    registry = _registry(models)
    dataplane = _dataplane(registry)
    extension = _extension(registry)
    listening = _listen(config)  # bound here: a port in use is one line, not uvicorn's sys.exit(1)
    rest = _rest_server(dataplane, extension, config)
    grpc_server = None
    stopped: list[int] = []
    loop = asyncio.get_running_loop()

    def stop(signum: int) -> None:
        if stopped and on_second_signal is not None:
            on_second_signal(signum)
        rest.force_exit = bool(stopped)  # a second Ctrl+C: stop now, not after the requests in flight
        stopped.append(signum)
        rest.should_exit = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop, signum)
    try:
        if config.grpc_port is not None:
            grpc_server = await _start_grpc(dataplane, extension, config)
        rest_task = asyncio.create_task(rest.serve(sockets=[listening]))
        while not rest.started and not rest_task.done() and not stopped:
            await asyncio.sleep(0.02)
        if rest.started and on_ready is not None:
            on_ready()
        await rest_task
    finally:
        if grpc_server is not None:  # a second signal meanwhile is still ours (not a KeyboardInterrupt's traceback)
            await grpc_server.stop(GRACE_S)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        listening.close()
    return stopped[0] if stopped else 0


def _listen(config: ServeConfig) -> socket.socket:
    """The REST port's socket, bound to the host asked for (a port in use or a foreign address: one line)."""
    host = config.host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart right after a stop (TIME_WAIT)
    try:
        listening.bind((host, config.port))
    except OSError as exc:
        listening.close()
        raise SegLensError(f"cannot listen on {config.rest_url()}: {exc.strerror or exc}") from exc
    return listening


class KeptLoaded(NotImplementedError):
    """The repository extension's unload of a served model: refused (501 / UNIMPLEMENTED); `reason` is what
    KServe's gRPC status mapping reads."""

    def __init__(self, name: str) -> None:
        self.reason = f"serve keeps its models loaded ('{name}' too): stop the server instead"
        super().__init__(self.reason)


def _registry(models: list[OnnxModel]) -> Any:
    """KServe's model registry holding the served models for good: the repository extension's unload (REST
    `v2/repository/models/<m>/unload`, gRPC RepositoryModelUnload) would drop a model no request could bring
    back, so it is refused (501 / UNIMPLEMENTED); its load of a served model is a no-op."""
    from kserve.model_repository import ModelRepository

    class Served(ModelRepository):  # type: ignore[misc]
        def unload(self, name: str) -> None:
            raise KeptLoaded(name)

    registry = Served()
    for model in models:
        registry.update(model)
    return registry


def _extension(registry: Any) -> Any:
    """The repository extension as serve keeps it: `index` lists the served models (every one READY), `load` of a
    served model is a no-op, `unload` is refused (KeptLoaded); an unknown name is ModelNotFound (404 / NOT_FOUND)
    on each, not KServe's attempt to load it from a folder (a 500 / UNKNOWN with a traceback)."""
    from kserve.errors import ModelNotFound
    from kserve.protocol.model_repository_extension import ModelRepositoryExtension

    class Repository(ModelRepositoryExtension):  # type: ignore[misc]
        def _served(self, name: str) -> None:
            if registry.get_model(name) is None:
                raise ModelNotFound(name)

        async def index(self, filter_ready: bool | None = False) -> list[dict[str, str]]:
            return [{"name": name, "state": "READY", "reason": ""} for name in registry.get_models()]

        async def load(self, model_name: str) -> dict[str, Any]:
            self._served(model_name)
            return {"name": model_name, "load": True}  # what KServe's gRPC servicer reads (REST says it itself)

        async def unload(self, model_name: str) -> None:
            self._served(model_name)
            raise KeptLoaded(model_name)

    return Repository(model_registry=registry)


def _dataplane(registry: Any) -> Any:
    """KServe's DataPlane with the metadata's platform said (KServe answers '' for every model), its versions a
    list (KServe's `null` is not the protocol's), a binary request's header length checked (KServe's int() made a
    non-number a 500) and the REST answers without KServe's `null`s (app.serve.v2.v2_body)."""
    from kserve.protocol.dataplane import DataPlane

    from app.serve.kserve import json_length_of
    from app.serve.model import PLATFORM

    class SegLensDataPlane(DataPlane):  # type: ignore[misc]
        async def model_metadata(self, model_name: str) -> dict[str, Any]:
            metadata: dict[str, Any] = await super().model_metadata(model_name)
            metadata["platform"] = PLATFORM
            if not isinstance(metadata.get("versions"), list):
                metadata["versions"] = []  # serve has no model versions (`/versions/<v>` is a 501)
            return metadata

        def decode_inference_request(self, body: Any, headers: dict[str, str], model_name: str) -> Any:
            if isinstance(body, bytes):
                from kserve.protocol.infer_type import InferRequest

                length = json_length_of(headers.get("inference-header-content-length"))
                return InferRequest.from_bytes(body, length, model_name)
            return super().decode_inference_request(body, headers, model_name)

        def encode(self, model_name: str, response: Any, headers: Any, req_attributes: dict[str, Any]) -> Any:
            body, response_headers = super().encode(model_name, response, headers, req_attributes)
            return v2_body(body, response_headers)

    return SegLensDataPlane(model_registry=registry)


def _rest_server(dataplane: Any, extension: Any, config: ServeConfig) -> Any:
    """KServe's RESTServer, its uvicorn config bound to the host asked for, served without uvicorn's signal capture."""
    import uvicorn
    from kserve.model_server import app
    from kserve.protocol.rest.server import RESTServer

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # ours stop both servers (and say which signal)
            yield

    rest = RESTServer("kserve.model_server:app", dataplane, extension, config.port,
                      ssl_certfile=str(config.tls_cert) if config.tls_cert else None,
                      ssl_keyfile=str(config.tls_key) if config.tls_key else None,
                      grace_period=int(GRACE_S))
    rest.config.host = config.host  # RESTServer hard-codes 0.0.0.0
    if config.auth.required:
        app.add_middleware(rest_middleware(config.auth))
    app.add_middleware(body_limit(MAX_MESSAGE_BYTES))  # outermost: before the token check reads anything
    rest.create_application()  # KServe's routes, middlewares and exception handlers on its module-global app
    add_v2_routes(app, extension)
    return Server(rest.config)


async def _start_grpc(dataplane: Any, extension: Any, config: ServeConfig) -> Any:
    import grpc
    from grpc_interceptor.exceptions import GrpcException
    from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc
    from kserve.protocol.grpc.interceptors import ExceptionToStatusInterceptor
    from kserve.protocol.grpc.servicer import InferenceServicer

    class Statuses(ExceptionToStatusInterceptor):  # type: ignore[misc]
        """KServe's mapping, for exceptions without its `reason` too (a NotImplementedError, anything else): KServe's
        own handler then raised an AttributeError, which grpc answered UNKNOWN with a traceback in the log."""

        async def handle_exception(self, ex: Exception, request: Any, context: Any, method: str) -> None:
            if isinstance(ex, GrpcException) or isinstance(getattr(ex, "reason", None), str):
                await super().handle_exception(ex, request, context, method)
                return
            code = grpc.StatusCode.UNIMPLEMENTED if isinstance(ex, NotImplementedError) else grpc.StatusCode.INTERNAL
            line = one_line(ex, most=300) if code == grpc.StatusCode.UNIMPLEMENTED else "Internal server error"
            log.error("%s: %s", method, one_line(ex, most=300, typed=True))
            await context.abort(code, line)

    interceptors = [Statuses()]
    if config.auth.required:
        interceptors.insert(0, grpc_interceptor(config.auth))
    server = grpc.aio.server(interceptors=interceptors,
                             options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                                      ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                                      ("grpc.so_reuseport", 0)])  # a port in use is refused, not shared
    grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(dataplane, extension),
                                                                        server)
    address = f"{_url_host(config.host)}:{config.grpc_port}"
    try:
        if config.tls_cert is not None and config.tls_key is not None:
            cert, key = read_tls(config.tls_cert, config.tls_key)
            bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError:  # grpc: "Failed to bind to address …" (older releases return 0 instead)
        bound = 0
    if not bound:
        raise SegLensError(f"cannot listen on {config.grpc_url()}: the port is in use or the address is not "
                           "this machine's")
    await server.start()
    return server
