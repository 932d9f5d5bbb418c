"""Tiny 3D ONNX models for the spec, info and session tests (onnx.helper, as tests/onnx_factory.py): fixed and
dynamic D/H/W, scores, a label volume, a sigmoid binary, and shapes SegLens must refuse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper
from onnx_factory import FLOAT, INT64, const, save, tensor

DYNAMIC = ["N", 1, "D", "H", "W"]
FIXED = [1, 1, 16, 32, 32]


def scores3d(path: Path, *, shape: list = DYNAMIC, classes: int = 2, out_shape: list | None = None) -> Path:
    """[N,C,D,H,W] → [N,K,D,H,W]: class k's score = k·x + (0.5 if k == 0 else 0), x the channels' mean, so the
    argmax is 1 where x > 0.5 (and the highest class for larger x)."""
    channels = shape[1]
    weight = np.repeat(np.arange(classes, dtype=np.float32).reshape(classes, 1, 1, 1, 1) / channels, channels, 1)
    bias = np.array([0.5] + [0.0] * (classes - 1), np.float32)
    out = out_shape or [shape[0], classes, *shape[2:]]
    return save(path, [helper.make_node("Conv", ["volume", "w", "b"], ["scores"])],
                [tensor("volume", FLOAT, shape)], [tensor("scores", FLOAT, out)],
                [const("w", weight), const("b", bias)])


def labels3d(path: Path, *, shape: list = DYNAMIC, classes: int = 3) -> Path:
    """scores3d followed by ArgMax over the class axis: an [N,D,H,W] int64 label volume."""
    weight = np.arange(classes, dtype=np.float32).reshape(classes, 1, 1, 1, 1)
    bias = np.array([0.5] + [0.0] * (classes - 1), np.float32)
    nodes = [helper.make_node("Conv", ["volume", "w", "b"], ["scores"]),
             helper.make_node("ArgMax", ["scores"], ["labels"], axis=1, keepdims=0)]
    return save(path, nodes, [tensor("volume", FLOAT, shape)],
                [tensor("labels", INT64, [shape[0], *shape[2:]])], [const("w", weight), const("b", bias)])


def sigmoid3d(path: Path, *, shape: list = DYNAMIC, end_with_sigmoid: bool = True) -> Path:
    """[N,1,D,H,W] → [N,1,D,H,W]: sigmoid(20·(x − 0.5)) (or the logit alone): a binary 3D model."""
    nodes = [helper.make_node("Sub", ["volume", "half"], ["centred"]),
             helper.make_node("Mul", ["centred", "gain"], ["logit" if end_with_sigmoid else "prob"])]
    if end_with_sigmoid:
        nodes.append(helper.make_node("Sigmoid", ["logit"], ["prob"]))
    return save(path, nodes, [tensor("volume", FLOAT, shape)], [tensor("prob", FLOAT, shape)],
                [const("half", np.float32(0.5)), const("gain", np.float32(20.0))])


def identity5d(path: Path, *, shape: list, out_shape: list, elem: int = FLOAT, op: str = "Identity") -> Path:
    """A 5-D input passed through one op: for shapes SegLens must refuse."""
    kwargs = {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]} if op == "MaxPool" else {}
    return save(path, [helper.make_node(op, ["volume"], ["out"], **kwargs)],
                [tensor("volume", elem, shape)], [tensor("out", elem, out_shape)])


def classifier3d(path: Path) -> Path:
    """[N,1,D,H,W] → GlobalAveragePool → Flatten → [N,1]: a volume classifier (not segmentation)."""
    nodes = [helper.make_node("GlobalAveragePool", ["volume"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["score"])]
    return save(path, nodes, [tensor("volume", FLOAT, DYNAMIC)], [tensor("score", FLOAT, ["N", 1])])


def with_sidecar(model: Path, text: str) -> Path:
    model.with_suffix(".yaml").write_text(text)
    return model
