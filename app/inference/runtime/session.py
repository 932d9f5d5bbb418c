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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from app.errors import InferenceError, ModelError, one_line
from app.guard.untrusted import MODEL_FILE_LIMIT, open_untrusted, read_untrusted
from app.inference.model.onnx_graph import TensorInfo
from app.inference.model.runtime_options import RuntimeOptions
from app.inference.model.session import NO_GPU, RequestTiming, SessionInfo, warm_up_runs, warmup_tensor
from app.inference.model.spec import ModelSpec
from app.inference.runtime import providers as provider_facts
from app.inference.runtime.finite import check_outputs, declared
from app.inference.runtime.options import DEVICE_LABELS_NAME, providers_for, with_device_argmax
from app.inference.runtime.providers import (
    CPU,
    CUDA,
    capture_native_stderr,
    explain_cuda_failure,
    ort_packages_text,
    preload_cuda_libraries,
)

if TYPE_CHECKING:
    from app.inference.model.session import ModelSession

log = logging.getLogger(__name__)

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


class LocalSession:
    """The ModelSession on this machine (app.inference.model.session): an ONNX Runtime session for one ModelSpec,
    used from the thread that created it. What only a local session has is here and in `open_session`: IOBinding,
    the on-device ArgMax's labels, the providers (TensorRT, CUDA) that really run it.

    `open_session` warms it up (one run on zeros) unless asked not to: the viewer's worker skips that when an
    image is already waiting, whose own run is then the warm-up (one run sooner to the first overlay)."""

    in_flight = 1  # a run holds this thread and the device: a folder run keeps one going
    timings: tuple[RequestTiming, ...] = ()  # nothing is spent beyond this process: the stage timings say it all

    def __init__(self, spec: ModelSpec, session: Any, info: SessionInfo, *,
                 binding_device: tuple[str, int] | None = None) -> None:
        self.info = info
        self._session = session
        self._binding_device = binding_device  # ("cuda", 0): outputs stay on that device until copied back
        self.spec = spec

    @property
    def spec(self) -> ModelSpec:
        return self._spec

    @spec.setter
    def spec(self, spec: ModelSpec) -> None:
        """The spec, and what a run derives from it (input name, fetched outputs and their declared types)."""
        self._spec, self._input_name = spec, spec.input.name
        self._output_names = list(spec.output.fetched)  # the first output; an anomaly model's map, score, mask
        self._declared = tuple(declared(_output_info(spec, name), name) for name in self._output_names)

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
        if self._session is None:
            raise InferenceError(f"{self.spec.path.name}: the session was closed")
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
        first, warm = warm_up_runs(self.run, self.spec, measure_warm=measure_warm)
        self.info = replace(self.info, first_run_ms=first, warm_run_ms=warm)
        return self.info

    def warmup_tensor(self) -> np.ndarray:
        """Zeros of the working shape: one patch [1, C, D, H, W] for a 3D model, else [1, C, H, W] (or NHWC)."""
        return warmup_tensor(self.spec)

    def timing_line(self) -> str | None:
        """None: a local run's time is the pipeline's stage timings, which the faces show already."""
        return None

    def cancel(self) -> None:
        """A no-op: a local run is not cut short. It holds the worker thread for one tensor (a tile, a batch of
        patches), and what is queued behind it (a model switch, the close) waits that long; ending it instead would
        turn the rest of a Run on all into error rows, where the run now finishes with the model it began with."""

    def close(self) -> None:
        """ONNX Runtime's session let go: its memory (a GPU's too) is freed once no copy of this session (a tuned
        one: app.ui.workers.worker_batch.tuned) holds it either. A later run is refused in one line."""
        self._session = None


if TYPE_CHECKING:
    _IMPLEMENTS: type[ModelSession] = LocalSession  # mypy (.ci/run) proves LocalSession is a ModelSession


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
    runtime: RuntimeOptions | None = None,
    warm_up: bool = True,
) -> LocalSession:
    """Create (and by default warm up) a session for `spec` on the requested device, telling the truth.

    `runtime` (CLI or settings values) overrides the sidecar's `runtime:` section, which overrides defaults.
    """
    import onnxruntime as ort

    request = device if isinstance(device, DeviceRequest) else DeviceRequest.parse(device)
    options = spec.runtime.merged(runtime)
    available = ort.get_available_providers()
    gpu_present = None
    if request.kind != "cpu" and CUDA in available:
        gpu_present = provider_facts.detect_nvidia_gpu() is not None
    # `auto` without an NVIDIA GPU does not try CUDA (nor load its libraries); `cuda` asked by name always tries
    wants_gpu = CUDA in available and (request.kind == "cuda" or (request.kind == "auto" and gpu_present is True))
    preload_notes = preload_cuda_libraries(ort) if wants_gpu else []
    providers = providers_for(options, gpu=wants_gpu, device_id=request.device_id, available=available,
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
    model = LocalSession(spec, session, info, binding_device=binding)
    if warm_up:
        model.warm_up()
    return model


def open_onnx_session(path: Path, device: str | DeviceRequest = "auto", *,
                      runtime: RuntimeOptions | None = None) -> tuple[Any, SessionInfo]:
    """A plain ONNX Runtime session for a file that is not an image model's ModelSpec (a prompt model's encoder
    or decoder): the same providers and the same truth about where it runs (a CPU fallback's reason kept in
    `SessionInfo.fallback_reason`, as `open_session` keeps it). Returns (the InferenceSession, its info)."""
    import onnxruntime as ort

    request = device if isinstance(device, DeviceRequest) else DeviceRequest.parse(device)
    options = runtime or RuntimeOptions()
    available = ort.get_available_providers()
    gpu_present = None
    if request.kind != "cpu" and CUDA in available:
        gpu_present = provider_facts.detect_nvidia_gpu() is not None
    wants_gpu = CUDA in available and (request.kind == "cuda" or (request.kind == "auto" and gpu_present is True))
    preload_notes = preload_cuda_libraries(ort) if wants_gpu else []
    providers = providers_for(options, gpu=wants_gpu, device_id=request.device_id, available=available,
                              model_path=path)
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
