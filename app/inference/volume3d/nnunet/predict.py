"""A model imported from nnU-Net run as nnU-Net's `nnUNetPredictor.predict_from_files` runs it, on a volume in its
native [C, D, H, W] order (SimpleITK's and nnU-Net's array order, spacing along D, H, W):

    crop to non-zero ─▶ normalise each graph channel ─▶ resample (spline, separate z) ─▶ sliding window over logits
      ─▶ logits resampled back to the cropped grid ─▶ softmax + argmax / sigmoid regions / parts merged ─▶ un-crop

transpose_forward/backward are in the imported graph, and the sidecar's patch, spacing and mirroring axes are in
the volume's order, so every step here works in the volume's own axes. A 2D configuration (patch depth 1) keeps
each volume's own slice spacing and windows each slice. The probabilities kept for the viewer and the CLI are per
label on the native grid (float16): outside the crop the background's is 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from app.errors import ModelError, SegLensError
from app.inference.model.nnunet_recipe import NnunetRecipe
from app.inference.model.spec import ModelSpec, VolumeInputSpec
from app.inference.volume3d.memory import check_memory
from app.inference.volume3d.nnunet.crop import Crop, nonzero_crop
from app.inference.volume3d.nnunet.decide import Decision, decide
from app.inference.volume3d.nnunet.intensity import normalised
from app.inference.volume3d.nnunet.resample import new_shape, resample_channels
from app.inference.volume3d.nnunet.window import (
    ProgressFn,
    StopFn,
    window_logits,
)
from app.inference.volume3d.prediction import RawRun, TimedRun, VolumePrediction, check_voxels
from app.spelling import counted

Shape3 = tuple[int, int, int]
Spacing3 = tuple[float, float, float]


def predict_nnunet(image: np.ndarray, *, spacing: Spacing3 | None, spec: ModelSpec, run_raw: RawRun,
                   progress: ProgressFn | None = None, should_stop: StopFn | None = None,
                   memory_limit: int | None = None) -> VolumePrediction:
    """Run `spec` (its volume's `nnunet` recipe set) over `image` ([D, H, W] or [C, D, H, W], real units) of a volume
    with `spacing` (mm along D, H, W). One-line SegLensError for a volume that does not fit the model."""
    volume, recipe = _recipe(spec)
    native = image[None] if image.ndim == 3 else image
    _check_channels(native, recipe, spec)
    check_voxels(native)
    target = _target_spacing(volume, recipe, spacing)
    started = time.perf_counter()
    crop = nonzero_crop(native) if recipe.crop_nonzero else _whole(native)
    cropped_shape = tuple(s.stop - s.start for s in crop.box)
    assert spacing is not None
    model_shape = new_shape(cropped_shape, spacing, target)
    _check_memory(native.shape[1:], cropped_shape, model_shape, spec, recipe, memory_limit)
    model_image = _prepare(native, crop, recipe, spacing, target, model_shape)
    prepared = time.perf_counter()
    runner = TimedRun(spec, run_raw)
    logits = window_logits(model_image, _logits(runner), patch=volume.patch, step=recipe.step, mirror_axes=volume.tta,
                           progress=progress, should_stop=should_stop)
    del model_image
    inferred = time.perf_counter()
    decision = decide(logits, recipe, shape=cropped_shape, current=target, target=spacing)
    del logits
    probabilities, labels = _uncropped(decision, crop, native.shape[1:], recipe)
    finished = time.perf_counter()
    timings = {"preprocess": (prepared - started) * 1000, "inference": (inferred - prepared) * 1000,
               "postprocess": (finished - inferred) * 1000, "session": runner.seconds * 1000}
    return VolumePrediction(probabilities=probabilities, labels=labels, patches=runner.patches, timings=timings,
                            model_shape=(model_shape[0], model_shape[1], model_shape[2]), runs=runner.runs)


def _recipe(spec: ModelSpec) -> tuple[VolumeInputSpec, NnunetRecipe]:
    volume = spec.volume
    if volume is None or volume.nnunet is None:
        raise ModelError(f"{spec.path.name}: not a model imported from nnU-Net (its sidecar has no nnunet: section)")
    return volume, volume.nnunet


def _check_channels(native: np.ndarray, recipe: NnunetRecipe, spec: ModelSpec) -> None:
    if native.ndim != 4 or native.shape[0] != recipe.sources:
        has = counted(native.shape[0], "channel") if native.ndim == 4 else f"shape {list(native.shape)}"
        raise SegLensError(f"the model wants {counted(recipe.sources, 'channel')} of [D, H, W] voxels; the "
                           f"volume has {has}")


def _target_spacing(volume: VolumeInputSpec, recipe: NnunetRecipe, spacing: Spacing3 | None) -> Spacing3:
    if volume.spacing is None:
        raise ModelError("a model imported from nnU-Net needs its configuration's spacing (input.spacing)")
    if spacing is None:
        spelt = " × ".join(f"{s:g}" for s in volume.spacing)
        raise SegLensError(f"the 3D model was trained at {spelt} mm (input.spacing), and this volume has no spacing "
                           "to resample it by")
    if recipe.slice_spacing == "volume":  # a 2D configuration: each volume keeps its own slice spacing
        return spacing[0], volume.spacing[1], volume.spacing[2]
    return volume.spacing


def _whole(native: np.ndarray) -> Crop:
    d, h, w = native.shape[1:]
    return Crop((slice(0, d), slice(0, h), slice(0, w)), np.ones((d, h, w), bool))


def _prepare(native: np.ndarray, crop: Crop, recipe: NnunetRecipe, spacing: Spacing3, target: Spacing3,
             model_shape: tuple[int, ...]) -> np.ndarray:
    """[graph channels, *model_shape] float32: each channel cropped, normalised, then resampled (nnU-Net's order)."""
    out = np.empty((len(recipe.channels), *model_shape), np.float32)
    for c, norm in enumerate(recipe.channels):
        where = (norm.source, *crop.box)
        channel = normalised(native[where], norm, crop.mask)
        out[c] = resample_channels(channel[None], model_shape, spacing, target, recipe.resample)[0]
    return out


def _uncropped(decision: Decision, crop: Crop, shape: tuple[int, ...], recipe: NnunetRecipe,
               ) -> tuple[np.ndarray, np.ndarray]:
    """The decision on the whole native grid: labels 0 and background probability 1 outside the crop."""
    labels = np.zeros(shape, np.uint8)
    labels[crop.box] = decision.labels
    probabilities = np.zeros((decision.probabilities.shape[0], *shape), np.float16)
    if recipe.regions is None:
        probabilities[0] = 1
    inside = (slice(None), *crop.box)
    probabilities[inside] = decision.probabilities
    return probabilities, labels


def _check_memory(native_shape: tuple[int, ...], cropped: tuple[int, ...], model_shape: tuple[int, ...],
                  spec: ModelSpec, recipe: NnunetRecipe, limit: int | None) -> None:
    """Peak bytes: the model grid's image and logits with their weights, then the logits resampled back per
    channel beside the kept float16 probabilities and the labels."""
    outputs = _outputs(spec)
    model = int(np.prod(model_shape, dtype=np.int64))
    native = int(np.prod(native_shape, dtype=np.int64))
    crop = int(np.prod(cropped, dtype=np.int64))
    window = model * 4 * (len(recipe.channels) + outputs + 1)
    back = model * 4 * outputs + crop * (8 * 2 + 2 * outputs + 4) + native * (2 * outputs + 1)
    shape3 = (model_shape[0], model_shape[1], model_shape[2])
    check_memory(max(window, back), limit, model_shape=shape3, classes=outputs)


def _outputs(spec: ModelSpec) -> int:
    declared = next((info.shape for info in spec.outputs if info.name == spec.output.name), None)
    if declared is not None and len(declared) == 5 and isinstance(declared[1], int):
        return declared[1]
    return max(len(spec.classes), 1)


def _logits(runner: TimedRun) -> Callable[[np.ndarray], np.ndarray]:
    """The graph's raw logits for a batch, as float32."""
    return lambda batch: runner(batch).astype(np.float32, copy=False)
