"""Read what an ONNX file says about itself: inputs, outputs, metadata and the op that ends each output.

The file is parsed directly (no session), so `seglens-cli info` can describe a model that
ONNX Runtime would refuse, and the spec can tell "the graph already ends in Sigmoid" from "it outputs logits".
It is parsed by hand (protobuf's wire format, below) rather than with the `onnx` package because that import
sits on the viewer's path to its first overlay: `import onnx` + `onnx.load` take 90–115 ms here, `read_graph`
23–27 ms including its own import (surface_defects.onnx, 2 cores, warm disk cache, .pyc compiled).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ModelError
from app.guard.untrusted import read_untrusted, untrusted_problem

# Ops that don't change what an output *means*; we look through them to find the op that made it.
_PASS_THROUGH = {"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Flatten", "Resize",
                 "Upsample", "Slice", "Pad"}

GRAPH_FILE_LIMIT = 2 << 30  # protobuf's limit on one message: an ONNX file past it cannot be a graph

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
    """Parse the ONNX file at `path` without loading external weights.

    The file is read with a small protobuf wire-format reader (below) that decodes only the fields needed
    here and skips weights by their length (see the module's docstring for why). The `onnx` package is still
    used for shape inference, only for graphs that end in ArgMax.
    """
    # a FIFO is no missing file ("not a regular file: a named pipe (FIFO)"); a graph is one protobuf message, which
    # protobuf caps at 2 GiB (weights past it live in external data): a bigger file is refused before it is read
    problem = untrusted_problem(path, limit=GRAPH_FILE_LIMIT)
    if problem is not None:
        raise ModelError(f"{path}: {'model file not found' if problem == 'file not found' else problem}")
    try:
        data = read_untrusted(path, limit=GRAPH_FILE_LIMIT)  # a FIFO swapped in after the check: refused
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the model file ({exc.strerror or exc})") from exc
    try:
        model = _parse_model(memoryview(data))
    except _WireError as exc:
        raise ModelError(f"{path}: not a valid ONNX model ({exc})") from None
    graph = model["graph"]
    if graph is None:
        raise ModelError(f"{path}: not a valid ONNX model (the file holds no graph)")
    if not graph["outputs"]:
        raise ModelError(f"{path}: not a valid ONNX model (the graph declares no outputs)")
    initializers = graph["initializers"]
    inputs = tuple(v for v in graph["inputs"] if v.name not in initializers)
    outputs = tuple(graph["outputs"])
    producers = {out: node for node in graph["nodes"] for out in node.outputs}
    final_ops = {o.name: _final_op(o.name, producers) for o in outputs}
    return GraphInfo(
        inputs=inputs,
        outputs=outputs,
        metadata=model["metadata"],
        final_ops=final_ops,
        argmax_channels=_argmax_channels(data, outputs, final_ops),
        opset=model["opset"],
        producer=f"{model['producer_name']} {model['producer_version']}".strip(),
    )


def _final_op(name: str, producers: Mapping[str, _Node]) -> str:
    node = producers.get(name)
    seen = 0
    while node is not None and node.op_type in _PASS_THROUGH and node.inputs and seen < 32:
        node = producers.get(node.inputs[0])
        seen += 1
    return node.op_type if node is not None else "Input"


def _argmax_channels(data: bytes, outputs: Sequence[TensorInfo], final_ops: Mapping[str, str]) -> dict[str, int]:
    """For outputs made by ArgMax, the size of the reduced axis (= number of classes) via shape inference, on the
    bytes read_graph read already (the path is not opened a second time)."""
    wanted = [o.name for o in outputs if final_ops.get(o.name) == "ArgMax"]
    if not wanted:
        return {}
    import onnx  # only for graphs ending in ArgMax: shape inference is what says how many classes it reduced

    try:
        model = onnx.load_model_from_string(data)
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # shape inference is best-effort; the class count then stays unknown
        return {}
    shapes = {v.name: _onnx_tensor_shape(v) for v in
              list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    producers = {out: node for node in inferred.graph.node for out in node.output}
    found: dict[str, int] = {}
    for name in wanted:
        node = producers.get(name)
        while node is not None and node.op_type != "ArgMax":
            node = producers.get(node.input[0])
        if node is None:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        shape = shapes.get(node.input[0])
        size = shape[axis] if shape and -len(shape) <= axis < len(shape) else None
        if isinstance(size, int):
            found[name] = size
    return found


def _onnx_tensor_shape(value: Any) -> tuple[Dim, ...] | None:  # an onnx ValueInfoProto
    ttype = value.type.tensor_type
    if not ttype.HasField("shape"):
        return None
    return tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None for d in ttype.shape.dim)


Span = tuple[int, int]  # (start, end) of a LEN field's bytes
Value = int | Span  # a field's value: a number, or where its bytes are

# -- protobuf wire format ------------------------------------------------------------------------------
# Field numbers from onnx/onnx.proto (stable since IR version 3). Only what GraphInfo needs is decoded.

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


class _WireError(ValueError):
    pass


@dataclass(frozen=True)
class _Node:
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _fields(buf: memoryview, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, Value]]:
    """Yield (field number, wire type, value) of one message; value: int, or (start, end) of a LEN field."""
    pos, end = start, len(buf) if end is None else end
    while pos < end:
        key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        value: Value
        if field == 0:
            raise _WireError(f"field number 0 at byte {pos}")
        if wire == _VARINT:
            value, pos = _varint(buf, pos, end)
        elif wire == _LEN:
            size, pos = _varint(buf, pos, end)
            if pos + size > end:
                raise _WireError(f"a field runs past the end of its message at byte {pos}")
            value, pos = (pos, pos + size), pos + size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            if pos + width > end:
                raise _WireError(f"truncated at byte {pos}")
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise _WireError(f"unsupported wire type {wire} at byte {pos}")
        yield field, wire, value


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _WireError(f"truncated or overlong number at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _str(buf: memoryview, span: Value) -> str:
    if not isinstance(span, tuple):
        raise _WireError("a text field has the wrong wire type")
    try:
        return bytes(buf[span[0] : span[1]]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _WireError(f"a text field is not UTF-8 at byte {span[0] + exc.start}") from None


def _sub(buf: memoryview, span: Value, what: str) -> Iterator[tuple[int, int, Value]]:
    if not isinstance(span, tuple):
        raise _WireError(f"{what} has the wrong wire type")
    return _fields(buf, *span)


def _parse_model(buf: memoryview) -> dict[str, Any]:
    model: dict[str, Any] = {"graph": None, "metadata": {}, "opset": None, "producer_name": "", "producer_version": ""}
    for field, _wire, value in _fields(buf):
        if field == 7:  # graph
            model["graph"] = _parse_graph(buf, value)
        elif field == 8:  # opset_import: OperatorSetIdProto {domain = 1, version = 2}
            domain, version = "", None
            for f, _w, v in _sub(buf, value, "opset_import"):
                if f == 1:
                    domain = _str(buf, v)
                elif f == 2 and isinstance(v, int):
                    version = v
            if domain in ("", "ai.onnx") and model["opset"] is None:
                model["opset"] = version
        elif field in (2, 3):  # producer_name, producer_version
            model["producer_name" if field == 2 else "producer_version"] = _str(buf, value)
        elif field == 14:  # metadata_props: StringStringEntryProto {key = 1, value = 2}
            entry = {1: "", 2: ""}
            for f, _w, v in _sub(buf, value, "metadata_props"):
                if f in entry:
                    entry[f] = _str(buf, v)
            model["metadata"][entry[1]] = entry[2]
    return model


def _parse_graph(buf: memoryview, span: Value) -> dict[str, Any]:
    graph: dict[str, Any] = {"nodes": [], "initializers": set(), "inputs": [], "outputs": []}
    for field, _wire, value in _sub(buf, span, "graph"):
        if field == 1:  # node
            graph["nodes"].append(_parse_node(buf, value))
        elif field in (5, 15):  # initializer (TensorProto, name = 8); sparse_initializer (values = 1)
            graph["initializers"].add(_initializer_name(buf, value, sparse=field == 15))
        elif field in (11, 12):  # input, output: ValueInfoProto
            graph["inputs" if field == 11 else "outputs"].append(_parse_value_info(buf, value))
    return graph


def _initializer_name(buf: memoryview, span: Value, sparse: bool) -> str:
    for f, _w, v in _sub(buf, span, "initializer"):
        if sparse and f == 1:
            return _initializer_name(buf, v, sparse=False)
        if not sparse and f == 8:
            return _str(buf, v)
    return ""


def _parse_node(buf: memoryview, span: Value) -> _Node:
    inputs: list[str] = []
    outputs: list[str] = []
    op_type = ""
    for f, _w, v in _sub(buf, span, "node"):
        if f == 1:
            inputs.append(_str(buf, v))
        elif f == 2:
            outputs.append(_str(buf, v))
        elif f == 4:
            op_type = _str(buf, v)
    return _Node(op_type, tuple(inputs), tuple(outputs))


def _parse_value_info(buf: memoryview, span: Value) -> TensorInfo:
    """ValueInfoProto {name = 1, type = 2: TypeProto {tensor_type = 1: {elem_type = 1, shape = 2}}}."""
    name, elem_type, is_tensor = "", 0, False
    shape: tuple[Dim, ...] | None = None
    for f, _w, v in _sub(buf, span, "value_info"):
        if f == 1:
            name = _str(buf, v)
        elif f == 2:
            for tf, _tw, tv in _sub(buf, v, "type"):
                if tf == 1:
                    is_tensor = True
                    elem_type, shape = _parse_tensor_type(buf, tv)
    dtype = _DTYPES.get(elem_type, f"type{elem_type}")
    return TensorInfo(name, shape if is_tensor else None, dtype)


def _parse_tensor_type(buf: memoryview, span: Value) -> tuple[int, tuple[Dim, ...] | None]:
    elem_type = 0
    shape: tuple[Dim, ...] | None = None
    for f, _w, v in _sub(buf, span, "tensor_type"):
        if f == 1 and isinstance(v, int):
            elem_type = v
        elif f == 2:  # TensorShapeProto {dim = 1: Dimension {dim_value = 1, dim_param = 2}}
            dims: list[Dim] = []
            for df, _dw, dv in _sub(buf, v, "shape"):
                if df != 1:
                    continue
                dim: Dim = None
                for ef, _ew, ev in _sub(buf, dv, "dim"):
                    if ef == 1 and isinstance(ev, int):
                        signed = ev - (1 << 64) if ev >= 1 << 63 else ev
                        dim = signed if signed > 0 else None
                    elif ef == 2:
                        dim = _str(buf, ev) or None
                dims.append(dim)
            shape = tuple(dims)
    return elem_type, shape
