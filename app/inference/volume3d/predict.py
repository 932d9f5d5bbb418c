"""A 3D model on a whole volume: the native array → the model's axes and spacing, normalised → the sliding window
(app.inference.volume3d.window, MONAI's) → the blended probabilities back on the native grid → labels.

    native [C, D, H, W] ──orient (view)──▶ normalise + resample (linear) ──▶ sliding window (activated, blended)
        ◀── labels (argmax / threshold) ◀── probabilities, resampled back (linear) ◀── un-orient (view) ◀──┘

The resampled grid's voxels lie at half-voxel centres or (input.grid: corner) on MONAI's Spacing grid, both ways
(app.inference.volume3d.resample). Each patch's output is activated before the blend, or (output.activate) the raw
outputs are blended and activated on the model's grid (after_blend: a MONAI bundle's Activations, then Invertd) or
after they are resampled back (after_resample: Invertd first).

Each native slice is normalised before it is resampled (nnU-Net's order: a CT's clip acts on measured HU, not on
interpolated ones). The probabilities are resampled back *before* the decision, never the labels (a nearest-
neighbour label volume would staircase); a label-output model's patches are one-hot encoded first, so overlapping
patches vote.
Memory is estimated before anything is allocated (app.inference.volume3d.memory) and a volume that cannot fit is
refused in one line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from app.errors import ModelError, SegLensError
from app.inference.image.postprocess import argmax_planes
from app.inference.model.spec import ModelSpec, Tile3D, VolumeInputSpec
from app.inference.volume3d.activate import activate, one_hot
from app.inference.volume3d.memory import check_memory, estimate_bytes
from app.inference.volume3d.nnunet.window import patch_count as nnunet_patch_count
from app.inference.volume3d.normalize import intensity
from app.inference.volume3d.orient import Orientation, orientation
from app.inference.volume3d.prediction import RawRun, TimedRun, VolumePrediction, check_voxels
from app.inference.volume3d.resample import (
    Maps,
    corner_map,
    corner_spacing,
    resample_into,
    resample_linear,
    resampled_slices,
    spacing_shape,
    store,
)
from app.inference.volume3d.window import (
    ProgressFn,
    StopFn,
    gaussian_importance,
    mirror_passes,
    patch_count,
    sliding_window,
    window_starts,
)
from app.spelling import counted

__all__ = ["VolumePrediction", "estimate_bytes", "gaussian_importance", "model_grid", "model_input",
           "native_outputs", "predict_volume", "resample_linear", "sliding_window", "window_starts"]

Shape3 = tuple[int, int, int]


@dataclass(frozen=True)
class _Plan:
    """Where and how the model runs: decided (and the memory checked) before anything big is allocated."""

    volume: VolumeInputSpec
    orient: Orientation
    native_shape: Shape3
    model_shape: Shape3
    classes: int
    to_model: Maps | None = None  # the corner grid's maps, native order (None: half-voxel centres)
    to_native: Maps | None = None  # their inverses: the model's grid back onto the volume's


def predict_volume(image: np.ndarray, *, spacing: tuple[float, float, float] | None, affine: np.ndarray | None,
                   spec: ModelSpec, run_raw: RawRun, progress: ProgressFn | None = None,
                   should_stop: StopFn | None = None, memory_limit: int | None = None) -> VolumePrediction:
    """Run a 3D model over `image` (native [D, H, W] or [C, D, H, W], real units such as HU) of a volume with
    `spacing` (mm along D, H, W) and `affine` (`Volume.affine`). `run_raw` maps the model's 5-D input tensor to
    its raw output. Raises SegLensError (one line) for a volume that cannot fit in `memory_limit` bytes (None:
    the memory available now), `pipeline.Stopped` when `should_stop()` answers True between session runs."""
    if spec.volume is not None and spec.volume.nnunet is not None:  # imported from nnU-Net: its own recipe
        from app.inference.volume3d.nnunet.predict import predict_nnunet
        return predict_nnunet(image, spacing=spacing, spec=spec, run_raw=run_raw, progress=progress,
                              should_stop=should_stop, memory_limit=memory_limit)
    native = image[None] if image.ndim == 3 else image
    plan = _plan(native.shape, spacing, affine, spec)
    _check_memory(plan, native.shape[0], memory_limit)
    started = time.perf_counter()
    model_image = _prepare(native, plan)
    prepared = time.perf_counter()
    runner = _Runner(spec, run_raw, plan.classes, activate=plan.volume.activate == "each_patch")
    blended = _blend(model_image, runner, plan, progress, should_stop)
    del model_image  # the model grid's image is not needed past the window: freed before the native outputs
    if plan.volume.activate == "after_blend":
        _activate_slices(blended, spec.output.activation)
    inferred = time.perf_counter()
    late = spec.output.activation if plan.volume.activate == "after_resample" else None
    probabilities, labels = _to_native(blended, plan, threshold=spec.output.threshold, activation=late)
    finished = time.perf_counter()
    timings = {"preprocess": (prepared - started) * 1000, "inference": (inferred - prepared) * 1000,
               "postprocess": (finished - inferred) * 1000, "session": runner.seconds * 1000}
    return VolumePrediction(probabilities=probabilities, labels=labels, patches=runner.patches, timings=timings,
                            model_shape=plan.model_shape, runs=runner.runs)


def model_grid(native_shape: Shape3, spacing: tuple[float, float, float] | None, volume: VolumeInputSpec,
               orient: Orientation) -> Shape3:
    """The grid the model runs on, in its own axes: the native shape reordered, resampled to its spacing."""
    shape = orient.model_order(native_shape)
    if volume.spacing is None:
        return shape
    if spacing is None:
        spelt = " × ".join(f"{s:g}" for s in volume.spacing)
        raise SegLensError(f"the 3D model was trained at {spelt} mm (input.spacing), and this volume has no spacing "
                           "to resample it by")
    return spacing_shape(shape, orient.model_order(spacing), volume.spacing, grid=volume.grid)


def corner_maps(native_shape: Shape3, spacing: tuple[float, float, float] | None, volume: VolumeInputSpec,
                orient: Orientation, model_shape: Shape3) -> Maps | None:
    """The corner grid's map of each native axis onto the model's grid (None: the centre grid, or no resampling):
    voxel 0 of the model's axis on the first voxel it sees, stepping by the model's spacing — an axis the model
    sees reversed starts at the native array's last voxel."""
    if volume.grid != "corner" or volume.spacing is None or spacing is None:
        return None
    target = orient.native_order(corner_spacing(orient.model_order(spacing), volume.spacing))
    sizes = orient.native_order(model_shape)
    reversed_ = orient.native_order(orient.flip)
    maps = [corner_map(native_shape[a], sizes[a], target[a] / spacing[a], from_end=bool(reversed_[a]))
            for a in range(3)]
    return maps[0], maps[1], maps[2]


def output_classes(spec: ModelSpec) -> int:
    """K: the probability channels the blend keeps (a label model's one-hot classes)."""
    if spec.output.kind == "labels":
        return spec.label_count
    declared = next((info.shape for info in spec.outputs if info.name == spec.output.name), None)
    if declared is not None and len(declared) == 5 and isinstance(declared[1], int):
        return declared[1]
    return 1 if spec.output.kind == "binary" else max(len(spec.classes), 1)


def model_input(image: np.ndarray, *, spacing: tuple[float, float, float] | None, affine: np.ndarray | None,
                spec: ModelSpec) -> np.ndarray:
    """What the 3D model sees of `image`: [C, d, h, w] float32 on its grid, in its axes, normalised (the input
    a reference sliding window, MONAI's in benchmarks/volume3d_bench.py, is given)."""
    native = image[None] if image.ndim == 3 else image
    return _prepare(native, _plan(native.shape, spacing, affine, spec))


def native_outputs(blended: np.ndarray, *, native_shape: Shape3, spacing: tuple[float, float, float] | None,
                   affine: np.ndarray | None, spec: ModelSpec) -> tuple[np.ndarray, np.ndarray]:
    """Blended probabilities on the model's grid ([K, d, h, w], its axes) as predict_volume keeps them: float16 on
    the native grid, and the uint8 labels decided from them."""
    plan = _plan((spec.input.channels, *native_shape), spacing, affine, spec)
    return _to_native(blended, plan, threshold=spec.output.threshold, activation=None)


def _plan(shape: tuple[int, ...], spacing: tuple[float, float, float] | None, affine: np.ndarray | None,
          spec: ModelSpec) -> _Plan:
    """Where the model runs for a native [C, D, H, W] volume of `shape`."""
    volume = spec.volume
    if volume is None:
        raise ModelError(f"{spec.path.name}: not a 3D model (its input is not [N, C, D, H, W])")
    if len(shape) != 4 or shape[0] != spec.input.channels:
        has = f"{counted(shape[0], 'channel')} of {list(shape[1:])}" if len(shape) == 4 else f"shape {list(shape)}"
        raise SegLensError(f"the 3D model wants {counted(spec.input.channels, 'channel')} of [D, H, W] voxels; the "
                           f"volume has {has}")
    native_shape = (shape[1], shape[2], shape[3])
    orient = orientation(volume.axes, affine)
    model_shape = model_grid(native_shape, spacing, volume, orient)
    maps = corner_maps(native_shape, spacing, volume, orient, model_shape)
    back = None if maps is None else (maps[0].inverse(), maps[1].inverse(), maps[2].inverse())
    return _Plan(volume, orient, native_shape, model_shape, output_classes(spec), maps, back)


def _check_memory(plan: _Plan, channels: int, memory_limit: int | None) -> None:
    volume = plan.volume
    patch = _whole_shape(plan.model_shape, volume) if volume.whole else volume.patch
    needed = estimate_bytes(plan.native_shape, plan.model_shape, plan.classes, channels=channels, patch=patch,
                            batch=1 if volume.whole else volume.tile.batch)
    check_memory(needed, memory_limit, model_shape=plan.model_shape, classes=plan.classes)


def _prepare(native: np.ndarray, plan: _Plan) -> np.ndarray:
    """The model's input volume [C, d, h, w] float32: each native slice normalised, resampled to the model's
    grid and written through a view in the native axes (no reoriented copy)."""
    check_voxels(native)
    model_image = np.empty((native.shape[0], *plan.model_shape), np.float32)
    mappings = [intensity(plan.volume.normalize, native[c]) for c in range(native.shape[0])]

    def source(k: int) -> np.ndarray:
        return np.stack([mapping.apply(native[c, k]) for c, mapping in enumerate(mappings)])

    resample_into(source, native.shape[1], plan.orient.to_native(model_image), plan.to_model)
    return model_image


def _whole_shape(model_shape: Shape3, volume: VolumeInputSpec) -> Shape3:
    """A whole-volume run's tensor: the grid padded to a multiple of the size divisor on each axis."""
    d = max(1, volume.size_divisor)
    sizes = [-(-n // d) * d for n in model_shape]
    return sizes[0], sizes[1], sizes[2]


def _blend(model_image: np.ndarray, runner: _Runner, plan: _Plan, progress: ProgressFn | None,
           should_stop: StopFn | None) -> np.ndarray:
    volume = plan.volume
    if not volume.whole:
        return sliding_window(model_image, runner, patch=volume.patch, tile=volume.tile, mirror_axes=volume.tta,
                              progress=progress, should_stop=should_stop)
    # one window of the padded volume: padded at the end by repeating the last voxels, cropped after; TTA still
    # applies. Not zeros: after a CT normalisation zero is the training set's mean HU (-655 for the demo model), a
    # band of tissue-like voxels the model labels (the demo called the border's air lung: 504 mL against 290)
    whole = _whole_shape(plan.model_shape, volume)
    pads = [(0, w - n) for w, n in zip(whole, plan.model_shape, strict=True)]
    padded = np.pad(model_image, ((0, 0), *pads), mode="edge") if any(a for _, a in pads) else model_image
    blended = sliding_window(padded, runner, patch=whole, tile=Tile3D(overlap=0.0, blend="constant"),
                             mirror_axes=volume.tta, progress=progress, should_stop=should_stop)
    d, h, w = plan.model_shape
    return blended if blended.shape[1:] == plan.model_shape else np.ascontiguousarray(blended[:, :d, :h, :w])


def _activate_slices(blended: np.ndarray, activation: str) -> None:
    """The blended raw outputs [K, d, h, w] activated in place, one slice at a time (no second volume)."""
    for d in range(blended.shape[1]):
        blended[:, d] = activate(blended[None, :, d], activation)[0]


def _to_native(blended: np.ndarray, plan: _Plan, *, threshold: float,
               activation: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The blended probabilities (model grid, model axes) on the native grid as float16, and their labels —
    decided slice by slice from the float32 resampled values (raw outputs given an `activation`: activated once
    resampled)."""
    view = plan.orient.to_native(blended)
    classes = blended.shape[0]
    probabilities = np.empty((classes, *plan.native_shape), np.float16)
    labels = np.empty(plan.native_shape, np.uint8)
    for d, resampled in resampled_slices(lambda k: view[:, k], view.shape[1], plan.native_shape, plan.to_native):
        block = resampled if activation is None else activate(resampled[None], activation)[0]
        store(probabilities[:, d], block)
        labels[d] = (block[0] > threshold) if classes == 1 else argmax_planes(block)
    return probabilities, labels


class _Runner(TimedRun):
    """The model's raw run as the sliding window wants it: the output activated (softmax / sigmoid / as is; not
    `activate`: raw, float32), a label output one-hot encoded."""

    def __init__(self, spec: ModelSpec, run_raw: RawRun, classes: int, *, activate: bool = True) -> None:
        super().__init__(spec, run_raw)
        self._classes, self._activate = classes, activate

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        output = super().__call__(batch)
        if self.spec.output.kind == "labels":
            return one_hot(output, self._classes, model_name=self.spec.path.name)
        if not self._activate:
            return output if output.dtype == np.float32 else output.astype(np.float32)
        return activate(output, self.spec.output.activation)


def with_tta(spec: ModelSpec, axes: tuple[int, ...]) -> ModelSpec:
    """`spec` with mirroring TTA over `axes` (() turns it off): the CLI's --tta."""
    if spec.volume is None:
        return spec
    mirror_passes(axes)  # validates the axes
    return replace(spec, volume=replace(spec.volume, tta=tuple(sorted(set(axes)))))


def planned_patches(shape: Shape3, volume: VolumeInputSpec) -> int:
    """Patch evaluations a run over a model grid of `shape` makes (windows × TTA passes)."""
    if volume.whole:
        return len(mirror_passes(volume.tta))
    if volume.nnunet is not None:
        return nnunet_patch_count(shape, volume.patch, volume.nnunet.step, volume.tta)
    return patch_count(shape, volume.patch, volume.tile, volume.tta)
