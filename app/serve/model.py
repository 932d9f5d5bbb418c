"""One ONNX model as KServe serves it: a session opened by SegLens's rules, its graph as v2 metadata, infer on a
worker thread with the server's compute time and device in every response.

Imported only after app.serve.kserve.load_kserve() (kserve's import-time argv parse, the decode patch).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from kserve import InferOutput, InferRequest, InferResponse, Model
from kserve.errors import InvalidInput

from app.errors import SegLensError, one_line
from app.inference.model.runtime_options import RuntimeOptions
from app.inference.model.session import SessionInfo
from app.inference.runtime.session import DeviceRequest, open_onnx_session

if TYPE_CHECKING:
    from app.inference.model.spec import ModelSpec

log = logging.getLogger(__name__)

PLATFORM = "onnxruntime_onnx"  # what Triton reports for an ONNX model (the client's auto-detection keys on it)
ORT_TO_V2 = {
    "tensor(bool)": "BOOL", "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16", "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64", "tensor(int8)": "INT8", "tensor(int16)": "INT16", "tensor(int32)": "INT32",
    "tensor(int64)": "INT64", "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64",
    "tensor(string)": "BYTES",
}


@dataclass(frozen=True)
class Tensor:
    """An input or output as the v2 metadata lists it: -1 for a dimension the graph leaves open."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


def graph_tensors(args: Any) -> list[Tensor]:
    """ORT's NodeArgs as v2 tensors (a symbolic or unknown dimension is -1; an unknown element type 'BYTES'
    would be a lie, so it is named as ORT names it)."""
    return [Tensor(a.name, ORT_TO_V2.get(a.type, a.type), tuple(d if isinstance(d, int) and d >= 0 else -1
                                                              for d in a.shape))
            for a in args]


class OnnxModel(Model):  # type: ignore[misc]  # kserve ships no type hints
    """A KServe model over one ONNX Runtime session; `ready` once the session is open and warmed up."""

    def __init__(self, name: str, path: Path, session: Any, info: SessionInfo) -> None:
        super().__init__(name)
        self.path = path
        self.info = info
        self._session = session
        self.inputs = graph_tensors(session.get_inputs())
        self.outputs = graph_tensors(session.get_outputs())
        self._datatypes = {t.name: t.datatype for t in self.outputs}
        self.ready = True

    @property
    def device_label(self) -> str:
        return self.info.provider_label

    def get_input_types(self) -> list[dict[str, Any]]:
        return [t.as_dict() for t in self.inputs]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [t.as_dict() for t in self.outputs]

    async def predict(self, payload: InferRequest, headers: dict[str, str] | None = None,
                      response_headers: dict[str, str] | None = None) -> InferResponse:
        """Run the request's inputs; ORT's refusal (a shape, a dtype, a missing input) is a 400 with its message,
        which keeps the client's keep-alive connection (a bare exception would be a 500 that closes it)."""
        if not isinstance(payload, InferRequest):  # KServe's v1 routes hand over a dict
            raise InvalidInput(f"{self.name}: serve speaks the v2 protocol: POST /v2/models/{self.name}/infer")
        feeds = self._feeds(payload)
        wanted = [o.name for o in payload.request_outputs] if payload.request_outputs else None
        started = time.perf_counter()
        try:  # on a thread: ORT releases the GIL, the event loop keeps answering health checks and other requests
            arrays = await asyncio.to_thread(self._session.run, wanted, feeds)
        except Exception as exc:  # ORT's InvalidArgument / Fail / RuntimeException: the request's fault here
            raise InvalidInput(f"{self.name}: {one_line(exc, most=500)}") from exc
        compute_us = int((time.perf_counter() - started) * 1e6)
        names = wanted or [t.name for t in self.outputs]
        outputs = []
        for name, array in zip(names, arrays, strict=True):
            output = InferOutput(name=name, shape=list(array.shape), datatype=self._datatypes[name])
            output.set_data_from_numpy(np.ascontiguousarray(array), binary_data=True)  # bytes; JSON only if asked
            outputs.append(output)
        return InferResponse(
            model_name=self.name, infer_outputs=outputs, response_id=payload.id or "",
            use_binary_outputs=payload.use_binary_outputs, requested_outputs=payload.request_outputs,
            parameters={"compute_us": compute_us, "seglens_device": self.device_label,
                        "seglens_fallback": self.info.fallback_reason or ""})

    def _feeds(self, payload: InferRequest) -> dict[str, np.ndarray]:
        feeds = {}
        for tensor in payload.inputs:
            try:
                feeds[tensor.name] = tensor.as_numpy()
            except InvalidInput:
                raise
            except (ValueError, TypeError) as exc:  # a byte count that does not fit the shape, a bad shape list
                raise InvalidInput(f"{self.name}: input '{tensor.name}' shape {tensor.shape} "
                                   f"{tensor.datatype}: {one_line(exc, most=300)}") from exc
        return feeds


def open_model(path: Path, device: DeviceRequest, *, runtime: RuntimeOptions, sidecar: Path | None = None,
               name: str | None = None) -> OnnxModel:
    """The served model for `path`: the session on `device` with the sidecar's runtime options under the
    command's, warmed up once on the image model's working shape (a graph SegLens has no spec for is served
    cold: its first request pays the warm-up)."""
    spec = _spec_or_none(path, sidecar)
    options = (spec.runtime if spec is not None else RuntimeOptions()).merged(runtime)
    session, info = open_onnx_session(path, device, runtime=options)
    if spec is not None:
        info = _warmed(spec, session, info)
    return OnnxModel(name or path.stem, path, session, info)


def _spec_or_none(path: Path, sidecar: Path | None) -> ModelSpec | None:
    from app.inference.model.builder import load_spec

    try:
        return load_spec(path, sidecar)
    except SegLensError as exc:
        if sidecar is not None:
            raise  # a sidecar given by name must be right
        log.debug("serve: no image-model spec for %s (%s): served without a warm-up run", path.name, exc)
        return None


def _warmed(spec: ModelSpec, session: Any, info: SessionInfo) -> SessionInfo:
    """SegLens's own warm-up (LocalSession.warm_up: zeros of the working shape), on the served session."""
    from app.inference.runtime.session import LocalSession

    try:
        return LocalSession(spec, session, info).warm_up()
    except SegLensError as exc:
        log.warning("serve: %s: the warm-up run failed (%s); the first request pays it", spec.path.name, exc)
        return info
