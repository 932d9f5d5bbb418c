"""A remote session: a model served over the Open Inference Protocol (KServe v2: Triton, KServe, MLServer,
`seglens-cli serve`) that implements the ModelSession protocol (app.inference.model.session), so the pipeline,
folder runs, bench and the viewer use it as they use a local one. Pre- and post-processing stay on this machine;
only the tensors travel (gRPC raw bytes, or HTTP with the binary tensor extension: app.inference.remote.transport).

The model's metadata (`v2/models/<m>`) goes through the same detection as an ONNX file (app.inference.remote.graph
→ app.inference.model.builder.spec_from_graph); a sidecar adds what the wire cannot say. Every call has a timeout and
a bounded retry with backoff where waiting may help (app.inference.remote.errors); each failure is one line.
The latency is split into network+queue and server compute from the response's `compute_us` parameter (set by
`seglens-cli serve`); a server that does not send it (a stock Triton) leaves compute unknown.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import need_extra
from app.guard.answers import MAX_ANSWER_BYTES, AnswerRefused, Declared, check_answer, check_declared_input
from app.guard.net import credentials_problem
from app.guard.untrusted import SMALL_FILE_LIMIT, untrusted_problem
from app.inference.model.onnx_graph import GraphInfo
from app.inference.model.session import RemoteInfo, RequestTiming, SessionInfo, warm_up_runs, warmup_tensor
from app.inference.model.spec import ModelSpec, RemoteModel
from app.inference.remote.calls import Calls
from app.inference.remote.errors import RemoteError, classify, with_retry
from app.inference.remote.graph import ONNX_TO_V2, activation_note, graph_from_metadata, metadata_sha256, remote_path
from app.inference.remote.transport import Wire, compute_totals

if TYPE_CHECKING:
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.model.session import ModelSession

__all__ = ["RemoteError", "RemoteSession", "RemoteTarget", "open_remote_session"]

log = logging.getLogger(__name__)
SCHEMES = {"grpc": ("grpc", False), "grpcs": ("grpc", True), "http": ("http", False), "https": ("http", True)}
MAX_TIMINGS = 10_000
IN_FLIGHT = 4  # requests a folder run keeps going at once (a GPU server is then never waiting on the network)
MAX_COMPUTE_US = 86_400e6  # a server's compute_us beyond a day (or NaN, ±inf, 10⁴⁰⁰) is no measure: unknown
DEFAULT_PORTS = {"grpc": 8001, "grpcs": 8001, "http": 8000, "https": 443}
INSECURE_SETTING = "--allow-insecure"  # the named setting that lets credentials travel in clear text (warned)


@dataclass(frozen=True)
class RemoteTarget:
    """Where and what: the server's URL (its scheme the protocol and TLS), the model, credentials, limits."""

    url: str  # "grpc://host:8001", "grpcs://host:8001", "http://host:8000", "https://host:8443"
    model: str  # the model's name on the server
    version: str = ""  # "" = the server's default
    token: str | None = field(default=None, repr=False)  # bearer token: never logged, never in a repr
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: Path | None = None  # the CA bundle that signed the server's certificate (https, grpcs)
    timeout_s: float = 30.0  # the deadline of one request, whole (connection, upload, every byte of the answer)
    retries: int = 3  # for unreachable / 503 / timeouts; never for 401/403/404/400
    backoff_s: float = 1.0  # the first wait; doubled each retry (at most app.inference.remote.errors.MAX_BACKOFF_S)
    max_answer_bytes: int = MAX_ANSWER_BYTES  # one answer, all its outputs: larger is refused (app.guard)
    allow_insecure: bool = False  # credentials in clear text to a host that is not this machine: refused unless set
    insecure_setting: str = field(default=INSECURE_SETTING, compare=False)  # that setting as the face names it

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem:
            raise RemoteError(f"server URL {_without_credentials(self.url)[:200]!r}: {problem}", kind="url")

    def problem(self) -> str | None:
        """Why the target cannot be used, in words (None when it can)."""
        parts = urllib.parse.urlsplit(self.url.strip())
        if parts.scheme not in SCHEMES:
            return "expected grpc://, grpcs://, http:// or https:// followed by host:port"
        if parts.username or parts.password:
            return "credentials do not belong in the URL (logs and the shell's history keep it): give a token, " \
                   "or a user and password, apart"
        try:
            parts.port  # noqa: B018  # raises on a port out of range or not a number
        except ValueError:
            return "the port is not a number from 1 to 65535"
        if not parts.hostname:
            return "no host"
        if parts.path not in ("", "/") or parts.query:
            return "a URL path is not used by the protocol (the model is named apart)"
        if not self.model or "/" in self.model or not self.model.isprintable():
            return f"the model name {self.model[:80]!r} is not a model name"
        if not self.timeout_s > 0:
            return "the timeout must be more than 0 s"
        if self.ca_file is not None and not SCHEMES[parts.scheme][1]:
            return "a CA file is for TLS: use https:// or grpcs://"
        if self.token is not None or self.username is not None:
            return credentials_problem(self.url.strip(), allow_insecure=self.allow_insecure,
                                       setting=self.insecure_setting)
        return None

    @property
    def protocol(self) -> str:
        return SCHEMES[urllib.parse.urlsplit(self.url.strip()).scheme][0]

    @property
    def tls(self) -> bool:
        return SCHEMES[urllib.parse.urlsplit(self.url.strip()).scheme][1]

    @property
    def host(self) -> str:
        """'host:port', as messages say it ('remote host:port/model')."""
        parts = urllib.parse.urlsplit(self.url.strip())
        name = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
        return f"{name}:{parts.port or DEFAULT_PORTS[parts.scheme]}"

    @property
    def where(self) -> str:
        return f"remote {self.host}/{self.model}"

    def wire(self) -> Wire:
        return Wire(self.host, self.tls, self.model, self.version, self.timeout_s, self.ca_file, self.token,
                    self.username, self.password, max_answer_bytes=self.max_answer_bytes,
                    allow_insecure=self.allow_insecure)


def _without_credentials(url: str) -> str:
    """`url` with any user:password@ shown as ***@ (a refusal must not echo a secret)."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    return f"{scheme}{sep}***@{netloc.rsplit('@', 1)[1]}{slash}{tail}" if "@" in netloc else url


class RemoteSession:
    """The ModelSession protocol over the wire; the transport's errors come back as RemoteError, one line, after
    the bounded retries. Unlike a local session, `run` may be called from several threads at once: a folder run
    keeps `in_flight` requests going (app.runs.folder.batch), gRPC on its one thread-safe client, HTTP through the
    session's sender threads (app.inference.remote.calls). `cancel()` (any thread) makes a run() waiting on the
    server or on a backoff raise RemoteError '… cancelled' at once, and every later one."""

    def __init__(self, spec: ModelSpec, calls: Calls, info: SessionInfo, target: RemoteTarget, *,
                 on_retry: Callable[[str], None] | None = None,
                 declared: Mapping[str, Declared] | None = None, in_flight: int = IN_FLIGHT) -> None:
        self.spec, self.info, self.in_flight = spec, info, max(1, in_flight)
        self.target, self.on_retry = target, on_retry
        self.declared = dict(declared or {})  # each output as the server's metadata declared it: answers match it
        self._calls = calls
        weakref.finalize(self, calls.close)  # a session dropped unclosed: its sender threads end, not linger
        self.fetched: tempfile.TemporaryDirectory[str] | None = None  # a sidecar fetched by URL: its private copy
        self._lock = threading.Lock()
        self._given_up = False
        self._stats_base: tuple[int, int] | None = None  # the server's statistics when the run began, if it has them
        self.last_timing: RequestTiming | None = None
        self.timings: list[RequestTiming] = []  # the latest requests' (at most MAX_TIMINGS; a face reads the tail)
        self._totals = [0, 0.0, 0, 0.0]  # requests, their round-trip ms; those with a compute, its ms (timing_line)

    @property
    def spec(self) -> ModelSpec:
        return self._spec

    @spec.setter
    def spec(self, spec: ModelSpec) -> None:
        """The spec, as a command or the viewer adjusted it (--tile, --threshold): the same tensors go over."""
        self._spec, self._input_name, self._output_names = spec, spec.input.name, list(spec.output.fetched)

    def run(self, tensor: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        """The model on one tensor, on the server: its first output, or an anomaly model's tuple (map, score[,
        mask]) in the spec's order, as ModelSession.run returns them."""
        where = self.target.where
        rank = 5 if self.spec.is_3d else 4
        if tensor.ndim != rank:
            raise RemoteError(f"{where}: the model takes {rank}-D tensors, got {tensor.ndim}-D {list(tensor.shape)}")
        datatype = ONNX_TO_V2.get(tensor.dtype.name)
        if datatype is None:
            raise RemoteError(f"{where}: a {tensor.dtype.name} tensor has no datatype in the protocol")
        tensor = np.ascontiguousarray(tensor)
        started = time.perf_counter()
        # once the retries were spent on a server that is gone, each later request is tried once until one is
        # answered: a folder run's remaining inputs become error rows at once, not after every backoff again
        retries = 0 if self._given_up else self.target.retries
        calls = self._calls
        try:
            answer = with_retry(lambda: calls.infer(self._input_name, tensor, datatype, self._output_names),
                                where=where, retries=retries, backoff_s=self.target.backoff_s,
                                timeout_s=self.target.timeout_s, on_retry=self.on_retry, sleep=calls.sleep)
        except RemoteError as exc:
            self._given_up = exc.retryable
            raise
        self._given_up = False
        wall_ms = (time.perf_counter() - started) * 1000
        outputs = [self._output(name, value) for name, value in zip(self._output_names, answer.outputs, strict=True)]
        self._timed(wall_ms, answer.parameters)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _output(self, name: str, value: np.ndarray | None) -> np.ndarray:
        """One output of the answer, checked before anything is made of it: of the dtype and shape the server's
        own metadata declared, within the answer-size cap, finite (app.guard.answers); else one line."""
        if value is None:
            raise RemoteError(f"{self.target.where}: the server's answer has no output {name[:80]!r}", kind="answer")
        declared = self.declared.get(name, Declared(name, ()))
        try:
            check_answer(self.target.where, declared, value, max_bytes=self.target.max_answer_bytes)
        except AnswerRefused as exc:
            raise RemoteError(str(exc), kind="answer") from None
        # np.frombuffer views are read-only; the local session's outputs are not, and postprocessing may write
        return value if value.flags.writeable else value.copy()

    def _timed(self, wall_ms: float, parameters: dict[str, Any]) -> None:
        compute = _compute_ms(parameters.get("compute_us"))
        network = max(wall_ms - (compute or 0.0), 0.0)
        self.last_timing = RequestTiming(network, compute)
        with self._lock:
            if len(self.timings) >= MAX_TIMINGS:  # a million-image run keeps its sums, not a million records
                del self.timings[:MAX_TIMINGS // 2]
            self.timings.append(self.last_timing)
            self._totals[0] += 1
            self._totals[1] += wall_ms
            if compute is not None:
                self._totals[2] += 1
                self._totals[3] += compute
            self._device_said(parameters)

    def _device_said(self, parameters: dict[str, Any]) -> None:
        """The server's own device and fallback reason, when its answers carry them (`seglens-cli serve`)."""
        remote = self.info.remote
        device, fallback = _said(parameters.get("seglens_device")), _said(parameters.get("seglens_fallback"))
        if remote is not None and device and device != remote.server_device:
            remote = replace(remote, server_device=device, server_fallback=fallback or None)
            self.info = replace(self.info, provider=remote.label, providers=(remote.label,), remote=remote)

    def warm_up(self, *, measure_warm: bool = False) -> SessionInfo:
        """One request on zeros of the working shape (its round trip the first-run ms); with `measure_warm` a
        second one (the warmed ms). Its timings count as any request's: `start_timing` begins a run's afresh."""
        first, warm = warm_up_runs(self.run, self.spec, measure_warm=measure_warm)
        self.info = replace(self.info, first_run_ms=first, warm_run_ms=warm)
        return self.info

    def warmup_tensor(self) -> np.ndarray:
        """Zeros of the working shape, as the warm-up sends them."""
        return warmup_tensor(self.spec)

    def start_timing(self) -> None:
        """From here the timings are a new run's; the server's statistics, where it has the extension, are read
        now so that a server sending no `compute_us` (a stock Triton) still splits the latency at the end."""
        with self._lock:
            self.timings.clear()
            self._totals = [0, 0.0, 0, 0.0]
        said = self.last_timing is not None and self.last_timing.compute_ms is not None  # compute_us: no need
        self._stats_base = None if said else self._stats_totals()

    def _stats_totals(self) -> tuple[int, int] | None:
        try:
            return compute_totals(self._calls.call(lambda transport: transport.stats()))
        except Exception:  # no statistics extension (KServe, MLServer), or none allowed: compute stays unknown
            log.debug("%s: no inference statistics", self.target.where, exc_info=True)
            return None

    def timing_line(self) -> str | None:
        """'latency per request: network+queue 12.3 ms, server compute 4.5 ms (mean of N)', or None before any.
        Compute from each answer's `compute_us`, else from the statistics extension (the server's mean over the
        same span, all its clients), else not reported; network+queue is the rest of the round trip."""
        count, wall_sum, computed, compute_sum = self._totals
        if not count:
            return None
        wall = wall_sum / count
        compute, source = (compute_sum / computed, "") if computed else (self._stats_compute_ms(), " (the server's "
                                                                         "statistics)")
        if compute is None:
            return f"latency per request: network+queue {wall:.1f} ms, server compute not reported (mean of {count})"
        return (f"latency per request: network+queue {max(wall - compute, 0.0):.1f} ms, server compute "
                f"{compute:.1f} ms{source} (mean of {count})")

    def _stats_compute_ms(self) -> float | None:
        now = self._stats_totals() if self._stats_base is not None else None
        if now is None or self._stats_base is None or now[0] <= self._stats_base[0]:
            return None
        return (now[1] - self._stats_base[1]) / (now[0] - self._stats_base[0]) / 1e6

    def cancel(self) -> None:
        """From any thread: a run() waiting on the server (a request in flight, a backoff wait) raises
        RemoteError '<where>: cancelled' within ~0.05 s, and so does every later one. Idempotent."""
        self._calls.cancel()

    def close(self) -> None:
        """Cancel what is in flight and let the server's connections go (each HTTP client on its own thread); a
        sidecar fetched by URL goes with its temporary folder."""
        self._calls.close()
        if self.fetched is not None:
            self.fetched.cleanup()


def open_remote_session(target: RemoteTarget, *, sidecar: Path | str | None = None,
                        runtime: RuntimeOptions | None = None, warm_up: bool = True,
                        on_retry: Callable[[str], None] | None = None, in_flight: int = IN_FLIGHT) -> RemoteSession:
    """The session of `target`'s model: its metadata read (with the bounded retry), its spec detected as an ONNX
    file's would be with `sidecar` over it (a path, or an http(s):// URL fetched with the server's credentials
    where its host is the server's: app.inference.remote.sidecar), and by default one warm-up request. `runtime`
    is ONNX Runtime's, which runs on the server: it is ignored here (logged). `in_flight`: the requests a folder run
    keeps going at once on it."""
    from app.errors import SidecarError
    from app.inference.model.builder import spec_from_graph
    from app.inference.remote.sidecar import fetched_sidecar, loaded_as

    if runtime is not None and runtime.given:  # ignored there, but said to be
        log.info("%s: --runtime options are the server's to choose; ignored", target.where)
    sidecar_path, url, folder = fetched_sidecar(sidecar, target.wire())
    started = time.perf_counter()
    try:
        calls = _calls_of(target)
    except BaseException:
        if folder is not None:
            folder.cleanup()
        raise
    try:
        metadata = with_retry(lambda: calls.call(lambda transport: transport.metadata()), where=target.where,
                              retries=target.retries, backoff_s=target.backoff_s, timeout_s=target.timeout_s,
                              on_retry=on_retry, sleep=calls.sleep)
        graph = graph_from_metadata(metadata, target.where)
        _bounded_input(graph, target.where)
        try:
            spec = _on_server(spec_from_graph(remote_path(target.host, target.model), graph, sidecar_path))
        except SidecarError as exc:
            raise (loaded_as(exc, sidecar_path, url) if url and sidecar_path else exc) from None
    except BaseException:
        calls.close()
        if folder is not None:
            folder.cleanup()
        raise
    remote = RemoteInfo(target.host, target.model, target.version, _said(metadata.get("platform"), 80),
                        protocol=target.protocol, tls=target.tls)
    note = activation_note(target.where, spec.output.kind, spec.sources)
    info = SessionInfo(requested="remote", provider=remote.label, providers=(remote.label,),
                       load_ms=(time.perf_counter() - started) * 1000, remote=remote, notes=(note,) if note else ())
    session = RemoteSession(spec, calls, info, target, on_retry=on_retry,
                            declared=declared_outputs(graph), in_flight=in_flight)
    session.fetched = folder
    if warm_up:
        try:
            session.warm_up()
        except BaseException:
            session.close()
            raise
        session.start_timing()  # a run's latency split is of its own requests
    return session


def _on_server(spec: ModelSpec) -> ModelSpec:
    """`spec` said to be of a model on a server, with what stands for its file's hash (metadata_sha256)."""
    where = str(spec.path)
    return replace(spec, remote=RemoteModel(where, metadata_sha256(spec.inputs, spec.outputs, where)))


if TYPE_CHECKING:
    _IMPLEMENTS: type[ModelSession] = RemoteSession  # mypy (.ci/run) proves RemoteSession is a ModelSession


def _compute_ms(compute_us: object) -> float | None:
    """The server's `compute_us` in ms when it is a number of µs within a day (not NaN, ±inf or 10⁴⁰⁰), else None:
    its word, not a measure to divide by."""
    if isinstance(compute_us, bool) or not isinstance(compute_us, int | float) or not 0 <= compute_us <= MAX_COMPUTE_US:
        return None
    return float(compute_us) / 1000


def _said(value: object, most: int = 200) -> str:
    """A word the server's answer says of itself (its device, a fallback reason), as shown in the badge, the report
    and the run record: one printable line of at most `most` characters, else nothing (it is the server's text)."""
    if not isinstance(value, str) or not value.isprintable():
        return ""
    return value[:most]


def declared_outputs(graph: GraphInfo) -> dict[str, Declared]:
    """Each output as the server's metadata declares it, for app.guard.answers.check_answer: its dtype (numpy's
    name) and shape (None for a dynamic dimension)."""
    return {t.name: Declared(t.name, (t.dtype,), None if t.shape is None else _dims(t.shape)) for t in graph.outputs}


def _dims(shape: tuple[int | str | None, ...]) -> tuple[int | None, ...]:
    """A graph's dimensions as numbers, a symbolic or unknown one None (app.inference.remote.graph gives numbers or
    None)."""
    return tuple(d if isinstance(d, int) else None for d in shape)


def _bounded_input(graph: GraphInfo, where: str) -> None:
    """Refuse, before anything is sent (the warm-up included), a server whose metadata declares a fixed input
    larger than any picture SegLens would upload (app.guard.answers.check_declared_input's ceiling); a size that
    passes is bounded again by each picture (app.inference.image.pipeline.check_declared_size)."""
    for tensor in graph.inputs:
        try:
            check_declared_input(where, _dims(tensor.shape or ()), None)
        except AnswerRefused as exc:
            raise RemoteError(str(exc), kind="answer") from None


def _calls_of(target: RemoteTarget) -> Calls:
    """The target's calls; a CA bundle that is not there, or a client that cannot be made, one line (without the
    remote extra: MissingExtra's)."""
    need_extra(f"tritonclient.{target.protocol}", extra="remote", feature="remote inference")
    if target.ca_file is not None:  # tritonclient reads it itself: checked by the gate's rules first
        problem = untrusted_problem(target.ca_file, limit=SMALL_FILE_LIMIT)
        if problem is not None:
            raise RemoteError(f"{target.where}: the CA file {target.ca_file} is not a readable file (a PEM bundle): "
                              f"{problem}", kind="tls")
    try:
        return Calls(target.where, target.wire(), target.protocol)
    except Exception as exc:  # tritonclient checks some options when the client is made
        failure = classify(exc, timeout_s=target.timeout_s)
        raise RemoteError(f"{target.where}: {failure.what}", kind=failure.kind) from exc
