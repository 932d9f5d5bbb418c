"""Tiny 3D ONNX models whose right answer is computable (onnx.helper, as tests/onnx_factory.py), the ModelSpec a
sidecar would give them, and the reference packages (torch, MONAI) that skip locally but fail in CI.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper
from onnx_factory import FLOAT, INT64, const, save, tensor

from app.inference.model.onnx_graph import TensorInfo
from app.inference.model.spec import (
    ClassInfo,
    InputSpec,
    ModelSpec,
    Normalize3D,
    OutputSpec,
    PostprocessSpec,
    Tile3D,
    VolumeInputSpec,
)

DYNAMIC = ["N", 1, "D", "H", "W"]


def require(module: str, install: str) -> ModuleType:
    """`module` imported; skipped where it is missing, except in CI (`CI` set, as .ci/run does), where its absence
    fails the test: the reference check must not silently stop running (as tests/dciodvfy.py)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"{module} is not installed: {install}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must run the reference comparison)")
        pytest.skip(message)


def conv3d(path: Path, kernel: np.ndarray, *, bias: np.ndarray | None = None, activation: str | None = None,
           channels: int = 1) -> Path:
    """[N, C, D, H, W] → Conv3d(kernel [K, C, kd, kh, kw], zero padding keeping the size) [→ Sigmoid/Softmax]
    → [N, K, D, H, W], D/H/W and N dynamic."""
    kernel = np.asarray(kernel, np.float32)
    classes, _, *sizes = kernel.shape
    pads = [s // 2 for s in sizes] * 2
    inputs = ["image", "w"] + (["b"] if bias is not None else [])
    out = "scores" if activation is None else "pre"
    nodes = [helper.make_node("Conv", inputs, [out], pads=pads, kernel_shape=sizes)]
    if activation == "sigmoid":
        nodes.append(helper.make_node("Sigmoid", ["pre"], ["scores"]))
    elif activation == "softmax":
        nodes.append(helper.make_node("Softmax", ["pre"], ["scores"], axis=1))
    initializers = [const("w", kernel)] + ([const("b", np.asarray(bias, np.float32))] if bias is not None else [])
    return save(path, nodes, [tensor("image", FLOAT, ["N", channels, "D", "H", "W"])],
                [tensor("scores", FLOAT, ["N", classes, "D", "H", "W"])], initializers)


def pointwise(path: Path, gains: tuple[float, ...] = (4.0, -4.0, 1.0), offsets: tuple[float, ...] = (-2.0, 2.0, 0.0),
              *, activation: str | None = "softmax") -> Path:
    """Class k's logit = gains[k] · x + offsets[k] per voxel: the answer does not depend on the patches at all."""
    kernel = np.asarray(gains, np.float32).reshape(-1, 1, 1, 1, 1)
    return conv3d(path, kernel, bias=np.asarray(offsets, np.float32), activation=activation)


def box_sigmoid(path: Path, *, classes: int = 1) -> Path:
    """A symmetric 3×3×3 box filter (mean) of x, then sigmoid(8 · (mean − 0.5)); class k adds k to the logit."""
    kernel = np.full((classes, 1, 3, 3, 3), 8.0 / 27.0, np.float32)
    bias = np.array([-4.0 + k for k in range(classes)], np.float32)
    return conv3d(path, kernel, bias=bias, activation="sigmoid")


def shift_w(path: Path) -> Path:
    """out[d, h, w] = x[d, h, w + 1] (0 past the last column): tells the tensor's W axis from the others."""
    kernel = np.zeros((1, 1, 3, 3, 3), np.float32)
    kernel[0, 0, 1, 1, 2] = 1.0
    return conv3d(path, kernel)


def labels_argmax(path: Path) -> Path:
    """[N, 1, D, H, W] → int64 labels [N, D, H, W]: 0 below 1/3, 1 below 2/3, else 2 (argmax in the graph)."""
    kernel = np.array([-3.0, 0.0, 3.0], np.float32).reshape(3, 1, 1, 1, 1)
    bias = np.array([1.0, 0.0, -2.0], np.float32)  # logits −3x+1, 0, 3x−2: the winner changes at x = 1/3, 2/3
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["scores"], kernel_shape=[1, 1, 1]),
             helper.make_node("ArgMax", ["scores"], ["labels"], axis=1, keepdims=0)]
    return save(path, nodes, [tensor("image", FLOAT, DYNAMIC)], [tensor("labels", INT64, ["N", "D", "H", "W"])],
                [const("w", kernel), const("b", bias)])


def session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # two cores shared by everyone
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def runner(sess: ort.InferenceSession):
    """The raw run predict_volume and the sliding window want: the 5-D tensor → the first output."""
    name = sess.get_inputs()[0].name
    return lambda batch: sess.run(None, {name: np.ascontiguousarray(batch, np.float32)})[0]


def volume_spec(path: Path, *, patch: tuple[int, int, int], classes: int = 1, kind: str = "scores",
                activation: str = "none", spacing: tuple[float, float, float] | None = None, axes: str = "native",
                normalize: Normalize3D | None = None, tile: Tile3D | None = None, tta: tuple[int, ...] = (),
                whole: bool = False, size_divisor: int = 1, threshold: float = 0.5, channels: int = 1) -> ModelSpec:
    """The ModelSpec a 3D model's sidecar gives (built here so these tests need only the records)."""
    volume = VolumeInputSpec(patch=patch, spacing=spacing, axes=axes,
                             normalize=normalize or Normalize3D(kind="scale"), tile=tile or Tile3D(), tta=tta,
                             whole=whole, size_divisor=size_divisor)
    out_name = "labels" if kind == "labels" else "scores"
    names = max(classes, 2)  # a binary model's classes are background and foreground
    declared = (None, "D", "H", "W") if kind == "labels" else (None, classes, "D", "H", "W")
    return ModelSpec(
        path=path, sidecar=None, name=path.stem, task="segmentation",
        input=InputSpec(name="image", layout="NCDHW", channels=channels, dtype="float32",
                        model_hw=(None, None), size=None, resize="stretch", size_divisor=size_divisor,
                        color="gray", scale=1.0, mean=(0.0,), std=(1.0,)),
        output=OutputSpec(name=out_name, kind=kind, channel_axis=1, activation=activation, threshold=threshold),
        classes=tuple(ClassInfo(f"class {k}", None if k == 0 else (255, 0, 0)) for k in range(names)),
        postprocess=PostprocessSpec(), inputs=(), outputs=(TensorInfo(out_name, declared, "float32"),), volume=volume)


def smooth_volume(shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    """Values in [0, 1) that vary smoothly (a few low-frequency waves) plus a little noise, float32."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
    waves = sum(np.sin(2 * np.pi * (rng.random() * 2 + 0.5) * g + rng.random() * 6) for g in grids)
    volume = 0.5 + 0.15 * waves + 0.02 * rng.standard_normal(shape)
    return np.clip(volume, 0, 0.999).astype(np.float32)
