"""Runtime options: how ONNX Runtime runs a model (threads, CUDA/TensorRT tuning, where the argmax happens).

They come, lowest to highest priority, from defaults, the sidecar's `runtime:` section, and the CLI's
`--runtime KEY=VALUE` (or the viewer's settings). GPU-only options are passed through untouched on a CPU
session. Also here: the graph surgery that appends an ArgMax to a scores model, so that on a GPU only a uint8
label map crosses back to the host instead of C float planes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ModelError, one_line
from app.inference.model.sidecar import RUNTIME_KEYS
from app.inference.runtime.providers import CPU, CUDA, TENSORRT
from app.io.files import file_sha256

DEVICE_LABELS_NAME = "seglens_labels"


@dataclass(frozen=True)
class RuntimeOptions:
    intra_op_threads: int = 0  # 0: ONNX Runtime's default (one per physical core)
    # Spinning intra-op threads keep their cores busy between operators, so a folder run's decode/write threads
    # can only run by preempting them (the whole operator then waits for the preempted thread). Off: the same
    # raw session.run speed on these machines (6.40 vs 6.31 images/s, 8 alternating rounds) and ~8 % more
    # pipeline throughput (docs/PERFORMANCE.md). `--runtime allow_spinning=true` restores ORT's default.
    allow_spinning: bool = False
    cudnn_conv_algo_search: str = "HEURISTIC"  # image sizes vary: EXHAUSTIVE would re-search every new shape
    arena_extend_strategy: str = "kNextPowerOfTwo"
    gpu_mem_limit_mb: int = 0  # 0 = no limit
    prefer_nhwc: bool = False
    use_tf32: bool = True
    tensorrt: bool = False  # TensorRT first (engine cache in the user cache folder), CUDA and CPU behind it
    tensorrt_fp16: bool = False
    device_argmax: str = "auto"  # auto: on a GPU, for fixed-shape score models
    io_binding: str = "auto"  # auto: on a GPU, for fixed-shape models

    def merged(self, values: dict[str, Any]) -> RuntimeOptions:
        """A copy with `values` (already validated) applied."""
        return dataclasses.replace(self, **values)

    def cuda_provider_options(self, device_id: int) -> dict[str, str]:
        options = {
            "device_id": str(device_id),
            "cudnn_conv_algo_search": self.cudnn_conv_algo_search,
            "arena_extend_strategy": self.arena_extend_strategy,
            "prefer_nhwc": "1" if self.prefer_nhwc else "0",
            "use_tf32": "1" if self.use_tf32 else "0",
        }
        if self.gpu_mem_limit_mb > 0:
            options["gpu_mem_limit"] = str(self.gpu_mem_limit_mb * 1024 * 1024)
        return options

    def tensorrt_provider_options(self, device_id: int, cache_dir: Path) -> dict[str, str]:
        return {
            "device_id": str(device_id),
            "trt_engine_cache_enable": "True",
            "trt_engine_cache_path": str(cache_dir),
            "trt_timing_cache_enable": "True",
            "trt_fp16_enable": "True" if self.tensorrt_fp16 else "False",
        }

    def providers(self, *, gpu: bool, device_id: int, available: list[str],
                  model_path: Path | None = None) -> list[Any]:
        """The provider list for InferenceSession, best first; the CPU always last as the fallback.
        `model_path` keys TensorRT's engine cache to that file's content."""
        if not gpu:
            return [CPU]
        chosen: list[Any] = []
        if self.tensorrt and TENSORRT in available:
            chosen.append((TENSORRT, self.tensorrt_provider_options(device_id, tensorrt_cache_dir(model_path))))
        chosen += [(CUDA, self.cuda_provider_options(device_id)), CPU]
        return chosen

    def wants_device_argmax(self, *, on_gpu: bool, fixed_shape: bool, scores: bool) -> bool:
        if not scores or self.device_argmax == "off":
            return False
        return self.device_argmax == "on" or (on_gpu and fixed_shape)

    def wants_io_binding(self, *, on_gpu: bool, fixed_shape: bool) -> bool:
        return self.io_binding == "on" or (self.io_binding == "auto" and on_gpu and fixed_shape)


def parse_runtime_arguments(pairs: list[str]) -> dict[str, Any]:
    """`["tensorrt=true", "gpu_mem_limit_mb=4096"]` → validated values; ValueError names the key."""
    from app.guard.yaml_load import YAMLRefused, load_yaml

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or key not in RUNTIME_KEYS:
            raise ValueError(f"--runtime {pair!r}: expected KEY=VALUE with KEY one of {', '.join(RUNTIME_KEYS)}")
        try:
            values[key] = RUNTIME_KEYS[key](load_yaml(raw, source=f"--runtime {key}", what="value"))
        except YAMLRefused as exc:  # it names the option already
            raise ValueError(str(exc)) from None
        except ValueError as exc:
            raise ValueError(f"--runtime {key}: {exc}") from exc
    return values


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
