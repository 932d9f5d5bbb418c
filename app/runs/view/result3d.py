"""A 3D model's result in the viewer: the volume's image read whole (stoppable between chunks of slices),
predict_volume run once, and everything the viewer shows afterwards made from that kept prediction, never a second
model run:

- each slice's pipeline.Result: its labels, and the kept float16 probabilities as its scores, so the threshold
  slider, the heatmap and the verdict work on it as on a 2D model's slice;
- the label volume at the reader's threshold, its voxels and mL per class (the legend) and its 3D components
  (the lesion list), decided slice by slice by the same rule as the slices shown, so the panes and the legend
  always agree with the picture.

Qt-free: the viewer's worker calls these on its own thread (app/ui/workers/worker_volume3d.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.errors import SegLensError
from app.inference.decide.lesions import Lesion
from app.inference.image import pipeline
from app.inference.image.labelmap import LabelMap
from app.inference.image.pipeline import Stopped
from app.inference.image.postprocess import image_score
from app.inference.image.preprocess import Geometry
from app.inference.model.session import ModelSession
from app.inference.model.spec import ModelSpec
from app.inference.volume3d.predict import VolumePrediction, predict_volume
from app.io.channels import case_stack, case_volume
from app.io.volumes import Volume
from app.runs.folder.lesions import volume_components
from app.runs.folder.volume3d import channels_of, check_volume_memory, input_problem

Progress = Callable[[str, int, int], None]  # (stage: "reading" | "patches", done, total)
StopFn = Callable[[], bool]


def needs_volume_line(spec: ModelSpec) -> str:
    """What a 2D image given to a 3D model says (one line)."""
    return f"{spec.path.name} is a 3D model: open a volume — a DICOM series or a NIfTI file"


@dataclass(frozen=True)
class VolumeFigures:
    """The volume at one threshold: its label volume `[D, H, W]` uint8, voxels per label value 0..255, mL per
    label value (None: the files carry no voxel size), and its 3D components (None: not counted, `lesions_why`)."""

    labels: np.ndarray
    voxels: np.ndarray
    millilitres: np.ndarray | None
    lesions: tuple[Lesion, ...] | None
    lesions_why: str = ""


class KeptPrediction:
    """predict_volume's answer for one volume under one model, and what the viewer makes of it."""

    def __init__(self, volume: Volume, prediction: VolumePrediction, *, provider: str, decode_ms: float) -> None:
        self.volume, self.prediction, self.provider, self.decode_ms = volume, prediction, provider, decode_ms
        self._figures: tuple[tuple[float, float | None, bool], VolumeFigures] | None = None

    @property
    def depth(self) -> int:
        return int(self.prediction.labels.shape[0])

    @property
    def nbytes(self) -> int:
        """The memory this result holds: its label volume, its float16 probabilities and the label volume at the
        last threshold asked for (when that is another array)."""
        held = self.prediction.labels.nbytes + self.prediction.probabilities.nbytes
        if self._figures is not None and self._figures[1].labels is not self.prediction.labels:
            held += self._figures[1].labels.nbytes
        return int(held)

    @property
    def seconds(self) -> float:
        """The whole run's time (reading, preprocess, inference, postprocess) in seconds."""
        timings = self.prediction.timings
        return (self.decode_ms + sum(timings.get(stage, 0.0) for stage in pipeline.STAGES[1:])) / 1000

    def slice_result(self, k: int, *, spec: ModelSpec, min_confidence: float | None = None, tuned: bool = False,
                     decode_ms: float = 0.0) -> pipeline.Result:
        """Slice `k` as a Result: predict_volume's own labels at the model's threshold; with `tuned` (the reader
        chose a threshold: `spec` carries it, or `min_confidence` for a multi-class model) decided again from the
        kept probabilities."""
        if not 0 <= k < self.depth:
            raise SegLensError(f"slice {k + 1} is outside the 3D model's result of {self.depth} slices")
        started = time.perf_counter()
        labels = self.prediction.labels[k]
        hw = (int(labels.shape[0]), int(labels.shape[1]))
        geometry = Geometry(hw, hw, hw)
        keeps_scores = spec.output.kind in ("binary", "scores")  # a label model's votes are no scores (as in 2D)
        scores = self.prediction.probabilities[:, k] if keeps_scores else None
        score = image_score(scores, geometry) if scores is not None and spec.output.kind == "binary" else None
        result = pipeline.Result(None, "segmentation", hw, LabelMap.of_array(labels), (), {}, self.provider,
                                 scores=scores, geometry=geometry if keeps_scores else None, image_score=score)
        if tuned:
            result = pipeline.relabel(result, spec=spec, min_confidence=min_confidence)
        # what this result took: the volume's one run (its image read whole, then the model over it), and the
        # slice's own decode and decision
        run = self.prediction.timings
        timings = {"decode": self.decode_ms + decode_ms, "preprocess": run.get("preprocess", 0.0),
                   "inference": run.get("inference", 0.0),
                   "postprocess": run.get("postprocess", 0.0) + (time.perf_counter() - started) * 1000}
        return pipeline.Result(result.path, result.task, result.image_hw, result.labels, (), timings, self.provider,
                               scores=result.scores, geometry=result.geometry, image_score=result.image_score)

    def figures(self, *, spec: ModelSpec, min_confidence: float | None = None, tuned: bool = False) -> VolumeFigures:
        """The label volume at the reader's threshold (as `slice_result` decides each slice), its per-class voxels
        and mL and its components; the last threshold's figures are kept (the legend asks on every slice shown)."""
        key = (spec.output.threshold, min_confidence, tuned)
        if self._figures is not None and self._figures[0] == key:
            return self._figures[1]
        if tuned:
            labels = np.empty_like(self.prediction.labels)
            for k in range(self.depth):
                mask = self.slice_result(k, spec=spec, min_confidence=min_confidence, tuned=True).mask
                labels[k] = 0 if mask is None else mask
        else:
            labels = self.prediction.labels
        voxels = np.bincount(labels.ravel(), minlength=256).astype(np.int64)
        found, why = volume_components(self.volume, labels)
        figures = VolumeFigures(labels, voxels, self.volume.millilitres(voxels), found, why)
        self._figures = (key, figures)
        return figures


def read_volume_image(volume: Volume, *, progress: Progress | None = None,
                      should_stop: StopFn | None = None) -> tuple[np.ndarray, float]:
    """The volume's image `[D, H, W]` (a case of several channels: `[C, D, H, W]`, app.io.channels) float32 in
    real units (app.io.stack, under the volume limit) and the time it took (ms); `pipeline.Stopped` between
    chunks of slices when `should_stop()` answers True."""
    started = time.perf_counter()
    stack = case_stack(volume)
    while not stack.complete:
        if should_stop is not None and should_stop():
            raise Stopped()
        stack.step()
        if progress is not None:
            progress("reading", stack.done, stack.depth)
    return stack.array, (time.perf_counter() - started) * 1000


def predict_kept(model: ModelSession, volume: Volume, *, progress: Progress | None = None,
                 should_stop: StopFn | None = None, memory_limit: int | None = None) -> KeptPrediction:
    """The 3D model over the whole volume, once: refused in one line (SegLensError) before anything is read when
    it is no 3D volume (for a model of several channels: no case, app.io.channels) or its memory estimate cannot
    fit; `pipeline.Stopped` between chunks of slices and between batches of patches."""
    volume = case_volume(volume, channels_of(model.spec))  # a model of several channels: the volume's case
    problem = input_problem(volume)
    if problem:
        raise SegLensError(problem)
    check_volume_memory(model.spec, volume, memory_limit=memory_limit)
    image, decode_ms = read_volume_image(volume, progress=progress, should_stop=should_stop)
    patches = None if progress is None else (lambda done, total: progress("patches", done, total))
    prediction = predict_volume(image, spacing=volume.spacing, affine=volume.affine, spec=model.spec,
                                run_raw=model.run, progress=patches, should_stop=should_stop,
                                memory_limit=memory_limit)
    return KeptPrediction(volume, prediction, provider=model.info.provider, decode_ms=decode_ms)
