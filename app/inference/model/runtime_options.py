"""RuntimeOptions: how ONNX Runtime is asked to run a model (threads, CUDA/TensorRT tuning, where the argmax
happens), as one record from the sidecar's `runtime:` section, the CLI's `--runtime KEY=VALUE` or the viewer's
settings, each value checked by the sidecar's check (app.inference.model.sidecar.RUNTIME_KEYS).

A record knows which options were written (`given`), so that they stack, lowest to highest priority: defaults,
the sidecar's, the command line's (`merged`). The spec carries the sidecar's; app.inference.runtime.options makes
ONNX Runtime's provider list from a record, and app.inference.runtime.session opens the session with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
    # the options written (by `written`, or any value other than its default): they win when merged over others
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        changed = {f.name for f in dataclasses.fields(self) if f.name != "given" and getattr(self, f.name) != f.default}
        object.__setattr__(self, "given", frozenset(self.given | changed))

    @classmethod
    def written(cls, values: Mapping[str, Any]) -> RuntimeOptions:
        """The record of checked `values` (`{"tensorrt": True}`, as RUNTIME_KEYS returns them), each one given."""
        known = [f.name for f in dataclasses.fields(cls) if f.name != "given"]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown runtime option {unknown[0]!r} (expected one of: {', '.join(known)})")
        return cls(**values, given=frozenset(values))

    def merged(self, over: RuntimeOptions | None) -> RuntimeOptions:
        """A copy with the options `over` was given in place of these."""
        if over is None:
            return self
        values = {name: getattr(over, name) for name in over.given}
        return dataclasses.replace(self, **values, given=self.given | over.given)

    def wants_device_argmax(self, *, on_gpu: bool, fixed_shape: bool, scores: bool) -> bool:
        if not scores or self.device_argmax == "off":
            return False
        return self.device_argmax == "on" or (on_gpu and fixed_shape)

    def wants_io_binding(self, *, on_gpu: bool, fixed_shape: bool) -> bool:
        return self.io_binding == "on" or (self.io_binding == "auto" and on_gpu and fixed_shape)


def parse_runtime_arguments(pairs: list[str]) -> RuntimeOptions:
    """`["tensorrt=true", "gpu_mem_limit_mb=4096"]` → the record of those options; ValueError names the key."""
    from app.guard.yaml_load import YAMLRefused, load_yaml
    from app.inference.model.sidecar import RUNTIME_KEYS

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
    return RuntimeOptions.written(values)
