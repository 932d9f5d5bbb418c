"""A model output is checked before anything is drawn, decided or written from it: its dtype and shape against
what the graph declares, and NaN or ±inf in it. The checks are app.guard.answers' (the one gate for every model
answer); this module says them in the inference layer's words (InferenceError, one line naming the model file).

Every comparison with NaN is False, so a NaN score passes `score > limit`, a NaN top-1 passes `top1 < min_confidence`,
and an argmax over NaN planes gives class 0 — background, "no defect". A broken model would be passed as OK by
every rule. The policy is one and the same everywhere (CLI, Ray, the viewer, the review report, prompts): the image
is an **error**, not NG. NG says "the part has a defect"; a non-finite output says nothing about the part, only that
the model (or its export) is broken, which is what an error row means and what someone has to look at.

The finiteness check runs once, on the raw output of each image (each tile of a tiled image, each batch of 3D
patches, each prompt) before anything is derived from it — a sigmoid, a softmax or float16 would hide some
non-finite values (sigmoid(inf) = 1) and smear others. The dtype and shape check runs where the session answers
(ModelSession.run, PromptSession), so a graph that lies about its output is refused before a batch is split.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.errors import InferenceError
from app.guard.answers import AnswerRefused, Declared, check_answer, non_finite
from app.inference.model.onnx_graph import TensorInfo
from app.spelling import counted

__all__ = ["check_finite", "check_outputs", "declared", "non_finite"]

# a local session's answer is in memory already (its size bounded by the memory estimate before the run): the
# gate's answer-size cap is for what a server sends
_IN_MEMORY = 1 << 62
# the element types numpy names as ONNX does; another (bfloat16, string) is not checked by name
_NUMPY_NAMED = {"float32", "float16", "float64", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64",
                "int64", "bool"}


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


def declared(info: TensorInfo | None, name: str) -> Declared:
    """What the graph declares of output `name` (`info`: its TensorInfo, None when the graph says nothing): its
    dtype and its shape, a symbolic or unknown dimension matching any size."""
    if info is None:
        return Declared(name, ())
    dtypes = (info.dtype,) if info.dtype in _NUMPY_NAMED else ()
    shape = None if info.shape is None else tuple(d if isinstance(d, int) else None for d in info.shape)
    return Declared(name, dtypes, shape)


def check_outputs(model_name: str, wanted: Sequence[Declared], outputs: Sequence[np.ndarray], *,
                  finite: bool = False) -> None:
    """InferenceError (`model.onnx: output 'masks' has shape 1×3×128×128; declared 1×3×256×256`) when an output is
    not of its declared dtype or shape, or (`finite`) holds NaN or ±inf (check_finite's line)."""
    if len(outputs) != len(wanted):
        raise InferenceError(f"{model_name}: the session answered {counted(len(outputs), 'output')} for the "
                             f"{len(wanted)} asked ({', '.join(d.name for d in wanted)})")
    for want, array in zip(wanted, outputs, strict=True):
        try:
            check_answer(model_name, want, np.asarray(array), finite=False, max_bytes=_IN_MEMORY)
        except AnswerRefused as exc:
            raise InferenceError(str(exc)) from None
    if finite:
        check_finite(model_name, tuple(d.name for d in wanted), tuple(np.asarray(a) for a in outputs))
