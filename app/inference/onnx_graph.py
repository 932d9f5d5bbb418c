"""Read what an ONNX file says about itself: inputs, outputs, metadata and the op that ends each output.

Only the `onnx` protobuf reader is used here (no session), so `seglens-cli info` can describe a model that
ONNX Runtime would refuse, and the spec can tell "the graph already ends in Sigmoid" from "it outputs logits".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.errors import ModelError

# Ops that don't change what an output *means*; we look through them to find the op that made it.
_PASS_THROUGH = {"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Flatten", "Resize",
                 "Upsample", "Slice", "Pad"}

_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
           10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16", 4: "uint16"}

Dim = int | str | None  # fixed size, symbolic name, or unknown


@dataclass(frozen=True)
class TensorInfo:
    """One graph input or output as declared in the file."""

    name: str
    shape: tuple[Dim, ...] | None  # None: not a tensor, or rank unknown
    dtype: str

    def describe(self) -> str:
        dims = "?" if self.shape is None else ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}[{dims}] {self.dtype}"


@dataclass(frozen=True)
class GraphInfo:
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    metadata: dict[str, str]
    final_ops: dict[str, str]  # output name -> op type that produced it (looking through pass-through ops)
    argmax_channels: dict[str, int]  # output name -> size of the axis an ArgMax reduced, when known
    opset: int | None
    producer: str


def read_graph(path: Path) -> GraphInfo:
    """Parse the ONNX file at `path` without loading external weights."""
    import onnx  # deferred: a few hundred ms of import the viewer must not pay before its window shows

    if not path.is_file():
        raise ModelError(f"{path}: model file not found")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and friends; all mean "not ONNX"
        raise ModelError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {exc})") from exc
    graph = model.graph
    if not graph.output:
        raise ModelError(f"{path}: not a valid ONNX model (the graph declares no outputs)")
    initializers = {init.name for init in graph.initializer}
    inputs = tuple(_tensor_info(v) for v in graph.input if v.name not in initializers)
    outputs = tuple(_tensor_info(v) for v in graph.output)
    producers = {out: node for node in graph.node for out in node.output}
    final_ops = {o.name: _final_op(o.name, producers) for o in outputs}
    opset = next((imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")), None)
    return GraphInfo(
        inputs=inputs,
        outputs=outputs,
        metadata={p.key: p.value for p in model.metadata_props},
        final_ops=final_ops,
        argmax_channels=_argmax_channels(model, outputs, producers, final_ops),
        opset=opset,
        producer=f"{model.producer_name} {model.producer_version}".strip(),
    )


def _tensor_info(value) -> TensorInfo:
    ttype = value.type.tensor_type
    dtype = _DTYPES.get(ttype.elem_type, f"type{ttype.elem_type}")
    if not ttype.HasField("shape"):
        return TensorInfo(value.name, None, dtype)
    dims: list[Dim] = []
    for d in ttype.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorInfo(value.name, tuple(dims), dtype)


def _final_op(name: str, producers: dict) -> str:
    node = producers.get(name)
    seen = 0
    while node is not None and node.op_type in _PASS_THROUGH and node.input and seen < 32:
        node = producers.get(node.input[0])
        seen += 1
    return node.op_type if node is not None else "Input"


def _argmax_channels(model, outputs, producers, final_ops) -> dict[str, int]:
    """For outputs made by ArgMax, the size of the reduced axis (= number of classes) via shape inference."""
    wanted = [o.name for o in outputs if final_ops.get(o.name) == "ArgMax"]
    if not wanted:
        return {}
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # shape inference is best-effort; the class count then stays unknown
        return {}
    shapes = {v.name: _tensor_info(v).shape for v in
              list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    found: dict[str, int] = {}
    for name in wanted:
        node = producers.get(name)
        while node is not None and node.op_type != "ArgMax":
            node = producers.get(node.input[0])
        if node is None:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        shape = shapes.get(node.input[0])
        if shape and -len(shape) <= axis < len(shape) and isinstance(shape[axis], int):
            found[name] = shape[axis]
    return found
