"""A 3D (volumetric) model's spec: a 5-D float input [N, C, D, H, W] with an output [N, K, D, H, W] (scores or
logits, kind "scores"; K == 1: kind "binary", as a 2D [N,1,H,W] map) or an [N, D, H, W] label volume is a 3D
segmentation model.

Its input, output and VolumeInputSpec (app.inference.model.spec) are resolved here from the graph and the sidecar's
3D keys (`input.patch`, `spacing`, `axes`, `grid`, `normalize`, `tile`, `tta`, `output.activate`), each value
with its source; the 2D-only keys are refused on a 3D model, and the 3D-only keys on a 2D one, each in one line
naming the key.
"""

from __future__ import annotations

import math
from typing import Any

from app.inference.model.nnunet_recipe import NnunetRecipe, RecipeError, recipe_from_sidecar
from app.inference.model.onnx_graph import GraphInfo, TensorInfo
from app.inference.model.resolver import Resolver
from app.inference.model.shapes import FLOAT_INPUTS, INT_DTYPES, dims_text, fixed_dims
from app.inference.model.sidecar import MAX_PATCH_SIDE
from app.inference.model.spec import InputSpec, Normalize3D, OutputSpec, Tile3D, VolumeInputSpec
from app.inference.model.validators import shown
from app.spelling import counted

MAX_VOLUME_CHANNELS = 16  # nnU-Net's multi-modal MR models take 4; more is a channels-last input misread
MAX_PATCH_VOXELS = 1 << 27  # 134M voxels (512 MiB of float32 per channel): the warm-up allocates one patch
_MAX_DETECTED_DIVISOR = 32
_BLENDS_3D = ("gaussian", "constant")
_NORMALIZE = "input.normalize."
_PLAIN_NORMALIZE = ("input.scale", "input.mean", "input.std")
_3D_ONLY = ("input.patch", "input.spacing", "input.axes", "input.tta", "input.tile.pad", "input.grid",
            "output.activate")
_2D_ONLY = {  # key: why it does not apply to a 3D model
    "input.size": "a 3D model's patch is input.patch: [D, H, W]",
    "input.tile.size": "a 3D model's patch is input.patch: [D, H, W]",
    "input.tile.max_pixels": "a 3D model always runs on patches of the volume (input.patch)",
    "input.window": "a 3D model's intensities are set by input.normalize: {kind: ct, clip: [lo, hi], mean, std}",
    "input.range": "a 3D model's intensities are set by input.normalize: {kind: ct, clip: [lo, hi], mean, std}",
    "input.color": "a 3D model's input is a volume's intensities, not colours",
    "input.color_matters": "a 3D model's input is a volume's intensities, not colours",
}

_2D_CLEANING = {"postprocess.min_area": 0, "postprocess.close_kernel": 1}  # key: its value that does nothing


def is_volume_model(graph: GraphInfo) -> bool:
    """Whether the model takes one 5-D input (then it is a 3D model, or refused as one)."""
    return len(graph.inputs) == 1 and graph.inputs[0].shape is not None and len(graph.inputs[0].shape) == 5


def refuse_3d_keys(r: Resolver) -> None:
    """On a 2D model, a 3D-only sidecar key would silently do nothing: refused, naming it."""
    key = next((k for k in r.overrides if k in _3D_ONLY or k.startswith(_NORMALIZE)), None)
    if key is not None:
        raise r.sidecar_error(key, "applies to 3D models (a 5-D [N, C, D, H, W] input), but this model's input "
                                   "is 4-D")


def volume_parts(r: Resolver, *, max_classes: int) -> tuple[InputSpec, OutputSpec, VolumeInputSpec]:
    """The input, output and volume spec of a 3D model (is_volume_model), refused in one line when a part of it
    or of its sidecar does not fit."""
    _refuse_2d_keys(r)
    t, channels, dims = _volume_input(r)
    out = _volume_output(r, dims, max_classes=max_classes)  # what the model is, before what it asks of a sidecar
    patch = _patch(r, dims, channels)
    divisor = _divisor(r, dims, patch)
    normalize = _normalize(r)
    volume = VolumeInputSpec(
        patch=patch, spacing=r.pick("input.spacing", None, "default"), axes=r.pick("input.axes", "native", "default"),
        normalize=normalize, tile=_tile(r, t), tta=r.pick("input.tta", (), "default"), size_divisor=divisor,
        nnunet=_recipe(r, channels, out), grid=r.pick("input.grid", "centre", "default"),
        activate=_activate(r, out),
    )
    inp = InputSpec(
        name=t.name, layout="NCDHW", channels=channels, dtype=t.dtype, model_hw=(patch[1], patch[2]),
        size=(patch[1], patch[2]), resize="tile", size_divisor=divisor,
        color="gray",  # a volume's intensities: no colour order (3D code reads spec.volume)
        scale=normalize.scale, mean=(normalize.mean,) * channels, std=(normalize.std,) * channels,
        modality=r.pick("input.modality", (), "default"),
    )
    return inp, out, volume


def _recipe(r: Resolver, channels: int, out: OutputSpec) -> NnunetRecipe | None:
    """The sidecar's nnunet: section, checked against the graph's channels and outputs."""
    outputs = r.graph.outputs[0].shape
    count = outputs[1] if outputs is not None and len(outputs) == 5 and isinstance(outputs[1], int) else 1
    try:
        recipe = recipe_from_sidecar(r.overrides, channels=channels, outputs=count)
    except RecipeError as exc:
        raise r.sidecar_error(f"nnunet.{exc.key}", exc.problem) from None
    if recipe is not None:
        if out.kind != "scores" and recipe.parts is None and recipe.regions is None:
            raise r.sidecar_error("nnunet", "applies to a model whose output is [N, K, D, H, W] logits")
        if key := next((k for k in r.overrides if k.startswith(_NORMALIZE) or k in _PLAIN_NORMALIZE), None):
            raise r.sidecar_error(key, "does nothing beside an nnunet: section (its channels: normalise the input)")
        if key := next((k for k in ("input.grid", "output.activate") if k in r.overrides), None):
            raise r.sidecar_error(key, "does nothing beside an nnunet: section (it resamples and activates as "
                                       "nnU-Net does)")
        r.sources["nnunet"] = "sidecar"
    return recipe


def _activate(r: Resolver, out: OutputSpec) -> str:
    """output.activate: where the 3D path activates the model's outputs (each patch, the blend, the volume's grid)."""
    activate: str = r.pick("output.activate", "each_patch", "default")
    if activate != "each_patch" and out.kind == "labels":
        raise r.sidecar_error("output.activate", f"is {activate}, but the model's output is a label volume (its "
                                                 "patches vote; there is nothing to activate)")
    return activate


def _refuse_2d_keys(r: Resolver) -> None:
    for key, why in _2D_ONLY.items():
        if key in r.overrides:
            raise r.sidecar_error(key, f"applies to 2D models: {why}")
    for key, off in _2D_CLEANING.items():  # 0 (off) is harmless; a cleaning that would do nothing is refused
        if r.overrides.get(key, off) > off:
            raise r.sidecar_error(key, f"is {r.overrides[key]}, but it cleans a 2D mask in pixels and a 3D model's "
                                       "labels are not cleaned: judge its 3D components with a verdict rule, "
                                       "fail_if: {min_component_ml: …}")
    resize = r.overrides.get("input.resize", "tile")
    if resize != "tile":
        raise r.sidecar_error("input.resize", f"is {resize}, but a 3D model runs on patches of the volume "
                                              "(input.patch, input.tile), never resized as a whole")


def _volume_input(r: Resolver) -> tuple[TensorInfo, int, tuple[int | None, int | None, int | None]]:
    """The 5-D input: (tensor, channels, D/H/W with None for dynamic sides)."""
    t = r.graph.inputs[0]
    shape = t.shape or ()
    if t.dtype not in FLOAT_INPUTS:
        raise r.fail(f"a 3D model's input must be float32 or float16 [N, C, D, H, W], got {t.dtype}")
    channels = shape[1]
    if not isinstance(channels, int) or not 1 <= channels <= MAX_VOLUME_CHANNELS:
        if isinstance(shape[4], int) and 1 <= shape[4] <= MAX_VOLUME_CHANNELS:
            raise r.fail("the 5-D input looks channels-last [N, D, H, W, C]; SegLens takes 3D models channels-first "
                         "[N, C, D, H, W]")
        raise r.fail(f"the 5-D input's channel axis (axis 1 of [N, C, D, H, W]) must be fixed at 1 to "
                     f"{MAX_VOLUME_CHANNELS}, got {dims_text(shape[1:2])}")
    if isinstance(shape[0], int) and shape[0] != 1:
        raise r.fail(f"the model's batch size is fixed at {shape[0]}; SegLens runs one patch at a time unless "
                     "the batch axis is dynamic (export with batch 1 or a dynamic batch axis)")
    d, h, w = fixed_dims(shape[2:])
    if any(side is not None and not 0 < side <= MAX_PATCH_SIDE for side in (d, h, w)):
        raise r.fail(f"the model's input is fixed at {dims_text(shape[2:])} voxels (D×H×W); SegLens handles patch "
                     f"sides from 1 to {MAX_PATCH_SIDE}")
    return t, channels, (d, h, w)


def _patch(r: Resolver, dims: tuple[int | None, ...], channels: int) -> tuple[int, int, int]:
    """The patch: the sidecar's input.patch (checked against the sides the model fixes), else the fixed input's."""
    if "input.patch" in r.overrides:
        patch: tuple[int, int, int] = r.pick("input.patch", None)
        if any(fixed is not None and fixed != side for fixed, side in zip(dims, patch, strict=True)):
            raise r.sidecar_error("input.patch", f"is {list(patch)}, but the model's input is fixed at "
                                                 f"{dims_text(dims)} (D×H×W)")
    elif None in dims:
        problem = (f"the model's input is dynamic along D×H×W ({dims_text(dims)}): SegLens needs the patch it was "
                   "trained with")
        if r.sidecar is None:
            raise r.fail(f"{problem}; give input.patch: [D, H, W] in a sidecar")
        raise r.sidecar_error("input.patch", f"is missing: {problem}, as [D, H, W]")
    else:
        patch = r.pick("input.patch", (dims[0], dims[1], dims[2]))
    if math.prod(patch) * channels > MAX_PATCH_VOXELS:
        raise r.sidecar_error("input.patch", f"is {list(patch)} × {counted(channels, 'channel')}, over "
                                             f"{MAX_PATCH_VOXELS} voxels in one patch")
    return patch


def _divisor(r: Resolver, dims: tuple[int | None, ...], patch: tuple[int, int, int]) -> int:
    """input.size_divisor (a whole-volume run pads to it); detected: 1 for a fixed input, else the largest power of
    two up to 32 dividing every patch side (a UNet's patch is a multiple of its poolings' strides)."""
    detected = 1
    while None in dims and detected < _MAX_DETECTED_DIVISOR and all(side % (detected * 2) == 0 for side in patch):
        detected *= 2
    divisor: int = r.pick("input.size_divisor", detected)
    if any(side % divisor for side in patch):
        raise r.sidecar_error("input.size_divisor", f"is {divisor}, but the patch {list(patch)} is not a multiple "
                                                    "of it")
    return divisor


def _normalize(r: Resolver) -> Normalize3D:
    """input.normalize (ct or zscore), else the plain input.scale/mean/std: (x * scale - mean) / std."""
    values = {k.removeprefix(_NORMALIZE): v for k, v in r.overrides.items() if k.startswith(_NORMALIZE)}
    plain = [k for k in _PLAIN_NORMALIZE if k in r.overrides]
    if values and plain:
        raise r.sidecar_error("input.normalize", f"and '{plain[0]}' both given: use one")
    if not values:
        return _scale_normalize(r, plain)
    r.sources["input.normalize"] = "sidecar"
    kind = values.get("kind")
    if kind is None:
        raise r.sidecar_error(f"{_NORMALIZE}kind", "is missing: ct (clip, then the training set's mean and std) or "
                                                   "zscore (each volume's own mean and std)")
    if kind == "ct":
        missing = next((k for k in ("mean", "std") if k not in values), None)
        if missing:
            raise r.sidecar_error(f"{_NORMALIZE}{missing}", f"is missing: kind ct needs the training set's {missing} "
                                                            "intensity (after the clip)")
        if "nonzero" in values:
            raise r.sidecar_error(f"{_NORMALIZE}nonzero", "applies to kind zscore (ct uses the training set's "
                                                          "statistics)")
        return Normalize3D("ct", clip=values.get("clip"), mean=values["mean"], std=values["std"])
    extra = next((k for k in ("clip", "mean", "std") if k in values), None)
    if extra:
        raise r.sidecar_error(f"{_NORMALIZE}{extra}", "applies to kind ct (zscore uses each volume's own mean and "
                                                      "std)")
    return Normalize3D("zscore", nonzero=values.get("nonzero", False))


def _scale_normalize(r: Resolver, plain: list[str]) -> Normalize3D:
    scale: float = r.pick("input.scale", 1.0, "default")  # a volume is in real units (HU), not 0..255
    mean: tuple[float, ...] = r.pick("input.mean", (0.0,), "default")
    std: tuple[float, ...] = r.pick("input.std", (1.0,), "default")
    for key, values in (("input.mean", mean), ("input.std", std)):
        if len(values) != 1:
            raise r.sidecar_error(key, f"has {len(values)} values, but a 3D model's input is normalised with one: "
                                       "(x * scale - mean) / std")
    if std[0] <= 0:
        raise r.sidecar_error("input.std", f"must be above 0 for a 3D model, got {shown(std[0])}")
    r.sources["input.normalize"] = "sidecar" if plain else "default"
    return Normalize3D("scale", mean=mean[0], std=std[0], scale=scale)


def _tile(r: Resolver, t: TensorInfo) -> Tile3D:
    overlap: float = r.pick("input.tile.overlap", 0.5, "default")
    if not 0.0 <= overlap < 1.0:
        raise r.sidecar_error("input.tile.overlap", f"must be at least 0 and below 1 (the share of a patch "
                                                    f"overlapping its neighbour), got {shown(overlap)}")
    blend: str = r.pick("input.tile.blend", "gaussian", "default")
    if blend not in _BLENDS_3D:
        raise r.sidecar_error("input.tile.blend", f"is {blend}, but a 3D model's patches blend "
                                                  f"{' | '.join(_BLENDS_3D)}")
    batch: int = r.pick("input.tile.batch", 1, "default")
    fixed = (t.shape or (None,))[0]
    if batch > 1 and isinstance(fixed, int):
        raise r.sidecar_error("input.tile.batch", f"is {batch}, but the model's batch axis is fixed at {fixed} "
                                                  "(export it with a dynamic batch axis to run patches in batches)")
    pad: str = r.pick("input.tile.pad", "zeros", "default")  # the sidecar's schema allows zeros | edge
    return Tile3D(overlap=overlap, blend=blend, batch=batch, pad=pad)


def _volume_output(r: Resolver, dims: tuple[int | None, ...], *, max_classes: int) -> OutputSpec:
    """[N, K, D, H, W] scores (K == 1: binary) or an [N, D, H, W] (or [N, 1, D, H, W]) integer label volume."""
    t = r.graph.outputs[0]
    shape: tuple[Any, ...] = t.shape or ()
    final = r.graph.final_ops.get(t.name, "")
    is_labels = t.dtype in INT_DTYPES or final == "ArgMax"
    threshold: float = r.pick("output.threshold", 0.5, "default")
    if len(shape) == 4 and is_labels:
        _same_grid(r, shape[1:], dims)
        return OutputSpec(t.name, "labels", None, r.activation(final, None, "none"), threshold)
    if len(shape) != 5 or t.dtype not in (*FLOAT_INPUTS, "float64", *INT_DTYPES):
        raise r.fail("not a 3D segmentation model: its first output must be [N, K, D, H, W] scores or an "
                     "[N, D, H, W] label volume")
    _same_grid(r, shape[2:], dims)
    classes = shape[1]
    if classes == 1 and is_labels:  # ArgMax with keepdims=1
        return OutputSpec(t.name, "labels", 1, r.activation(final, None, "none"), threshold)
    if is_labels:
        raise r.fail(f"not a 3D segmentation model: its first output is {t.dtype} with {dims_text(shape[1:2])} "
                     "channels (integer labels come as [N, D, H, W] or [N, 1, D, H, W])")
    if not isinstance(classes, int):
        raise r.fail("the output's class axis (axis 1 of [N, K, D, H, W]) is dynamic; SegLens needs the number of "
                     "classes fixed")
    if not 1 <= classes <= max_classes:
        raise r.fail(f"the output has {classes} classes; SegLens masks hold at most {max_classes}")
    if classes == 1:  # as 2D's [N,1,H,W]: the threshold tuning, provenance and score rules key on "binary"
        return OutputSpec(t.name, "binary", 1, r.activation(final, "Sigmoid", "sigmoid"), threshold)
    return OutputSpec(t.name, "scores", 1, r.activation(final, "Softmax", "softmax"), threshold)


def _same_grid(r: Resolver, out_dims: tuple[Any, ...], in_dims: tuple[int | None, ...]) -> None:
    """A sliding window blends one score per input voxel: an output on another grid (a downsampled head) is
    refused."""
    if any(isinstance(o, int) and i is not None and o != i for o, i in zip(out_dims, in_dims, strict=True)):
        raise r.fail(f"not a 3D segmentation model SegLens can run: the output's D×H×W {dims_text(out_dims)} differs "
                     f"from the input's {dims_text(in_dims)} (SegLens needs one score per input voxel)")
