"""KServe, imported the way `seglens-cli serve` needs it: argv kept away from it, its version checked, its slow
REST binary decode replaced, its per-request log lines quieted.

Why each step:
- `kserve.model_server` runs `argparse.parse_known_args()` on `sys.argv` when it is imported, so our own options
  (`--port`, `--host`, …) would be taken for KServe's. It sees only the program name while it imports.
- kserve 0.21.0's `InferRequest.from_bytes` turns every binary input into a Python list (`.item()` per element,
  ~0.4 s for a 1080p FP32 image); `_from_bytes` keeps the raw bytes, so `as_numpy()` is `np.frombuffer`. The
  replacement mirrors that one version's code, so another version is refused in one line rather than patched blind.
- `kserve.trace` logs two INFO lines per request, and KServe logs a client's bad request at ERROR with a traceback:
  the trace is set to WARNING and tracebacks are folded away (a bad request is the client's problem, one line).
- kserve's gRPC protobuf names clash with tritonclient.grpc's in one process (a TypeError at import): refused
  up front in words.
"""

from __future__ import annotations

import logging
import sys
from importlib import metadata
from typing import Any

from app.errors import MissingExtra, SegLensError, extra_line

KSERVE_VERSION = "0.21.0"  # the version whose REST decode `_from_bytes` replaces (pyproject pins it)


class ServeSetupError(SegLensError):
    """The serving engine cannot be used here (not installed, another version, a clashing import)."""


FEATURE = "seglens-cli serve"  # the words of its missing-extra line (app.errors.extra_line)


def load_kserve() -> None:
    """Import kserve once for this process: version checked, decode patched, logs quieted. Raises MissingExtra
    (the serve extra is not installed) or ServeSetupError."""
    try:
        version = metadata.version("kserve")
    except metadata.PackageNotFoundError:
        raise MissingExtra(feature=FEATURE, extra="serve") from None
    if version != KSERVE_VERSION:
        raise ServeSetupError(f"serve is written for kserve {KSERVE_VERSION} (its binary-tensor decode is patched "
                              f"for that version), found kserve {version}: pip install 'kserve=={KSERVE_VERSION}'")
    if "tritonclient.grpc" in sys.modules:
        raise ServeSetupError("serve cannot run in a process that imported tritonclient.grpc (both register the "
                              "inference protocol's protobuf names): start it on its own")
    argv, sys.argv = sys.argv, sys.argv[:1]  # kserve.model_server parses sys.argv at import time
    try:
        import kserve.model_server  # noqa: F401  (the parse happens here, once)
        from kserve.protocol.infer_type import InferRequest
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "kserve":  # its files are gone though its metadata is left
            raise MissingExtra(feature=FEATURE, extra="serve") from exc
        raise ServeSetupError(f"{extra_line(feature=FEATURE, extra='serve')}: kserve cannot be imported "
                              f"({exc})") from exc
    finally:
        sys.argv = argv
    InferRequest.from_bytes = classmethod(_from_bytes)
    _quiet_logs()


V2_DATATYPES = frozenset({"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16",
                          "FP32", "FP64", "BF16", "BYTES"})
MAX_RANK = 8  # a tensor of more dimensions is no image model's


def _from_bytes(cls: Any, req_bytes: bytes, json_length: int, model_name: str) -> Any:
    """kserve 0.21.0's InferRequest.from_bytes, the binary inputs kept as bytes (no Python list of every element);
    its checks and messages are kept, a binary size running past the body is refused too, and so is every field
    of another type than the protocol's (a missing `name`, a shape of strings): InvalidInput, a 400 in one line,
    where kserve's own code raised a KeyError or TypeError (a 500)."""
    import orjson
    from kserve.errors import InvalidInput
    from kserve.protocol.infer_type import InferInput, RequestedOutput

    if not 0 <= json_length <= len(req_bytes):
        raise InvalidInput(f"Inference-Header-Content-Length {json_length} is not within the request body "
                           f"({len(req_bytes)} bytes)")
    try:
        request = orjson.loads(req_bytes[:json_length])
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"Unrecognized request format: {exc}") from exc
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise InvalidInput('Expected "inputs" to be a list')
    inputs = []
    start = json_length
    for index, spec in enumerate(request["inputs"]):
        name, shape, datatype, parameters = _input_fields(spec, index)
        tensor = InferInput(name=name, shape=shape, datatype=datatype, parameters=parameters or None)
        if spec.get("data") is not None:
            if tensor.datatype == "FP16":
                raise InvalidInput(f"Receiving FP16 data via JSON is not supported. Please use the binary data "
                                   f"format for input {tensor.name}")
            tensor.data = spec["data"]
        elif parameters and "binary_data_size" in parameters:
            size = parameters.get("binary_data_size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidInput(f"'binary_data_size' is not specified for input '{tensor.name}' for model "
                                   f"'{model_name}'")
            end = start + size
            if end > len(req_bytes):
                raise InvalidInput(f"input '{tensor.name}': binary_data_size {size} runs past the request body")
            tensor._raw_data = req_bytes[start:end]
            start = end
        else:
            raise InvalidInput(f"'data' field is missing for input '{tensor.name}' for model '{model_name}'")
        inputs.append(tensor)
    outputs = None
    if request.get("outputs") is not None:
        outputs = [RequestedOutput(name=name, parameters=parameters or None)
                   for name, parameters in _output_fields(request["outputs"])]
    request_id, request_parameters = request.get("id"), request.get("parameters")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInput("the request's 'id' is not a string")
    if request_parameters is not None and not isinstance(request_parameters, dict):
        raise InvalidInput("the request's 'parameters' is not an object")
    return cls(model_name=model_name, request_id=request_id, parameters=request_parameters,
               infer_inputs=inputs, request_outputs=outputs)


def _input_fields(spec: Any, index: int) -> tuple[str, list[int], str, dict[str, Any]]:
    """An input's name, shape, datatype and parameters, each of the protocol's type; InvalidInput naming the
    field otherwise."""
    from kserve.errors import InvalidInput

    if not isinstance(spec, dict):
        raise InvalidInput(f"input {index} is not an object")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"input {index} has no 'name' (a string)")
    shape = spec.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_RANK
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise InvalidInput(f"input '{name[:80]}': 'shape' is not a list of at most {MAX_RANK} sizes (whole numbers "
                           "from 0)")
    datatype = spec.get("datatype")
    if datatype not in V2_DATATYPES:
        raise InvalidInput(f"input '{name[:80]}': 'datatype' {str(datatype)[:20]!r} is not one of the protocol's")
    parameters = spec.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise InvalidInput(f"input '{name[:80]}': 'parameters' is not an object")
    return name, shape, datatype, parameters or {}


def _output_fields(outputs: Any) -> list[tuple[str, dict[str, Any]]]:
    """The requested outputs' names and parameters; InvalidInput when they are not a list of named objects."""
    from kserve.errors import InvalidInput

    if not isinstance(outputs, list):
        raise InvalidInput("'outputs' is not a list")
    found = []
    for index, item in enumerate(outputs):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InvalidInput(f"output {index} has no 'name' (a string)")
        parameters = item.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise InvalidInput(f"output '{item['name'][:80]}': 'parameters' is not an object")
        found.append((item["name"], parameters or {}))
    return found


def json_length_of(header: str | None) -> int:
    """The Inference-Header-Content-Length header as a number; InvalidInput in one line when it is missing or not
    a whole number (kserve's int() raised a ValueError there: a 500)."""
    from kserve.errors import InvalidInput

    text = (header or "").strip()
    if not text.isdigit() or len(text) > 18:
        raise InvalidInput(f"the Inference-Header-Content-Length header {text[:20]!r} is not a byte count")
    return int(text)


class _NoTraceback(logging.Filter):
    """KServe logs every refused request with exc_info (its message often just 'Exception:'): the exception's own
    line instead of the traceback is enough for a client's mistake."""

    def filter(self, record: logging.LogRecord) -> bool:
        from app.errors import one_line

        if isinstance(record.exc_info, tuple) and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()} {one_line(record.exc_info[1], most=500, typed=True)}"
            record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


def _quiet_logs() -> None:
    logging.getLogger("kserve.trace").setLevel(logging.WARNING)  # two INFO lines per request otherwise
    kserve_log = logging.getLogger("kserve")
    if not any(isinstance(f, _NoTraceback) for f in kserve_log.filters):
        kserve_log.addFilter(_NoTraceback())
