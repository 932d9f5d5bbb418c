"""The one place an ONNX Runtime session is made: device request → providers → session → the truth.

`onnxruntime.get_available_providers()` only says what the wheel was built with, and a CUDA provider that
cannot start falls back to the CPU silently, leaving only C++ log lines on stderr. So a session here is
created with the process's stderr captured, `session.get_providers()` is checked afterwards, and when a GPU
was asked for but not obtained the captured reason is kept as data (`SessionInfo.fallback_reason`).

Create the session and call `run` from one long-lived thread (the viewer's worker, the CLI's main thread).
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from app.errors import InferenceError, ModelError, one_line
from app.guard.untrusted import MODEL_FILE_LIMIT, open_untrusted, read_untrusted
from app.inference.model.onnx_graph import TensorInfo
from app.inference.model.spec import ModelSpec
from app.inference.runtime import providers as provider_facts
from app.inference.runtime.finite import check_outputs, declared
from app.inference.runtime.options import DEVICE_LABELS_NAME, RuntimeOptions, with_device_argmax
from app.inference.runtime.providers import (
    CPU,
    CUDA,
    TENSORRT,
    capture_native_stderr,
    explain_cuda_failure,
    ort_packages_text,
    preload_cuda_libraries,
)

log = logging.getLogger(__name__)

NO_GPU = "no NVIDIA GPU"  # the reason `auto` runs on the CPU on a machine without one: expected, not a fault
_NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8}


@dataclass(frozen=True)
class DeviceRequest:
    """What the user asked for: `auto`, `cpu`, `cuda` or `cuda:N`."""

    kind: str  # "auto" | "cpu" | "cuda"
    device_id: int = 0

    @classmethod
    def parse(cls, text: str) -> DeviceRequest:
        value = (text or "auto").strip().lower()
        if value in ("auto", "cpu", "cuda", "gpu"):
            return cls("cuda" if value == "gpu" else value)
        match = re.fullmatch(r"(?:cuda|gpu):(\d+)", value)
        if match:
            return cls("cuda", int(match.group(1)))
        raise ValueError(f"unknown device {text!r} (expected auto, cpu, cuda or cuda:N)")

    def __str__(self) -> str:
        return f"cuda:{self.device_id}" if self.kind == "cuda" and self.device_id else self.kind


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


class ModelSession:
    """An ONNX Runtime session for one ModelSpec. Use it from the thread that created it.

    `open_session` warms it up (one run on zeros) unless asked not to: the viewer's worker skips that when an
    image is already waiting, whose own run is then the warm-up (one run sooner to the first overlay)."""

    def __init__(self, spec: ModelSpec, session: Any, info: SessionInfo, *,
                 binding_device: tuple[str, int] | None = None) -> None:
        self.spec = spec
        self.info = info
        self._session = session
        self._input_name = spec.input.name
        self._output_names = list(spec.output.fetched)  # the first output; an anomaly model's map, score, mask
        self._declared = tuple(declared(_output_info(spec, name), name) for name in self._output_names)
        self._binding_device = binding_device  # ("cuda", 0): outputs stay on that device until copied back

    @property
    def uses_io_binding(self) -> bool:
        return self._binding_device is not None

    def run(self, tensor: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run the model on one input tensor; returns the first output, or for an anomaly model the tuple of
        the outputs its spec names (map, score[, mask]). A 3D model takes 5-D [N, C, D, H, W] tensors, any other
        model 4-D ones: a tensor of the other rank is refused in one line (a 2D path given a 3D model). Each output
        is checked against its declared dtype and shape (app.guard.answers) before it is returned; finiteness is
        checked per image by its caller (pipeline, volume3d), so one broken image of a batch fails alone."""
        rank = 5 if self.spec.is_3d else 4
        if tensor.ndim != rank:
            what = "a 3D model (volumes, in patches)" if self.spec.is_3d else "a 2D image model"
            raise InferenceError(f"{self.spec.path.name}: {what} takes {rank}-D tensors, got {tensor.ndim}-D "
                                 f"{list(tensor.shape)}")
        try:
            outputs: list[np.ndarray]
            if self._binding_device is not None:
                outputs = self._run_bound(tensor, self._binding_device)
            else:
                outputs = self._session.run(self._output_names, {self._input_name: tensor})
        except Exception as exc:  # ORT raises its own Fail/InvalidArgument types
            why = one_line(exc, most=500, first=True)
            raise InferenceError(f"{self.spec.path.name}: inference failed: {why}") from exc
        check_outputs(self.spec.path.name, self._declared, outputs)  # a graph that lies about its output: refused
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _run_bound(self, tensor: np.ndarray, where: tuple[str, int]) -> list[np.ndarray]:
        """IOBinding: the outputs are allocated on the device and copied back once, after the graph ran."""
        binding = self._session.io_binding()
        binding.bind_cpu_input(self._input_name, tensor)
        device, device_id = where
        for name in self._output_names:
            binding.bind_output(name, device, device_id)
        self._session.run_with_iobinding(binding)
        outputs: list[np.ndarray] = binding.copy_outputs_to_cpu()
        return outputs

    def warm_up(self, *, measure_warm: bool = False) -> SessionInfo:
        """One run on a zero tensor of the working shape (records first-run latency); with `measure_warm`, a
        second run records the warmed latency too (the viewer skips it: it would delay the first overlay)."""
        tensor = self.warmup_tensor()
        started = time.perf_counter()
        self.run(tensor)
        first = (time.perf_counter() - started) * 1000
        warm = 0.0
        if measure_warm:
            started = time.perf_counter()
            self.run(tensor)
            warm = (time.perf_counter() - started) * 1000
        self.info = replace(self.info, first_run_ms=first, warm_run_ms=warm)
        return self.info

    def warmup_tensor(self) -> np.ndarray:
        """Zeros of the working shape: one patch [1, C, D, H, W] for a 3D model, else [1, C, H, W] (or NHWC)."""
        spec = self.spec.input
        if self.spec.volume is not None:
            return np.zeros((1, spec.channels, *self.spec.volume.patch), dtype=_NUMPY_DTYPES[spec.dtype])
        h, w = spec.warmup_hw()
        shape = (1, spec.channels, h, w) if spec.layout == "NCHW" else (1, h, w, spec.channels)
        return np.zeros(shape, dtype=_NUMPY_DTYPES[spec.dtype])


def _output_info(spec: ModelSpec, name: str) -> TensorInfo | None:
    """What the graph declares of output `name`; the on-device ArgMax's labels are the first output's shape with
    one channel, uint8 (runtime.with_device_argmax), which the spec's graph outputs do not list."""
    found = next((info for info in spec.outputs if info.name == name), None)
    if found is not None or name != DEVICE_LABELS_NAME or not spec.outputs:
        return found
    first, axis = spec.outputs[0], spec.output.channel_axis
    shape = first.shape
    if shape is not None and axis is not None and -len(shape) <= axis < len(shape):
        shape = tuple(1 if i == axis % len(shape) else d for i, d in enumerate(shape))
    return TensorInfo(name, shape, "uint8")


def open_session(
    spec: ModelSpec,
    device: str | DeviceRequest = "auto",
    *,
    runtime: dict[str, Any] | RuntimeOptions | None = None,
    warm_up: bool = True,
) -> ModelSession:
    """Create (and by default warm up) a session for `spec` on the requested device, telling the truth.

    `runtime` (CLI or settings values) overrides the sidecar's `runtime:` section, which overrides defaults.
    """
    import onnxruntime as ort

    request = device if isinstance(device, DeviceRequest) else DeviceRequest.parse(device)
    options = runtime if isinstance(runtime, RuntimeOptions) else RuntimeOptions().merged(spec.runtime).merged(
        runtime or {})
    available = ort.get_available_providers()
    gpu_present = None
    if request.kind != "cpu" and CUDA in available:
        gpu_present = provider_facts.detect_nvidia_gpu() is not None
    # `auto` without an NVIDIA GPU does not try CUDA (nor load its libraries); `cuda` asked by name always tries
    wants_gpu = CUDA in available and (request.kind == "cuda" or (request.kind == "auto" and gpu_present is True))
    preload_notes = preload_cuda_libraries(ort) if wants_gpu else []
    providers = options.providers(gpu=wants_gpu, device_id=request.device_id, available=available,
                                  model_path=spec.path)
    session, spec, load_ms, log_lines = _create_with_argmax(ort, spec, providers, options)
    active = tuple(session.get_providers())
    on_gpu = active[0] != CPU
    reason = _fallback_reason(request, available, on_gpu=on_gpu, wants_gpu=wants_gpu, gpu_present=gpu_present,
                              lines=list(log_lines) + preload_notes)
    info = SessionInfo(
        requested=str(request), provider=active[0], providers=active, fallback_reason=reason,
        device_id=request.device_id if on_gpu else None, gpu_present=gpu_present, load_ms=load_ms,
        ort_version=ort.__version__, log_lines=log_lines,
    )
    if reason and request.kind == "cuda":
        log.info("CUDA was requested for %s but the session runs on %s: %s",
                 spec.path.name, info.provider_label, reason)
    binding = None
    if options.wants_io_binding(on_gpu=on_gpu, fixed_shape=not spec.input.dynamic_hw):
        binding = ("cuda", request.device_id) if on_gpu else ("cpu", 0)
    model = ModelSession(spec, session, info, binding_device=binding)
    if warm_up:
        model.warm_up()
    return model


def open_onnx_session(path: Path, device: str | DeviceRequest = "auto", *,
                      runtime: dict[str, Any] | RuntimeOptions | None = None) -> tuple[Any, SessionInfo]:
    """A plain ONNX Runtime session for a file that is not an image model's ModelSpec (a prompt model's encoder
    or decoder): the same providers and the same truth about where it runs (a CPU fallback's reason kept in
    `SessionInfo.fallback_reason`, as `open_session` keeps it). Returns (the InferenceSession, its info)."""
    import onnxruntime as ort

    request = device if isinstance(device, DeviceRequest) else DeviceRequest.parse(device)
    options = runtime if isinstance(runtime, RuntimeOptions) else RuntimeOptions().merged(runtime or {})
    available = ort.get_available_providers()
    gpu_present = None
    if request.kind != "cpu" and CUDA in available:
        gpu_present = provider_facts.detect_nvidia_gpu() is not None
    wants_gpu = CUDA in available and (request.kind == "cuda" or (request.kind == "auto" and gpu_present is True))
    preload_notes = preload_cuda_libraries(ort) if wants_gpu else []
    providers = options.providers(gpu=wants_gpu, device_id=request.device_id, available=available, model_path=path)
    session, load_ms, log_lines = _create(ort, path, _model_source(path), providers, options)
    active = tuple(session.get_providers())
    on_gpu = active[0] != CPU
    reason = _fallback_reason(request, available, on_gpu=on_gpu, wants_gpu=wants_gpu, gpu_present=gpu_present,
                              lines=list(log_lines) + preload_notes)
    info = SessionInfo(requested=str(request), provider=active[0], providers=active, fallback_reason=reason,
                       device_id=request.device_id if on_gpu else None, gpu_present=gpu_present, load_ms=load_ms,
                       ort_version=ort.__version__, log_lines=log_lines)
    return session, info


def _create_with_argmax(ort: Any, spec: ModelSpec, providers: list[Any], options: RuntimeOptions,
                        ) -> tuple[Any, ModelSpec, float, tuple[str, ...]]:
    """The session, with the in-graph ArgMax where wanted: `on` always; `auto` once the session is known to run
    on a GPU (then it is created a second time). Returns (session, spec it answers to, load ms, log lines)."""
    fixed = not spec.input.dynamic_hw
    # tiles (2D) and patches (3D) blend scores, not labels
    scores = spec.output.kind == "scores" and spec.input.resize != "tile" and not spec.is_3d
    if options.wants_device_argmax(on_gpu=False, fixed_shape=fixed, scores=scores):  # "on": even on the CPU
        source, spec = _device_argmax(spec)
        session, load_ms, log_lines = _create(ort, spec.path, source, providers, options)
        return session, spec, load_ms, log_lines
    session, load_ms, log_lines = _create(ort, spec.path, _model_source(spec.path), providers, options)
    on_gpu = session.get_providers()[0] != CPU
    if on_gpu and options.wants_device_argmax(on_gpu=True, fixed_shape=fixed, scores=scores):
        source, spec = _device_argmax(spec)
        session, load_ms, log_lines = _create(ort, spec.path, source, providers, options)
    return session, spec, load_ms, log_lines


def _fallback_reason(request: DeviceRequest, available: list[str], *, on_gpu: bool, wants_gpu: bool,
                     gpu_present: bool | None, lines: list[str]) -> str | None:
    """Why the session is not on the GPU that `auto` or `cuda` asked for (None when it is, or for `cpu`)."""
    if request.kind == "cuda" and CUDA not in available:
        return f"this onnxruntime build has no CUDA provider (installed: {ort_packages_text()})"
    if request.kind == "auto" and gpu_present is False:
        return NO_GPU
    if wants_gpu and not on_gpu:
        cause = explain_cuda_failure(lines)
        return f"{NO_GPU} on this machine (and {cause})" if gpu_present is False else cause
    return None


def _create(ort: Any, path: Path, source: str | bytes, providers: list[Any], options: RuntimeOptions,
            ) -> tuple[Any, float, tuple[str, ...]]:
    """InferenceSession with ORT's native log captured: (session, load ms, log lines). The file is opened by the
    untrusted gate first, non-blocking, and held open while ONNX Runtime loads it (a FIFO or a device named as a
    model would hold ORT's read for ever). ORT is still handed the path, not the bytes: from memory it cannot find
    a model's external data files beside it, and a 2 GB model would be held twice (tests/house ALLOWED says so)."""
    try:
        guard = open_untrusted(path, limit=MODEL_FILE_LIMIT)
    except OSError as exc:
        raise ModelError(f"{path}: {'file not found' if isinstance(exc, FileNotFoundError) else exc.strerror}") from exc
    with guard:
        return _create_session(ort, path, source, providers, options)


def _create_session(ort: Any, path: Path, source: str | bytes, providers: list[Any], options: RuntimeOptions,
                    ) -> tuple[Any, float, tuple[str, ...]]:
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if options.intra_op_threads > 0:
        session_options.intra_op_num_threads = options.intra_op_threads
    if not options.allow_spinning:
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    started = time.perf_counter()
    with capture_native_stderr() as captured, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            session = ort.InferenceSession(source, sess_options=session_options, providers=providers)
        except Exception as exc:
            why = one_line(exc, most=500, first=True)
            raise ModelError(f"{path}: ONNX Runtime cannot load the model: {why}") from exc
    load_ms = (time.perf_counter() - started) * 1000
    log_lines = tuple(captured.lines) + tuple(str(w.message) for w in caught)
    for line in log_lines:
        log.debug("onnxruntime: %s", line)
    return session, load_ms, log_lines


def _device_argmax(spec: ModelSpec) -> tuple[bytes, ModelSpec]:
    """The model with an in-graph ArgMax, and the spec that reads its uint8 label output."""
    out = spec.output
    labels = replace(out, name=DEVICE_LABELS_NAME, kind="labels", activation="none")
    # asked for only for a scores output (wants_device_argmax), which has its channel axis
    return with_device_argmax(spec.path, cast(int, out.channel_axis)), replace(spec, output=labels)


def _model_source(path: Path) -> str | bytes:
    """What InferenceSession is given: the path, or the file's bytes where the path is not valid UTF-8 (Linux file
    names are bytes; ONNX Runtime takes a UTF-8 string and refused such a path with a pybind11 error). Such a
    model's external data files, if it has any, are not found from memory: it says so in its one line."""
    text = str(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return read_untrusted(path, limit=MODEL_FILE_LIMIT)
