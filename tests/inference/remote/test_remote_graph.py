"""A remote model's v2 metadata as the GraphInfo an ONNX file gives (app.inference.remote.graph): the datatypes as
ONNX element types, -1 (or gRPC's '-1') dynamic, and a server's malformed or hostile metadata one line, refused
before anything is made per tensor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from remote_mocks import MockServer

from app.errors import ModelError
from app.inference.model.builder import load_spec
from app.inference.model.onnx_graph import read_graph
from app.inference.remote.graph import (
    MAX_TENSORS,
    graph_from_metadata,
    is_remote_path,
    metadata_sha256,
    remote_path,
)
from app.inference.remote.session import RemoteTarget, open_remote_session
from app.inference.runtime.session import open_session

MODELS = Path(__file__).resolve().parents[3] / "models"
WHERE = "remote h:1/m"


def _meta(**changes):
    meta = {"name": "m", "versions": ["1"], "platform": "onnxruntime_onnx",
            "inputs": [{"name": "input", "datatype": "FP16", "shape": [-1, 1, 256, 256]}],
            "outputs": [{"name": "probability", "datatype": "FP16", "shape": ["-1", "1", "256", "256"]}]}
    return {**meta, **changes}


def test_metadata_reads_as_the_files_graph_where_the_wire_can_tell():
    graph = graph_from_metadata(_meta(), WHERE)
    local = read_graph(MODELS / "nuclei_fp16.onnx")
    assert [(t.name, t.dtype) for t in graph.inputs] == [(t.name, t.dtype) for t in local.inputs]
    assert [t.describe() for t in graph.outputs] == ["probability[?,1,256,256] float16"]
    assert graph.final_ops == {} and graph.metadata == {} and graph.opset is None


@pytest.mark.parametrize("meta, problem", [
    ([], "is not a JSON object"),
    (_meta(outputs=[]), "declares no outputs"),
    (_meta(inputs="input"), "has no list of inputs"),
    (_meta(inputs=[{"name": f"t{i}", "datatype": "FP32", "shape": [1]} for i in range(MAX_TENSORS + 1)]),
     f"at most {MAX_TENSORS}"),
    (_meta(outputs=[{"datatype": "FP32", "shape": [1]}]), "one of the server's outputs has no name"),
    (_meta(outputs=[{"name": "o", "datatype": "FP32"}]), "metadata of output 'o' has no datatype or shape"),
    (_meta(outputs=[{"name": "o", "datatype": "FP32", "shape": [1] * 9}]), "has no datatype or shape"),
    (_meta(outputs=[{"name": "o", "datatype": "FP32", "shape": [1, "many"]}]), "holds 'many', not a number"),
])
def test_malformed_metadata_is_one_line(meta, problem):
    with pytest.raises(ModelError, match=problem) as caught:
        graph_from_metadata(meta, WHERE)
    assert str(caught.value).startswith(f"{WHERE}: ") and "\n" not in str(caught.value)


def test_a_remote_model_is_named_remote_host_model_never_a_local_path():
    path = remote_path("gpu-box:8001", "nuclei")
    assert (str(path), path.name) == ("remote gpu-box:8001/nuclei", "nuclei") and is_remote_path(path)
    assert not is_remote_path(MODELS / "nuclei.onnx")
    graph = graph_from_metadata(_meta(), WHERE)
    same = metadata_sha256(graph.inputs, graph.outputs, str(path))
    assert same == metadata_sha256(graph.inputs, graph.outputs, str(path))
    assert same != metadata_sha256(graph.inputs, graph.outputs, "remote other:8001/nuclei")


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_a_float16_model_answers_the_local_tensor(face):
    path = MODELS / "nuclei_fp16.onnx"
    local = open_session(load_spec(path), "cpu")
    with MockServer(path, name="nuclei_fp16") as server:
        url = server.http_url if face == "http" else server.grpc_url
        remote = open_remote_session(RemoteTarget(url, "nuclei_fp16", timeout_s=10),
                                     sidecar=path.with_suffix(".yaml"))
        tensor = np.random.default_rng(3).random((1, 1, 256, 256)).astype(np.float16)
        got = remote.run(tensor)
        assert got.dtype == np.float16 and np.array_equal(got, local.run(tensor))
