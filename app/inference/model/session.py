"""The model session seam: what every backend that runs a ModelSpec offers (`ModelSession`), and the records it
answers with — where it runs (`SessionInfo`, `RemoteInfo`) and one request's time beyond this process
(`RequestTiming`).

A backend is one more implementation of the protocol, not a branch in the faces: the local ONNX Runtime session
(app.inference.runtime.session.LocalSession) and a model on an Open Inference Protocol server
(app.inference.remote.session.RemoteSession) implement it today. The faces, the pipeline and the folder run hold
a `ModelSession` and call its members; none of them asks a session what it is (no `getattr`, no `hasattr`). Code
that needs the local session specifically (IOBinding, the on-device ArgMax, TensorRT) names LocalSession.

Threads: a session is opened, run and closed on one worker thread (the viewer's inference thread, the CLI's main
thread). `cancel` is the exception: any thread may call it, to end a run that the worker thread waits on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app.inference.model.spec import ModelSpec

__all__ = ["CPU", "CUDA", "NO_GPU", "TENSORRT", "ModelSession", "RemoteInfo", "RequestTiming", "SessionInfo",
           "warm_up_runs", "warmup_tensor"]

# ONNX Runtime's names of the providers a SessionInfo speaks of (app.inference.runtime.providers uses the same)
CPU, CUDA, TENSORRT = "CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider"
NO_GPU = "no NVIDIA GPU"  # the reason `auto` runs on the CPU on a machine without one: expected, not a fault
_NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8}


@dataclass(frozen=True)
class RemoteInfo:
    """Where a remote session's model runs (app.inference.remote.session): the server, and what it says about itself."""

    host: str  # "host:port"
    model: str
    version: str  # "" = the server's default
    platform: str  # the metadata's platform ("onnxruntime_onnx"), "" when it says none
    server_device: str | None = None  # the server's own session label ("CUDA (GPU 0)"), when its answers say it
    server_fallback: str | None = None  # why the server's session is not on its GPU, when it says so
    protocol: str = "grpc"  # "grpc" | "http" (binary tensors)
    tls: bool = False  # whether the connection is over TLS (https://, grpcs://)

    @property
    def where(self) -> str:
        """'remote host:port/model': what a message about the model starts with."""
        return f"remote {self.host}/{self.model}"

    @property
    def connection(self) -> str:
        """'over grpc (TLS)', 'over http': how the requests travel."""
        return f"over {self.protocol}{' (TLS)' if self.tls else ''}"

    @property
    def label(self) -> str:
        """'remote: host:port/model (platform, server device)': what a status bar, a summary and a record say."""
        about = ", ".join(part for part in (self.platform, self.server_device) if part)
        return f"remote: {self.host}/{self.model}" + (f" ({about})" if about else "")


@dataclass(frozen=True)
class SessionInfo:
    """Where the model really runs, and why not on the GPU when one was asked for."""

    requested: str
    provider: str  # the provider actually running the model (first of session.get_providers())
    providers: tuple[str, ...]
    fallback_reason: str | None = None  # set when a GPU was requested (or auto) but not obtained
    device_id: int | None = None
    gpu_present: bool | None = None  # whether an NVIDIA GPU was found (None: not looked for, as for `cpu`)
    load_ms: float = 0.0
    first_run_ms: float = 0.0
    warm_run_ms: float = 0.0
    ort_version: str = ""
    log_lines: tuple[str, ...] = field(default=(), repr=False)
    remote: RemoteInfo | None = None  # a remote session (app.inference.remote.session): on this machine, nothing runs
    notes: tuple[str, ...] = ()  # what the session says of itself once opened, one line each (an assumed activation)

    @property
    def on_gpu(self) -> bool:
        return self.remote is None and self.provider != CPU

    @property
    def provider_label(self) -> str:
        """'CUDA (GPU 0)', 'TensorRT (GPU 0)' or 'CPU' — what a status bar shows ('remote: host/model (…)')."""
        if self.remote is not None:
            return self.remote.label
        if self.provider in (CUDA, TENSORRT):
            return f"{'CUDA' if self.provider == CUDA else 'TensorRT'} (GPU {self.device_id or 0})"
        label = self.provider.removesuffix("ExecutionProvider")
        return f"{label} ({NO_GPU})" if self.gpu_present is False else label

    @property
    def fallback_warns(self) -> bool:
        """Whether not being on the GPU is news worth a warning: a GPU that is there but unusable, or CUDA asked
        for by name. `auto` on a machine without an NVIDIA GPU runs on the CPU as expected; its reason is still
        kept (`info`, the run record, doctor), just not raised as a warning."""
        if not self.fallback_reason:
            return False
        return self.requested.startswith("cuda") or self.gpu_present is not False


@dataclass(frozen=True)
class RequestTiming:
    """One request's time beyond this process: network+queue (the round trip less the serving side's compute)
    and the compute itself (None where the serving side does not say)."""

    network_ms: float
    compute_ms: float | None


class ModelSession(Protocol):
    """A ModelSpec's model, ready to run: on this machine (LocalSession) or elsewhere (RemoteSession).

    Every member but `cancel` is called on the worker thread that opened the session."""

    spec: ModelSpec
    """The spec the session answers to. A face may set an adjusted copy of it (a threshold, a score limit, tiles:
    app.inference.decide.tuning) — the same tensors go in and out; another model's spec is not."""

    @property
    def info(self) -> SessionInfo:
        """Where the model really runs (and why not on the GPU asked for); its warm-up latencies once warmed up.
        A remote session's info follows what the server's answers say of its device."""

    @property
    def in_flight(self) -> int:
        """How many requests a folder run may keep going at once on this session: 1 for a local one (its run
        holds the thread and the device), more for a server (requests wait on the network, not here)."""

    @property
    def timings(self) -> Sequence[RequestTiming]:
        """The latest requests' time beyond this process, oldest first (a bounded tail: a face reads the requests
        made since it looked, by their count). Empty for a local session: its time is the pipeline's `inference`
        stage (Result.timings), nothing is spent elsewhere."""

    def timing_line(self) -> str | None:
        """The requests' latency split in one line for a summary ('latency per request: network+queue 12.3 ms,
        server compute 4.5 ms (mean of N)'), None when there is nothing beyond the stage timings to say."""

    def run(self, tensor: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        """The model on one input tensor (4-D, or 5-D for a 3D model): its first output, or an anomaly model's
        tuple (map, score[, mask]) in the spec's order, each output checked against what the model declares. A
        failure is one line (InferenceError; RemoteError for a server), a cancelled run one of kind 'cancelled'."""

    def warm_up(self, *, measure_warm: bool = False) -> SessionInfo:
        """One run on zeros of the working shape (the first-run latency recorded in `info`); with `measure_warm`
        a second one records the warmed latency too. Returns the updated `info`."""

    def cancel(self) -> None:
        """From any thread: the run in flight (and any later one) ends soon with a 'cancelled' error, so that a
        thread waiting on it is freed — the session is being replaced or the window closes. Idempotent."""

    def close(self) -> None:
        """Let go of what the session holds (ONNX Runtime's session and its device memory, a server's
        connections). Idempotent; the session is not run afterwards."""


def warmup_tensor(spec: ModelSpec) -> np.ndarray:
    """Zeros of the working shape: one patch [1, C, D, H, W] for a 3D model, else [1, C, H, W] (or NHWC)."""
    tensor = spec.input
    if spec.volume is not None:
        return np.zeros((1, tensor.channels, *spec.volume.patch), dtype=_NUMPY_DTYPES[tensor.dtype])
    h, w = tensor.warmup_hw()
    shape = (1, tensor.channels, h, w) if tensor.layout == "NCHW" else (1, h, w, tensor.channels)
    return np.zeros(shape, dtype=_NUMPY_DTYPES[tensor.dtype])


def warm_up_runs(run: Callable[[np.ndarray], object], spec: ModelSpec, *, measure_warm: bool) -> tuple[float, float]:
    """A session's warm-up, timed: `run` on `spec`'s warm-up tensor once (the first-run ms), and with
    `measure_warm` once more (the warmed ms, else 0). What every implementation's `warm_up` records in its info."""
    tensor = warmup_tensor(spec)
    first = _timed_ms(run, tensor)
    return first, _timed_ms(run, tensor) if measure_warm else 0.0


def _timed_ms(run: Callable[[np.ndarray], object], tensor: np.ndarray) -> float:
    started = time.perf_counter()
    run(tensor)
    return (time.perf_counter() - started) * 1000
