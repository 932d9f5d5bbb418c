"""Pure shape reasoning: which axis of a rank-4 image tensor holds the channels (of an input and of an output),
which outputs of a model are an anomaly map and an image score, and how dims are spelt in messages."""

from __future__ import annotations

from typing import Any

from app.inference.model.onnx_graph import TensorInfo

# A tensor shape's dims are int | str | None (onnx_graph.Dim); these functions compare them with ints
Shape = tuple[Any, ...]
FLOAT_INPUTS = ("float32", "float16")
INT_DTYPES = ("int64", "int32", "uint8", "int8", "int16", "uint16", "uint32", "uint64")


def fixed_dims(dims: Shape) -> tuple[int | None, ...]:
    """Each dim as its int, None where it is dynamic (a name or unknown)."""
    return tuple(d if isinstance(d, int) else None for d in dims)


def dims_text(dims: Shape) -> str:
    """`64×?×?`: fixed dims as numbers, dynamic ones as ?."""
    return "×".join(str(d) if isinstance(d, int) else "?" for d in dims)


def image_layout(shape: Shape) -> tuple[str | None, int]:
    """("NCHW" | "NHWC", channels) when axis 1 or 3 holds 1 or 3 channels, else (None, 0)."""
    if shape[1] in (1, 3):
        return "NCHW", shape[1]
    if shape[3] in (1, 3):
        return "NHWC", shape[3]
    return None, 0


def channel_axis(out_shape: Shape, in_layout: str, in_hw: tuple[int | None, int | None]) -> int:
    """Axis 1 or 3 of a rank-4 output: the only fixed one; else the one leaving spatial dims shaped like the
    input's H/W (a fixed [1,21,16,16] head of a 64×64 model is NCHW); else the input's layout."""
    fixed = [axis for axis in (1, 3) if isinstance(out_shape[axis], int)]
    preferred = 1 if in_layout == "NCHW" else 3
    if len(fixed) == 1:
        return fixed[0]
    if len(fixed) == 2 and None not in in_hw:
        fits = [axis for axis in (1, 3) if same_aspect(spatial(out_shape, axis), in_hw)]
        if len(fits) == 1:
            return fits[0]
    return preferred


def spatial(shape: Shape, channel_axis: int) -> Shape:
    return (shape[2], shape[3]) if channel_axis == 1 else (shape[1], shape[2])


def same_aspect(hw: Shape, reference: Shape) -> bool:
    h, w = hw
    return isinstance(h, int) and isinstance(w, int) and h * reference[1] == w * reference[0] and h <= reference[0]


# anomalib's exports (open-edge-platform/anomalib, src/anomalib/models/components/base/export_mixin.py, `to_onnx`)
# name the ONNX outputs after the non-None fields of the model's `InferenceBatch` namedtuple
# (src/anomalib/data/dataclasses/torch/base.py): pred_score, pred_label, anomaly_map, pred_mask, in that order —
# so the score, not the map, comes first. The map is [N,1,H,W] float, the score [N] (or [N,1]) float, the
# mask [N,1,H,W] bool; pred_label is not needed (it is score >= the model's own threshold).
_ANOMALY_NAMES = ("anomaly_map", "pred_score", "pred_mask")
_FLOATS = ("float32", "float16", "float64")


def anomaly_outputs(outputs: tuple[TensorInfo, ...]) -> tuple[str, str, str | None] | None:
    """(map, score, mask or None) output names of an anomaly model, by anomalib's names first, else by shape:
    exactly one [N,1,H,W] float map and one [N] or [N,1] float score. None for any other model (one output, or
    outputs that do not fit)."""
    if len(outputs) < 2:
        return None
    by_name = {t.name: t for t in outputs}
    if all(n in by_name for n in _ANOMALY_NAMES[:2]) and _is_map(by_name["anomaly_map"]) \
            and _is_score(by_name["pred_score"]):
        mask = by_name.get("pred_mask")
        mask_name = mask.name if mask is not None and mask.shape is not None and len(mask.shape) == 4 else None
        return "anomaly_map", "pred_score", mask_name
    maps = [t for t in outputs if _is_map(t)]
    scores = [t for t in outputs if _is_score(t)]
    if len(maps) == 1 and len(scores) == 1:
        return maps[0].name, scores[0].name, None
    return None


def _is_map(t: TensorInfo) -> bool:
    return t.dtype in _FLOATS and t.shape is not None and len(t.shape) == 4 and t.shape[1] == 1


def _is_score(t: TensorInfo) -> bool:
    shape = t.shape
    return t.dtype in _FLOATS and shape is not None and (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1))
