"""The part of building a spec that every model kind shares: a value picked from the sidecar, else detected or a
default, with its source recorded; and the one-line errors naming the model file (and its tensors) or the sidecar
key. app.inference.model.builder (2D) and app.inference.model.spec3d (3D) build on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.errors import ModelError, SidecarError
from app.inference.model.onnx_graph import GraphInfo, TensorInfo


class Resolver:
    """Resolves each value from sidecar > metadata > detection > default, recording the source."""

    def __init__(self, path: Path, sidecar: Path | None, graph: GraphInfo, overrides: dict[str, Any]):
        self.path, self.sidecar, self.graph, self.overrides = path, sidecar, graph, overrides
        self.sources: dict[str, str] = {}

    def pick(self, key: str, detected: Any, source: str = "detected") -> Any:
        if key in self.overrides:
            self.sources[key] = "sidecar"
            return self.overrides[key]
        self.sources[key] = source
        return detected

    def activation(self, final_op: str, applied_op: str | None, otherwise: str) -> str:
        """The output's activation: none where the graph ends in it already (or the output needs none), else
        `otherwise`; the sidecar's output.activation over both (`auto`: the detected one)."""
        detected = "none" if applied_op is None or final_op == applied_op else otherwise
        chosen: str = self.pick("output.activation", detected)
        return detected if chosen == "auto" else chosen

    def fail(self, problem: str) -> ModelError:
        return ModelError(f"{self.path}: {problem} ({self._io()})")

    def sidecar_error(self, key: str, problem: str) -> SidecarError:
        return SidecarError(f"{self.sidecar}: '{key}' {problem}")

    def _io(self) -> str:
        return f"inputs: {described(self.graph.inputs)}; outputs: {described(self.graph.outputs)}"


def described(tensors: tuple[TensorInfo, ...], *, most: int = 4, width: int = 120) -> str:
    """Tensors for an error message: their names and number are the model file's to choose, so both are capped."""
    shown = [shortened(t.describe(), width) for t in tensors[:most]]
    more = f" (+{len(tensors) - most} more)" if len(tensors) > most else ""
    return (", ".join(shown) or "none") + more


def shortened(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."
