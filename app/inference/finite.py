"""A model output with NaN or ±inf in it never reaches a decision.

Every comparison with NaN is False, so a NaN score passes `score > limit`, a NaN top-1 passes `top1 < min_confidence`,
and an argmax over NaN planes gives class 0 — background, "no defect". A broken model would be passed as OK by
every rule. The policy is one and the same everywhere (CLI, Ray, the viewer, the review report): the image is an
**error**, not NG. NG says "the part has a defect"; a non-finite output says nothing about the part, only that the
model (or its export) is broken, which is what an error row means and what someone has to look at.

The check runs once, on the raw output of each image (each tile of a tiled image) before anything is derived from
it — a sigmoid, a softmax or float16 would hide some non-finite values (sigmoid(inf) = 1) and smear others.
"""

from __future__ import annotations

import numpy as np

from app.errors import InferenceError


def check_finite(model_name: str, names: tuple[str, ...], outputs: np.ndarray | tuple[np.ndarray, ...]) -> None:
    """Raise InferenceError (`model.onnx: non-finite model output 'logits': 12 NaN of 4096 values; …`) when any
    floating-point output holds NaN or ±inf. `names`: the outputs' names, in the order of `outputs`."""
    arrays = outputs if isinstance(outputs, tuple) else (outputs,)
    for index, array in enumerate(arrays):
        problem = non_finite(np.asarray(array))
        if problem:
            name = names[index] if index < len(names) else f"#{index}"
            raise InferenceError(f"{model_name}: non-finite model output '{name}': {problem}; the model is "
                                 "broken, so no decision is made from it")


def non_finite(array: np.ndarray) -> str:
    """"" when `array` is finite (or not floating point), else what is wrong (`3 NaN, 1 +inf of 64 values`)."""
    if not np.issubdtype(array.dtype, np.floating) or array.size == 0:
        return ""
    # min and max propagate NaN, and ±inf shows in one of them: two reductions, no per-element temporary
    if np.isfinite(array.min()) and np.isfinite(array.max()):
        return ""
    counts = ((int(np.count_nonzero(np.isnan(array))), "NaN"), (int(np.count_nonzero(array == np.inf)), "+inf"),
              (int(np.count_nonzero(array == -np.inf)), "-inf"))
    return ", ".join(f"{count} {what}" for count, what in counts if count) + f" of {array.size} values"
