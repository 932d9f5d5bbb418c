"""The ONNX wire-format reader against the `onnx` package, which is the reference for what a file says."""

from __future__ import annotations

import inspect
from pathlib import Path

import onnx
import onnx_factory
import pytest

from app.errors import ModelError
from app.inference.model.onnx_graph import read_graph

REPO = Path(__file__).resolve().parents[3]
FACTORY = [name for name, fn in inspect.getmembers(onnx_factory, inspect.isfunction)
           if fn.__module__ == onnx_factory.__name__ and name != "save"
           and list(inspect.signature(fn).parameters)[:1] == ["path"]]
BUNDLED = sorted((REPO / "models").glob("*.onnx"))


def _reference(path: Path) -> dict:
    """What onnx.load says about the file, in GraphInfo's terms."""
    model = onnx.load(str(path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}

    def info(v):
        t = v.type.tensor_type
        shape = None
        if v.type.HasField("tensor_type") and t.HasField("shape"):
            shape = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0
                          else (d.dim_param or None) if d.HasField("dim_param") else None for d in t.shape.dim)
        return v.name, shape, t.elem_type

    opset = next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), None)
    return {
        "inputs": [info(v) for v in model.graph.input if v.name not in initializers],
        "outputs": [info(v) for v in model.graph.output],
        "metadata": {p.key: p.value for p in model.metadata_props},
        "opset": opset,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "ops": [n.op_type for n in model.graph.node],
    }


def _dtype_code(name: str) -> int:
    return {"float32": 1, "uint8": 2, "int64": 7, "float16": 10}[name]


@pytest.mark.parametrize("path", [*FACTORY, *BUNDLED], ids=lambda p: p if isinstance(p, str) else p.name)
def test_reader_agrees_with_onnx(path, models):
    path = models(path) if isinstance(path, str) else path
    ref = _reference(path)
    graph = read_graph(path)
    assert [(t.name, t.shape, _dtype_code(t.dtype)) for t in graph.inputs] == ref["inputs"]
    assert [(t.name, t.shape, _dtype_code(t.dtype)) for t in graph.outputs] == ref["outputs"]
    assert graph.metadata == ref["metadata"]
    assert graph.opset == ref["opset"] and graph.producer == ref["producer"]
    assert set(graph.final_ops.values()) <= set(ref["ops"]) | {"Input"}


def test_final_op_looks_through_pass_through_ops(models):
    graph = read_graph(models("binary_logits", end_with_sigmoid=True))
    assert list(graph.final_ops.values()) == ["Sigmoid"]
    assert list(read_graph(models("binary_logits", name="plain")).final_ops.values()) != ["Sigmoid"]


def test_argmax_class_count_comes_from_shape_inference(models):
    graph = read_graph(models("embedded_argmax"))
    assert list(graph.final_ops.values()) == ["ArgMax"]
    assert list(graph.argmax_channels.values()) == [3]


@pytest.mark.parametrize("cut", [1, 7, 100, 1000])
def test_truncated_file_is_not_a_valid_model(models, tmp_path, cut):
    data = models("rgb_classes").read_bytes()
    broken = tmp_path / "cut.onnx"
    broken.write_bytes(data[: len(data) - cut])
    with pytest.raises(ModelError, match=r"cut\.onnx: not a valid ONNX model \(") as err:
        read_graph(broken)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("content", [b"", b"hello, this is a text file\n", b"\xff" * 64, b"\x0f\x00"])
def test_non_onnx_bytes_are_refused(tmp_path, content):
    path = tmp_path / "x.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=r"x\.onnx: not a valid ONNX model"):
        read_graph(path)
