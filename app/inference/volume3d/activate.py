"""A 3D model's raw patch output made into probabilities: softmax over the classes, the logistic, or the graph's own
probabilities clipped; a label output one-hot encoded, so that overlapping patches vote. (OpenCV's per-plane exp
was tried here: no faster than numpy 2's on [1, 3, 64, 128, 128] patches, ~3.5 ms.)
"""

from __future__ import annotations

import numpy as np

from app.errors import InferenceError


def activate(raw: np.ndarray, activation: str) -> np.ndarray:
    """[B, K, D, H, W] raw output → float32 probabilities: softmax over K, the logistic, or (the graph's own
    probabilities) clipped to [0, 1]."""
    raw = np.asarray(raw, np.float32)
    if activation == "softmax" and raw.shape[1] > 1:
        shifted: np.ndarray = raw - raw.max(axis=1, keepdims=True)
        np.exp(shifted, out=shifted)
        shifted /= shifted.sum(axis=1, keepdims=True)
        return shifted
    if activation == "sigmoid":
        # 0.5 (1 + tanh(x / 2)) is the logistic without exp's overflow for very negative logits
        out: np.ndarray = np.tanh(raw * np.float32(0.5))
        out += np.float32(1.0)
        out *= np.float32(0.5)
        return out
    # clipped in place when the array is no view of another array (ONNX Runtime's outputs own their buffer through
    # a capsule), else into a copy
    own = raw.flags.writeable and not isinstance(raw.base, np.ndarray)
    clipped: np.ndarray = np.clip(raw, 0.0, 1.0, out=raw if own else None)
    return clipped


def one_hot(labels: np.ndarray, classes: int, *, model_name: str) -> np.ndarray:
    """[B, D, H, W] (or [B, 1, D, H, W]) integer labels → [B, K, D, H, W] float32 votes of 0 and 1."""
    if labels.ndim == 5 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise InferenceError(f"{model_name}: the 3D model's labels run from {labels.min()} to {labels.max()}; it has "
                             f"{classes} classes (0 to {classes - 1})")
    codes = np.arange(classes, dtype=labels.dtype).reshape(1, -1, 1, 1, 1)
    votes: np.ndarray = (labels[:, None] == codes).astype(np.float32)
    return votes
