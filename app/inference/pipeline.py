"""The one pipeline the CLI and the viewer's worker both call: image → tensor → model → mask or top-k.

Split in three stages so a folder run can overlap them (`prepare` on a thread pool, `infer` on the single
thread that owns the session, `to_result` — the postprocess stage — on a writer thread); `run_image` and
`run_path` chain them.
Every stage returns plain data and its time in milliseconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from app.inference import postprocess
from app.inference.postprocess import Prediction, class_pixel_counts, segmentation_mask, top_k
from app.inference.preprocess import Geometry, preprocess
from app.inference.session import ModelSession
from app.inference.spec import ModelSpec
from app.io.images import DecodedImage, from_array, read_image
from app.io.window import apply_window, range_to_uint8

STAGES = ("decode", "preprocess", "inference", "postprocess")


@dataclass(frozen=True)
class Prepared:
    """An image made ready for the model: the tensor and how to map the output back."""

    image: DecodedImage
    tensor: np.ndarray
    geometry: Geometry
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    path: Path | None
    task: str
    image_hw: tuple[int, int]
    mask: np.ndarray | None  # uint8 label map at the image's size (segmentation)
    predictions: tuple[Prediction, ...]  # top-k, best first (classification)
    timings: dict[str, float]  # ms per stage (STAGES)
    provider: str
    # float16 probabilities (C, h, w) on the model's output grid, C = 1 for binary; None for classification and
    # label-map outputs. `geometry` maps them to the image (postprocess.probability_at_image_size).
    scores: np.ndarray | None = None
    geometry: Geometry | None = None  # of the kept scores (their own grid), None without scores
    image_score: float | None = None  # binary: max foreground probability; classification: top-1; anomaly: the
    # model's score output; else None

    def class_pixels(self) -> np.ndarray:
        """Pixel count per label value 0..255 (segmentation), empty for classification."""
        return class_pixel_counts(self.mask) if self.mask is not None else np.zeros(0, np.int64)


def decode(path: str | Path, *, frame: int = 0) -> tuple[DecodedImage, float]:
    started = time.perf_counter()
    image = read_image(path, frame=frame)
    return image, _ms(started)


def prepare(spec: ModelSpec, image: DecodedImage, *, decode_ms: float = 0.0) -> Prepared:
    started = time.perf_counter()
    tensor, geometry = preprocess(spec.input, model_pixels(spec, image))
    return Prepared(image, tensor, geometry, {"decode": decode_ms, "preprocess": _ms(started)})


def model_pixels(spec: ModelSpec, image: DecodedImage) -> np.ndarray:
    """What the model sees: high-range values through the sidecar's window/range (independent of the display
    window), else the image's default 8-bit rendering."""
    inp = spec.input
    if image.raw is not None and inp.window is not None:
        return apply_window(image.raw, *inp.window, invert=image.invert)
    if image.raw is not None and inp.value_range is not None:
        levels = range_to_uint8(image.raw, *inp.value_range)
        return 255 - levels if image.invert else levels
    return image.pixels


def infer(model: ModelSession, prepared: Prepared) -> tuple[np.ndarray | tuple[np.ndarray, ...], float]:
    started = time.perf_counter()
    output = model.run(prepared.tensor)
    return output, _ms(started)


def to_result(model: ModelSession, prepared: Prepared, output: np.ndarray | tuple[np.ndarray, ...],
              inference_ms: float) -> Result:
    """The postprocess stage: the model's output → label mask at the image's size (or top-k) and the timings.
    An anomaly model's outputs (map, score[, mask]): the map clipped to 0..1 is kept as its scores, the score
    output is the image score, the mask is map >= `output.threshold` (or the model's own pred_mask)."""
    spec = model.spec
    started = time.perf_counter()
    geometry, scores, score = prepared.geometry, None, None
    if spec.output.kind == "anomaly":
        anomaly_map, score, own_mask = postprocess.anomaly_outputs(spec, output)
        mask = (segmentation_mask(spec, anomaly_map, geometry) if own_mask is None
                else postprocess.exported_mask(spec, own_mask, geometry))
        predictions = ()
        scores, geometry = postprocess.probabilities(spec, anomaly_map, geometry)
    elif spec.task == "classification":
        mask, predictions = None, top_k(spec, output)
        score = predictions[0].score if predictions else None
    else:
        mask, predictions = segmentation_mask(spec, output, geometry), ()
        kept = postprocess.probabilities(spec, output, geometry)
        if kept is not None:
            scores, geometry = kept
            score = postprocess.image_score(scores, geometry) if spec.output.kind == "binary" else None
    timings = {**prepared.timings, "inference": inference_ms, "postprocess": _ms(started)}
    return Result(prepared.image.path, spec.task, geometry.image_hw, mask, predictions, timings,
                  model.info.provider, scores, geometry if scores is not None else None, score)


def probability_at_image_size(result: Result, class_index: int | None = None) -> np.ndarray | None:
    """The kept probabilities of one class (default: the foreground, or the winning class) at the image's size,
    float32 0–1; None when the result has no scores (classification, label outputs)."""
    if result.scores is None or result.geometry is None:
        return None
    return postprocess.probability_at_image_size(result.scores, result.geometry, class_index)


def relabel(result: Result, *, spec: ModelSpec, threshold: float | None = None,
            min_confidence: float | None = None) -> Result:
    """The result with a mask decided anew from its kept scores (postprocess.relabel_scores): a different
    threshold or minimum confidence without running the model again. Unchanged when there are no scores."""
    if result.scores is None or result.geometry is None:
        return result
    mask = postprocess.relabel_scores(result.scores, result.geometry, spec, threshold=threshold,
                                      min_confidence=min_confidence)
    return replace(result, mask=mask)


def run_image(model: ModelSession, image: np.ndarray | DecodedImage, *, decode_ms: float = 0.0) -> Result:
    """Run the whole pipeline on an in-memory image (uint8 gray H×W or RGB H×W×3)."""
    decoded = image if isinstance(image, DecodedImage) else from_array(image)
    prepared = prepare(model.spec, decoded, decode_ms=decode_ms)
    output, inference_ms = infer(model, prepared)
    return to_result(model, prepared, output, inference_ms)


def run_path(model: ModelSession, path: str | Path) -> Result:
    """Decode the file at `path` and run the pipeline on it."""
    image, decode_ms = decode(path)
    return run_image(model, image, decode_ms=decode_ms)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
