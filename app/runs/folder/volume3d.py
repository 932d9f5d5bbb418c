"""A 3D model in a folder run (app.runs.folder.batch): each volume is one unit, not a stack of slices.

    prefetch   the memory estimate checked, then the volume's image read whole (VolumeStack, under the volume limit)
    inference  predict_volume on the session's own thread, `progress(patch, patches)`, stoppable between batches
    writer     the label volume and its kept probabilities handed to the VolumeAssembler at once (slice_results):
               the exports, the report's volume row and --per-slice rows are those of a 2D model's volume

A 2D image given to a 3D model is that input's one-line error; the run goes on. A model of several input channels
runs on cases (app.io.channels: nnU-Net's CASE_0000 … files, or a 4D NIfTI of its channels), gathered from the
inputs before the run (`case_inputs`).
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import OutputError, SegLensError
from app.inference.image import pipeline
from app.inference.image.labelmap import LabelMap
from app.inference.image.postprocess import image_score
from app.inference.image.preprocess import Geometry
from app.inference.model.session import ModelSession
from app.inference.model.spec import ModelSpec
from app.inference.volume3d.memory import check_memory, estimate_bytes
from app.inference.volume3d.orient import orientation
from app.inference.volume3d.predict import (
    VolumePrediction,
    model_grid,
    output_classes,
    planned_patches,
    predict_volume,
    with_tta,
)
from app.io.channels import Channels, case_stack, group_cases, model_channels
from app.io.files import atomic_write
from app.io.volumes import Volume

if TYPE_CHECKING:
    from app.io.discover import InputFile

log = logging.getLogger(__name__)
NEEDS_VOLUME = "a 3D model needs a volume: a DICOM series or NIfTI"
ALL_AXES = (0, 1, 2)
SCORES_SUFFIX = "_scores.nii.gz"


@dataclass(frozen=True)
class VolumeImage:
    """A volume's image read whole for a 3D model: native [D, H, W] (a case of several channels: [C, D, H, W])
    float32 in real units (HU)."""

    array: np.ndarray
    decode_ms: float


@dataclass(frozen=True)
class VolumeOutput:
    """A 3D model's answer for one volume, on its way to the writer."""

    prediction: VolumePrediction
    decode_ms: float


def input_problem(volume: Volume | None) -> str | None:
    """Why a 3D model cannot run on this input (one line), None when it can."""
    if volume is None:
        return NEEDS_VOLUME
    if volume.time_points > 1:
        return (f"a 4D NIfTI of {volume.time_points} time points: a 3D model runs on one 3D volume at a time "
                "(split it into one file per time point)")
    return None


def channels_of(spec: ModelSpec) -> Channels:
    """The volume channels a 3D model takes (one for a 2D model; ModelSpec.volume_channels) and their names (its
    metadata's)."""
    return model_channels(spec.volume_channels, spec.metadata)


def case_inputs(spec: ModelSpec, inputs: Sequence[InputFile]) -> list[InputFile]:
    """A folder run's inputs as `spec` takes them: a model of several channels gets one input per case, a case
    that cannot be made one line; any other model its inputs as they are."""
    return group_cases(inputs, channels_of(spec))


def check_volume_memory(spec: ModelSpec, volume: Volume, *, memory_limit: int | None = None) -> None:
    """SegLensError (one line naming the estimate and the limit) when predict_volume cannot fit: said before the
    volume's image is read, so nothing is allocated for a volume that would be refused anyway."""
    inp = spec.volume
    if inp is None:
        raise SegLensError(f"{spec.path.name}: not a 3D model")
    native = (volume.depth, volume.rows, volume.columns)
    grid = model_grid(native, volume.spacing, inp, orientation(inp.axes, volume.affine))
    classes = output_classes(spec)
    divisor = max(1, inp.size_divisor)
    patch = tuple(-(-n // divisor) * divisor for n in grid) if inp.whole else inp.patch
    needed = estimate_bytes(native, grid, classes, channels=spec.input.channels, patch=(patch[0], patch[1], patch[2]),
                            batch=1 if inp.whole else inp.tile.batch)
    check_memory(needed, memory_limit, model_shape=grid, classes=classes)


def read_volume(spec: ModelSpec, volume: Volume) -> VolumeImage:
    """The volume's image whole (a case's channels `[C, D, H, W]`; its memory estimate checked first);
    SegLensError (one line) when it cannot be."""
    problem = input_problem(volume)
    if problem:
        raise SegLensError(problem)
    check_volume_memory(spec, volume)
    started = time.perf_counter()
    stack = case_stack(volume)
    while not stack.complete:
        stack.step()
    return VolumeImage(stack.array, (time.perf_counter() - started) * 1000)


def predict(model: ModelSession, volume: Volume, image: VolumeImage, *,
            progress: Callable[[int, int], None] | None, should_stop: Callable[[], bool]) -> VolumeOutput:
    """predict_volume on the calling thread (the session's own); `pipeline.Stopped` between batches. The run's
    size (patches, the model's grid) is logged first: a small input.spacing makes a small volume a long run."""
    log.info("%s", run_size(model.spec, volume))
    prediction = predict_volume(image.array, spacing=volume.spacing, affine=volume.affine, spec=model.spec,
                                run_raw=model.run, progress=progress, should_stop=should_stop)
    return VolumeOutput(prediction, image.decode_ms)


def run_size(spec: ModelSpec, volume: Volume) -> str:
    """`3D model m.onnx: 150 patches of 8×16×16 voxels on its 24×48×44 grid at 0.5 × 0.5 × 0.5 mm (the volume:
    …)`, said before the run (no file name: it may be the patient's)."""
    inp = spec.volume
    if inp is None:
        return f"{spec.path.name}: not a 3D model"
    native = (volume.depth, volume.rows, volume.columns)
    grid = model_grid(native, volume.spacing, inp, orientation(inp.axes, volume.affine))
    at = f" at {' × '.join(f'{s:g}' for s in inp.spacing)} mm" if inp.spacing else ""
    own = f" at {' × '.join(f'{s:.4g}' for s in volume.spacing)} mm" if volume.spacing else ""
    patch = "the whole grid in one run" if inp.whole else f"{planned_patches(grid, inp)} patches of " \
        f"{'×'.join(map(str, inp.patch))} voxels"
    return (f"3D model {spec.path.name}: {patch} on its {'×'.join(map(str, grid))} grid{at} "
            f"(the volume: {'×'.join(map(str, native))} voxels{own})")


def slice_results(spec: ModelSpec, output: VolumeOutput, *, provider: str,
                  min_confidence: float | None = None) -> Iterator[pipeline.Result]:
    """The volume's prediction as one Result per slice (labels, kept probabilities, the binary score), as a 2D
    model's slices would arrive: the assembler, the verdict's slice rules and the per-slice PNGs take them as
    they are. The volume's timings are shared evenly between its slices (as a batch's are between its images),
    so the volume row's timings are the whole prediction's. `min_confidence` (multi-class --threshold) is applied
    to the kept probabilities (pipeline.relabel), never by a second model run."""
    prediction = output.prediction
    depth = prediction.labels.shape[0]
    hw = (int(prediction.labels.shape[1]), int(prediction.labels.shape[2]))
    geometry = Geometry(hw, hw, hw)
    stages = {"decode": output.decode_ms, **{k: prediction.timings.get(k, 0.0) for k in pipeline.STAGES[1:]}}
    timings = {stage: ms / max(1, depth) for stage, ms in stages.items()}
    keeps_scores = spec.output.kind in ("binary", "scores")  # a label model's votes are no scores (as in 2D)
    for k in range(depth):
        scores = prediction.probabilities[:, k] if keeps_scores else None
        result = pipeline.Result(None, "segmentation", hw, LabelMap.of_array(prediction.labels[k]), (), dict(timings),
                                 provider, scores=scores, geometry=geometry if keeps_scores else None,
                                 image_score=image_score(scores, geometry) if spec.output.kind == "binary"
                                 and scores is not None else None)
        if min_confidence is not None:
            result = pipeline.relabel(result, spec=spec, min_confidence=min_confidence)
        yield result


def write_nifti_scores(volume: Volume, probabilities: np.ndarray, out_path: Path, *, scrub: bool = False) -> Path:
    """The kept probabilities `[K, D, H, W]` as one NIfTI with the volume's affine: 3D for a binary model, else 4D
    with class k at t = k. Stored as float32 (NIfTI-1 has no 16-bit float): the kept float16 values exactly.
    Written whole or not at all."""
    import nibabel as nib

    if volume.affine is None:
        raise OutputError(f"{volume.source}: no geometry in the source, so no NIfTI scores can be written")
    data = np.ascontiguousarray(probabilities.transpose(3, 2, 1, 0), np.float32)  # [col, row, k, class]
    image: Any = nib.Nifti1Image(data[..., 0] if data.shape[3] == 1 else data, volume.affine)
    image.header.set_qform(volume.affine, code=1)
    image.header.set_sform(volume.affine, code=1)
    image.header.set_xyzt_units(xyz="mm")
    image.header.set_data_dtype(np.float32)
    image.header.set_slope_inter(1.0, 0.0)
    if scrub:
        from app.runs.privacy.deidentify import scrub_nifti_header

        scrub_nifti_header(image.header)
    atomic_write(out_path, gzip.compress(image.to_bytes(), compresslevel=1, mtime=0))
    return out_path


def with_volume_options(spec: ModelSpec, *, tile: bool | None, tta: bool, batch: int = 1) -> ModelSpec:
    """A 3D model's spec with seglens-cli run's options: `--tta` (the sidecar's mirror axes, else all three),
    `--no-tile` (the whole volume in one run: dynamic models only), `--tile` (the sliding window, as the sidecar
    says), `--batch N` (patches per run, dynamic batch axis only). ValueError (one line) when it cannot be."""
    inp = spec.volume
    if inp is None:
        return spec
    if tta:
        spec = with_tta(spec, inp.tta or ALL_AXES)
    if tile is False and inp.nnunet is not None:
        raise ValueError(f"{spec.path.name}: --no-tile does not apply to a model imported from nnU-Net: it runs "
                         "nnU-Net's own sliding window (its sidecar's nnunet: section), as nnU-Net predicts")
    if tile is not None:
        if not tile and not dynamic_volume(spec):
            raise ValueError(f"{spec.path.name}: --no-tile runs the whole volume at once, which needs a model "
                             f"whose input is dynamic along D×H×W; this one is fixed at "
                             f"{'×'.join(map(str, inp.patch))}: run it with the sliding window (without --no-tile)")
        spec = replace(spec, volume=replace(spec.volume or inp, whole=not tile))
    if batch > 1 and _batch_is_dynamic(spec):
        current = spec.volume or inp
        spec = replace(spec, volume=replace(current, tile=replace(current.tile, batch=batch)))
    return spec


def dynamic_volume(spec: ModelSpec) -> bool:
    """The model's input is dynamic along D, H and W (a whole volume of any size can go in one run)."""
    shape = spec.inputs[0].shape if spec.inputs else None
    return shape is None or len(shape) != 5 or not any(isinstance(side, int) for side in shape[2:])


def _batch_is_dynamic(spec: ModelSpec) -> bool:
    shape = spec.inputs[0].shape if spec.inputs else None
    return shape is not None and len(shape) > 0 and not isinstance(shape[0], int)
