"""`seglens-cli serve` over the wire: v2 metadata, infer byte-identical to a local ONNX Runtime run (REST JSON and
binary, gRPC), the server's compute time and device in every response, the bearer token, a bad request a 400 that
leaves the connection usable. The server runs as a subprocess (tests/serve_fixtures.py)."""

from __future__ import annotations

import http.client
import json
import sys
import urllib.error
import urllib.request

import numpy as np
import onnxruntime as ort
import pytest

from tests import serve_fixtures
from tests.serve_fixtures import REPO, TOKEN, Served

served = serve_fixtures.served  # the module-scoped server (a fixture)
NUCLEI = REPO / "models" / "nuclei.onnx"


def _local(x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(NUCLEI), providers=["CPUExecutionProvider"])
    out: np.ndarray = session.run(None, {"input": x})[0]
    return out


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((1, 1, 256, 256), dtype=np.float32)


def _get(served: Served, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(served.url + path, headers=served.headers if headers is None else headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_metadata_names_the_platform_and_the_graphs_inputs_and_outputs(served: Served):
    status, metadata = _get(served, "/v2/models/nuclei")
    assert status == 200
    assert metadata["name"] == "nuclei"
    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 1, 256, 256]}]
    assert metadata["outputs"] == [{"name": "probability", "datatype": "FP32", "shape": [-1, 1, 256, 256]}]
    assert _get(served, "/v2/health/ready")[0] == 200


def test_the_startup_line_says_what_is_served_where_and_that_a_token_is_needed(served: Served):
    lines = served.stdout().splitlines()
    assert lines[0] == (f"serving nuclei on http://127.0.0.1:{served.port} and grpc://127.0.0.1:{served.grpc_port}, "
                        "CPU, token required")


def test_http_binary_infer_is_byte_identical_to_a_local_run_and_says_compute_and_device(served: Served):
    import tritonclient.http as th

    x = _image(1)
    client = th.InferenceServerClient(f"127.0.0.1:{served.port}")
    tensor = th.InferInput("input", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    result = client.infer("nuclei", [tensor], outputs=[th.InferRequestedOutput("probability", binary_data=True)],
                          headers=dict(served.headers))
    y = result.as_numpy("probability")
    assert y.dtype == np.float32 and y.tobytes() == _local(x).tobytes()
    parameters = result.get_response()["parameters"]
    assert isinstance(parameters["compute_us"], int) and parameters["compute_us"] > 0
    assert parameters["seglens_device"] == "CPU"
    assert parameters["seglens_fallback"] == ""  # --device cpu: nothing fell back
    client.close()


def test_grpc_infer_is_byte_identical_to_a_local_run_and_says_compute_and_device(served: Served):
    import tritonclient.grpc as tg

    x = _image(2)
    client = tg.InferenceServerClient(served.grpc_address)
    metadata = client.get_model_metadata("nuclei", headers={"authorization": f"Bearer {TOKEN}"})
    assert metadata.platform == "onnxruntime_onnx"
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [("input", "FP32", [-1, 1, 256, 256])]
    tensor = tg.InferInput("input", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("nuclei", [tensor], headers={"authorization": f"Bearer {TOKEN}"}, client_timeout=60)
    assert result.as_numpy("probability").tobytes() == _local(x).tobytes()
    parameters = result.get_response().parameters
    assert parameters["compute_us"].int64_param > 0
    assert parameters["seglens_device"].string_param == "CPU"
    assert parameters["seglens_fallback"].string_param == ""
    client.close()


def test_a_json_request_gets_json_floats_equal_to_a_local_run(served: Served):
    x = _image(3)
    body = {"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
    request = urllib.request.Request(f"{served.url}/v2/models/nuclei/infer", data=json.dumps(body).encode(),
                                     headers={**served.headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        response = json.loads(answer.read())
    output = response["outputs"][0]
    assert output["name"] == "probability" and output["shape"] == [1, 1, 256, 256]
    assert np.array_equal(np.asarray(output["data"], np.float32).reshape(output["shape"]), _local(x))
    assert response["parameters"]["seglens_device"] == "CPU"


def test_no_token_or_a_wrong_one_is_401_in_one_line_and_the_health_probes_stay_open(served: Served):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        for path in ("/v2/models/nuclei", "/v2/models/nuclei/ready", "/v2"):
            status, body = _get(served, path, headers)
            assert status == 401, (path, headers)
            assert body == {"error": "unauthorized: this server wants 'Authorization: Bearer <token>'"}
    assert _get(served, "/v2/health/live", {}) == (200, {"live": True})
    assert _get(served, "/v2/health/ready", {}) == (200, {"ready": True})


def test_grpc_without_the_token_is_unauthenticated_and_server_live_stays_open(served: Served):
    import tritonclient.grpc as tg
    from tritonclient.utils import InferenceServerException

    client = tg.InferenceServerClient(served.grpc_address)
    assert client.is_server_live()  # a probe needs no token
    for headers in (None, {"authorization": "Bearer wrong"}):
        with pytest.raises(InferenceServerException) as caught:
            client.get_model_metadata("nuclei", headers=headers)
        assert caught.value.status() == "StatusCode.UNAUTHENTICATED"
        assert "unauthorized" in caught.value.message()
    client.close()


def _binary_body(x: np.ndarray, *, shape: list[int] | None = None, size: int | None = None) -> tuple[bytes, int]:
    raw = x.tobytes()
    header = json.dumps({"inputs": [{"name": "input", "shape": shape or list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": len(raw) if size is None else size}}],
                         "outputs": [{"name": "probability", "parameters": {"binary_data": True}}]}).encode()
    return header + raw, len(header)


def _post(connection: http.client.HTTPConnection, body: bytes, json_length: int) -> tuple[int, bytes, dict]:
    connection.request("POST", "/v2/models/nuclei/infer", body=body,
                       headers={"Authorization": f"Bearer {TOKEN}", "Inference-Header-Content-Length": str(json_length),
                                "Content-Type": "application/octet-stream"})
    answer = connection.getresponse()
    return answer.status, answer.read(), {k.lower(): v for k, v in answer.getheaders()}


def test_a_bad_input_shape_is_400_with_onnx_runtimes_message_and_the_connection_goes_on(served: Served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    small = _image(4)[:, :, :100, :100].copy()
    status, body, _ = _post(connection, *_binary_body(small))
    assert status == 400
    error = json.loads(body)["error"]
    assert "\n" not in error
    assert error.startswith("nuclei: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input")
    assert "index: 2 Got: 100 Expected: 256" in error
    x = _image(5)  # the same keep-alive connection answers the next request
    status, body, headers = _post(connection, *_binary_body(x))
    assert status == 200
    json_length = int(headers["inference-header-content-length"])
    assert body[json_length:] == _local(x).tobytes()
    connection.close()


def test_binary_sizes_that_do_not_fit_are_400_in_one_line(served: Served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    x = _image(6)
    status, body, _ = _post(connection, *_binary_body(x, size=x.nbytes + 4))  # runs past the body
    assert status == 400
    assert json.loads(body)["error"] == f"input 'input': binary_data_size {x.nbytes + 4} runs past the request body"
    status, body, _ = _post(connection, *_binary_body(x, shape=[1, 1, 256, 255]))  # bytes for another shape
    assert status == 400
    assert json.loads(body)["error"].startswith("nuclei: input 'input' shape [1, 1, 256, 255] FP32: ")
    connection.close()


def test_an_unknown_model_is_404_in_one_line(served: Served):
    assert _get(served, "/v2/models/nope") == (404, {"error": "Model with name nope does not exist."})


def test_a_v1_predict_is_a_400_naming_the_v2_route_not_a_500(served: Served):
    request = urllib.request.Request(f"{served.url}/v1/models/nuclei:predict", data=b'{"instances": [[0.5]]}',
                                     headers={**served.headers, "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 400
    assert json.loads(caught.value.read()) == {
        "error": "nuclei: serve speaks the v2 protocol: POST /v2/models/nuclei/infer"}


def test_the_repository_extension_cannot_unload_a_served_model(served: Served):
    request = urllib.request.Request(f"{served.url}/v2/repository/models/nuclei/unload", data=b"", method="POST",
                                     headers=served.headers)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 501
    assert json.loads(caught.value.read()) == {
        "error": "serve keeps its models loaded ('nuclei' too): stop the server instead"}
    assert _get(served, "/v2/models/nuclei/ready") == (200, {"name": "nuclei", "ready": True})


def test_the_server_logs_a_refused_request_in_one_line_without_a_traceback(served: Served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    status, _, _ = _post(connection, *_binary_body(_image(8)[:, :, :64, :64].copy()))
    connection.close()
    assert status == 400
    logged = [line for line in served.stderr().splitlines() if "Got: 64 Expected: 256" in line]
    assert len(logged) == 1 and logged[0].startswith("ERROR: ") and "Got invalid dimensions" in logged[0]
    assert "Traceback" not in served.stderr()
    assert TOKEN not in served.stderr()


def _listening(port: int) -> set[str]:
    """The local addresses listening on `port` (Linux /proc/net/tcp and tcp6, hex as the kernel writes them)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as handle:
            for line in handle.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.rpartition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.add(address)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/tcp")
def test_both_ports_listen_on_the_loopback_address_asked_for_not_every_interface(served: Served):
    # KServe's RESTServer binds 0.0.0.0 and its gRPC server [::] whatever is asked
    loopback = {"0100007F", "0000000000000000FFFF00000100007F"}  # 127.0.0.1 (v4; v4-mapped v6), kernel hex
    for port in (served.port, served.grpc_port):
        assert _listening(port) and _listening(port) <= loopback, port


# issue 36: a malformed request is the client's mistake — a 400 in the protocol's {"error": "<one line>"} shape,
# never a 500 (nor FastAPI's 422 list of details), and the keep-alive connection goes on

def _raw_post(connection: http.client.HTTPConnection, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    connection.request("POST", "/v2/models/nuclei/infer", body=body,
                       headers={"Authorization": f"Bearer {TOKEN}", **headers})
    answer = connection.getresponse()
    return answer.status, json.loads(answer.read())


def _binary(header: object, blob: bytes = b"\0\0\0\0") -> tuple[bytes, dict[str, str]]:
    head = json.dumps(header).encode()
    return head + blob, {"Inference-Header-Content-Length": str(len(head)),
                         "Content-Type": "application/octet-stream"}


def _one_input(**fields: object) -> dict:
    item = {"name": "input", "shape": [1], "datatype": "FP32", "parameters": {"binary_data_size": 4}, **fields}
    return {"inputs": [{k: v for k, v in item.items() if v is not None}]}


@pytest.mark.parametrize(("body", "headers", "error"), [
    (b'{"inputs": []}', {"Inference-Header-Content-Length": "abc"},
     "the Inference-Header-Content-Length header 'abc' is not a byte count"),
    (b'{"inputs": []}', {"Inference-Header-Content-Length": "9999"},
     "Inference-Header-Content-Length 9999 is not within the request body (14 bytes)"),
    (*_binary(_one_input(name=None)), "input 0 has no 'name' (a string)"),
    (*_binary(_one_input(name=5)), "input 0 has no 'name' (a string)"),
    (*_binary({"inputs": [5]}), "input 0 is not an object"),
    (*_binary(_one_input(shape="x")), "input 'input': 'shape' is not a list of at most 8 sizes (whole numbers from 0)"),
    (*_binary(_one_input(shape=["a"])), "input 'input': 'shape' is not a list of at most 8 sizes (whole numbers "
                                        "from 0)"),
    (*_binary(_one_input(datatype=3)), "input 'input': 'datatype' '3' is not one of the protocol's"),
    (*_binary(_one_input(parameters=[1])), "input 'input': 'parameters' is not an object"),
    (*_binary({**_one_input(), "outputs": [5]}), "output 0 has no 'name' (a string)"),
    (*_binary({**_one_input(), "outputs": [{"x": 1}]}), "output 0 has no 'name' (a string)"),
    (*_binary({**_one_input(), "outputs": "probability"}), "'outputs' is not a list"),
    (*_binary({**_one_input(), "id": 7}), "the request's 'id' is not a string"),
])
def test_a_malformed_binary_request_is_400_in_one_v2_line_not_500(served: Served, body, headers, error):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    assert _raw_post(connection, body, headers) == (400, {"error": error})
    x = _image(9)
    status, _, _ = _post(connection, *_binary_body(x))  # the same connection goes on
    assert status == 200
    connection.close()


@pytest.mark.parametrize(("body", "error"), [
    ({"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]}, "invalid request: inputs.0.name: Field required"),
    ({"inputs": [{"name": "input", "shape": "x", "datatype": 3, "data": [1]}]},
     "invalid request: inputs.0.shape: Input should be a valid list; inputs.0.datatype: Input should be a valid "
     "string"),
    ({"inputs": 5}, "invalid request: inputs: Input should be a valid list"),
])
def test_a_malformed_json_request_is_400_in_one_v2_line_not_422(served: Served, body, error):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    got = _raw_post(connection, json.dumps(body).encode(), {"Content-Type": "application/json"})
    assert got == (400, {"error": error})
    connection.close()


def test_every_error_is_in_the_v2_shape(served: Served):
    assert _get(served, "/v2/no-such-route") == (404, {"error": "Not Found"})
    request = urllib.request.Request(f"{served.url}/v2/models/nuclei", method="DELETE", headers=served.headers)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 405 and json.loads(caught.value.read()) == {"error": "Method Not Allowed"}


def test_metadata_versions_is_a_list_and_answers_carry_no_nulls(served: Served):
    status, metadata = _get(served, "/v2/models/nuclei")
    assert status == 200 and metadata["versions"] == []
    x = _image(10)
    body = {"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
    request = urllib.request.Request(f"{served.url}/v2/models/nuclei/infer", data=json.dumps(body).encode(),
                                     headers={**served.headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.headers["Content-Type"] == "application/json"
        response = json.loads(answer.read())
    assert "model_version" not in response and response["model_name"] == "nuclei"
    assert all(value is not None for output in response["outputs"] for value in output.values())
    assert np.array_equal(np.asarray(response["outputs"][0]["data"], np.float32).reshape(1, 1, 256, 256), _local(x))
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    status, raw, headers = _post(connection, *_binary_body(x))  # the binary extension's JSON header likewise
    connection.close()
    length = int(headers["inference-header-content-length"])
    head = json.loads(raw[:length])
    assert status == 200 and "model_version" not in head and raw[length:] == _local(x).tobytes()
    assert head["outputs"][0]["parameters"] == {"binary_data_size": x.nbytes}


def test_the_readiness_probe_needs_no_token_as_liveness_does_not(served: Served):
    assert _get(served, "/v2/health/ready", {}) == (200, {"ready": True})
    assert _get(served, "/v2/models/nuclei/ready", {})[0] == 401  # a model's readiness names it: token


def test_the_advertised_repository_extension_answers_its_index(served: Served):
    status, server = _get(served, "/v2")
    assert status == 200 and "model_repository_extension" in server["extensions"]
    request = urllib.request.Request(f"{served.url}/v2/repository/index", data=b"{}", method="POST",
                                     headers={**served.headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.loads(answer.read()) == [{"name": "nuclei", "state": "READY", "reason": ""}]
    for name, code, body in (("nuclei", 200, {"name": "nuclei", "load": True}),
                             ("nope", 404, {"error": "Model with name nope does not exist."})):
        request = urllib.request.Request(f"{served.url}/v2/repository/models/{name}/load", data=b"", method="POST",
                                         headers=served.headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                got = answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            got = exc.code, json.loads(exc.read())
        assert got == (code, body)


def test_grpc_repository_calls_answer_a_status_never_unknown_nor_a_traceback(served: Served):
    import grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pbg

    channel = grpc.insecure_channel(served.grpc_address)
    stub = pbg.GRPCInferenceServiceStub(channel)
    metadata = [("authorization", f"Bearer {TOKEN}")]
    # KServe's proto has the model's name in field 1, which Triton's names repository_name
    calls = [(stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(repository_name="nuclei"),
              grpc.StatusCode.UNIMPLEMENTED, "serve keeps its models loaded ('nuclei' too): stop the server instead"),
             (stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(repository_name="nope"),
              grpc.StatusCode.NOT_FOUND, "Model with name nope does not exist."),
             (stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(repository_name="nope"),
              grpc.StatusCode.NOT_FOUND, "Model with name nope does not exist."),
             (stub.RepositoryIndex, pb.RepositoryIndexRequest(), grpc.StatusCode.UNIMPLEMENTED, None)]
    for call, request, code, details in calls:
        with pytest.raises(grpc.RpcError) as caught:
            call(request, metadata=metadata, timeout=30)
        assert caught.value.code() == code, (request, caught.value.details())
        assert details is None or caught.value.details() == details
    loaded = stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(repository_name="nuclei"), metadata=metadata,
                                      timeout=30)
    assert loaded is not None  # a served model's load: nothing to do
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready  # a readiness probe without the token
    channel.close()
    assert "Traceback" not in served.stderr()


def test_a_request_declaring_a_huge_body_is_413_before_it_is_read(served: Served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.putrequest("POST", "/v2/models/nuclei/infer")
    connection.putheader("Authorization", f"Bearer {TOKEN}")
    connection.putheader("Content-Length", str(10 << 30))  # 10 GiB announced, none sent
    connection.endheaders()
    answer = connection.getresponse()
    assert answer.status == 413
    assert json.loads(answer.read()) == {"error": f"the request declares {10 << 30} bytes; the limit is {256 << 20}"}
    connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.putrequest("POST", "/v2/models/nuclei/infer")
    connection.putheader("Authorization", f"Bearer {TOKEN}")
    connection.putheader("Transfer-Encoding", "chunked")  # no length to check
    connection.endheaders()
    answer = connection.getresponse()
    assert answer.status == 411 and "Content-Length" in json.loads(answer.read())["error"]
    connection.close()
