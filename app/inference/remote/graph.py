"""A remote model's metadata (`v2/models/<m>` of the Open Inference Protocol) as the GraphInfo an ONNX file gives,
so app.inference.model.builder detects a remote model by the same rules as a local one. The name such a model goes
by ("remote host:port/model") is app.inference.remote.name's, re-exported here.

What the wire cannot tell, and where it comes from instead:
- the op that ends each output (Sigmoid, Softmax, ArgMax): unknown, so the activation is the default unless the
  sidecar gives `output.activation` (`activation_note` says so in one line);
- an ArgMax's class count and the ONNX metadata (class names): the sidecar's `classes`;
- symbolic dimension names: a `-1` is a dynamic dimension, shown as `?`.
No tritonclient here: the metadata arrives as a plain dict (app.inference.remote.transport).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from app.errors import ModelError
from app.inference.model.onnx_graph import Dim, GraphInfo, TensorInfo
from app.inference.remote.name import REMOTE_PREFIX, is_remote_path, remote_path

__all__ = ["MAX_RANK", "MAX_TENSORS", "ONNX_TO_V2", "REMOTE_PREFIX", "V2_TO_ONNX", "activation_note",
           "graph_from_metadata", "is_remote_path", "metadata_sha256", "remote_path"]

MAX_TENSORS = 64  # a hostile server's metadata is refused before anything is made per tensor
MAX_RANK = 8

# the protocol's datatypes (KServe v2 / Triton) and the ONNX element type names of onnx_graph
V2_TO_ONNX = {"BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
              "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64", "FP16": "float16",
              "FP32": "float32", "FP64": "float64", "BF16": "bfloat16", "BYTES": "string"}
ONNX_TO_V2 = {onnx: v2 for v2, onnx in V2_TO_ONNX.items()}


def graph_from_metadata(metadata: Mapping[str, Any], where: str) -> GraphInfo:
    """The GraphInfo of a model's v2 metadata (`{name, versions, platform, inputs, outputs}`, each tensor
    `{name, datatype, shape}` with -1 for a dynamic dimension); `where` ("remote host/model") starts its errors."""
    if not isinstance(metadata, Mapping):
        raise ModelError(f"{where}: the server's model metadata is not a JSON object")
    inputs = _tensors(metadata.get("inputs"), "inputs", where)
    outputs = _tensors(metadata.get("outputs"), "outputs", where)
    if not outputs:
        raise ModelError(f"{where}: the server's model metadata declares no outputs")
    return GraphInfo(inputs=inputs, outputs=outputs, metadata={}, final_ops={}, argmax_channels={}, opset=None,
                     producer="")


def metadata_sha256(inputs: tuple[TensorInfo, ...], outputs: tuple[TensorInfo, ...], identity: str) -> str:
    """What stands for a remote model's file hash in a run record: the server, the model and what its metadata
    declares (a model replaced on the server with other tensors is another model; the same tensors are not told
    apart: the wire carries no hash of the weights)."""
    declared = {"model": identity, "inputs": [t.describe() for t in inputs],
                "outputs": [t.describe() for t in outputs]}
    return hashlib.sha256(json.dumps(declared, sort_keys=True).encode("utf-8")).hexdigest()


def activation_note(where: str, output_kind: str, sources: Mapping[str, str]) -> str | None:
    """One line when the activation was assumed: the wire does not say whether the graph ends in it already."""
    if output_kind not in ("binary", "scores", "classification") or sources.get("output.activation") == "sidecar":
        return None
    return (f"{where}: the server's metadata does not say whether the model ends in its activation (Sigmoid / "
            "Softmax); the default is assumed: give output.activation in a sidecar if it does")


def _tensors(value: Any, key: str, where: str) -> tuple[TensorInfo, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_TENSORS:
        raise ModelError(f"{where}: the server's model metadata has no list of {key} (at most {MAX_TENSORS})")
    return tuple(_tensor(item, key, where) for item in value)


def _tensor(item: Any, key: str, where: str) -> TensorInfo:
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        raise ModelError(f"{where}: one of the server's {key} has no name")
    name, datatype, shape = item["name"], item.get("datatype"), item.get("shape")
    if not isinstance(datatype, str) or not isinstance(shape, list) or len(shape) > MAX_RANK:
        raise ModelError(f"{where}: the server's metadata of {key[:-1]} {name[:80]!r} has no datatype or shape")
    return TensorInfo(name, tuple(_dim(d, name, where) for d in shape), V2_TO_ONNX.get(datatype, datatype.lower()))


def _dim(value: Any, name: str, where: str) -> Dim:
    """A dimension: an int, or a string holding one (gRPC's JSON form); -1 (any negative) is dynamic."""
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: the server's shape of {name[:80]!r} holds {str(value)[:20]!r}, not a "
                         "number") from None
    return size if size > 0 else None
