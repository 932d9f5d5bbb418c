"""Runtime options made into ONNX Runtime's terms: the provider list and each provider's options from a
RuntimeOptions record (app.inference.model.runtime_options: defaults, the sidecar's `runtime:` section, the CLI's
`--runtime KEY=VALUE` or the viewer's settings). GPU-only options are passed through untouched on a CPU
session. Also here: the graph surgery that appends an ArgMax to a scores model, so that on a GPU only a uint8
label map crosses back to the host instead of C float planes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.errors import ModelError, one_line
from app.inference.model.runtime_options import RuntimeOptions
from app.inference.runtime.providers import CPU, CUDA, TENSORRT
from app.io.files import file_sha256

DEVICE_LABELS_NAME = "seglens_labels"


def cuda_provider_options(options: RuntimeOptions, device_id: int) -> dict[str, str]:
    values = {
        "device_id": str(device_id),
        "cudnn_conv_algo_search": options.cudnn_conv_algo_search,
        "arena_extend_strategy": options.arena_extend_strategy,
        "prefer_nhwc": "1" if options.prefer_nhwc else "0",
        "use_tf32": "1" if options.use_tf32 else "0",
    }
    if options.gpu_mem_limit_mb > 0:
        values["gpu_mem_limit"] = str(options.gpu_mem_limit_mb * 1024 * 1024)
    return values


def tensorrt_provider_options(options: RuntimeOptions, device_id: int, cache_dir: Path) -> dict[str, str]:
    return {
        "device_id": str(device_id),
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": str(cache_dir),
        "trt_timing_cache_enable": "True",
        "trt_fp16_enable": "True" if options.tensorrt_fp16 else "False",
    }


def providers_for(options: RuntimeOptions, *, gpu: bool, device_id: int, available: list[str],
                  model_path: Path | None = None) -> list[Any]:
    """The provider list for InferenceSession, best first; the CPU always last as the fallback.
    `model_path` keys TensorRT's engine cache to that file's content."""
    if not gpu:
        return [CPU]
    chosen: list[Any] = []
    if options.tensorrt and TENSORRT in available:
        cache = tensorrt_cache_dir(model_path)
        chosen.append((TENSORRT, tensorrt_provider_options(options, device_id, cache)))
    chosen += [(CUDA, cuda_provider_options(options, device_id)), CPU]
    return chosen


def tensorrt_cache_dir(model_path: Path | None = None) -> Path:
    """The engine cache folder, one per model content (the first 16 hex digits of its SHA-256).

    ONNX Runtime names a cached engine after the graph's structure and the file name, not the weights: in a
    shared folder a retrained model of the same architecture would silently run the old engine."""
    from platformdirs import user_cache_dir

    folder = Path(user_cache_dir("SegLens", appauthor=False)) / "tensorrt"
    if model_path is not None:
        folder /= file_sha256(Path(model_path))[:16]
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def with_device_argmax(model_path: Path, channel_axis: int) -> bytes:
    """The model with ArgMax (over the class axis, keepdims) and a Cast to uint8 appended to its first output.

    Run on a GPU, the label map is all that is copied back: H×W bytes instead of C×H×W floats.
    """
    import onnx

    from app.guard.untrusted import MODEL_FILE_LIMIT, open_untrusted

    try:  # onnx reads the one handle the gate opened (a FIFO or a device, even swapped in later, never waited on);
        # its external data is found beside the handle's name, the model's path
        handle = open_untrusted(model_path, limit=MODEL_FILE_LIMIT)
    except OSError as exc:
        problem = "file not found" if isinstance(exc, FileNotFoundError) else exc.strerror or one_line(exc)
        raise ModelError(f"{model_path}: cannot add the on-device ArgMax ({problem})") from exc
    try:
        with handle:
            model = onnx.load(handle)
        serialized: bytes = _append_argmax(model, channel_axis).SerializeToString()
        return serialized
    # onnx raises its own types here (checker.ValidationError for missing external weights, protobuf's
    # DecodeError, ValueError past protobuf's 2 GB limit): each is a broken or unsupported model file
    except Exception as exc:
        reason = one_line(exc, most=300)
        raise ModelError(f"{model_path}: cannot add the on-device ArgMax ({reason}); "
                         "try --runtime device_argmax=off") from exc


def _append_argmax(model: Any, channel_axis: int) -> Any:
    from onnx import TensorProto, helper

    graph = model.graph
    scores = graph.output[0].name
    graph.node.extend([
        helper.make_node("ArgMax", [scores], ["seglens_argmax"], axis=channel_axis, keepdims=1),
        helper.make_node("Cast", ["seglens_argmax"], [DEVICE_LABELS_NAME], to=TensorProto.UINT8),
    ])
    shape = [d.dim_param or d.dim_value or None for d in graph.output[0].type.tensor_type.shape.dim]
    shape[channel_axis] = 1
    graph.output.insert(0, helper.make_tensor_value_info(DEVICE_LABELS_NAME, TensorProto.UINT8, shape))
    return model
