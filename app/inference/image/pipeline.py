"""The one pipeline the CLI and the viewer's worker both call: image → tensor → model → mask or top-k.

Split in three stages so a folder run can overlap them (`prepare` on a thread pool, `infer` on the single
thread that owns the session, `to_result` — the postprocess stage — on a writer thread); `run_image` and
`run_path` chain them. Every stage returns plain data and its time in milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

import numpy as np

from app.errors import InferenceError
from app.guard.answers import AnswerRefused, check_declared_input
from app.inference.image import postprocess, tiling
from app.inference.image.fit import image_fit
from app.inference.image.labelmap import LabelMap, exported_labels, relabelled, segmentation_labels
from app.inference.image.postprocess import Prediction, class_pixel_counts, top_k
from app.inference.image.preprocess import Geometry, convert_color, pad_bottom_right, preprocess, to_tensor
from app.inference.model.instances import Instances
from app.inference.model.session import ModelSession
from app.inference.model.spec import DetectorSpec, InputSpec, ModelSpec
from app.inference.runtime.finite import check_finite
from app.inference.yolo.decode import detections, instances
from app.inference.yolo.letterbox import Letterbox, classify_input
from app.inference.yolo.letterbox import preprocess as letterbox_preprocess
from app.io.images import DecodedImage, from_array, read_image
from app.io.window import apply_window, range_to_uint8

Output = np.ndarray | tuple[np.ndarray, ...]  # a session run: the output, or an anomaly model's outputs
TileBatch = tuple[list[tuple[int, int]], list[np.ndarray], np.ndarray]  # (origins, crops, tensor) of one run

STAGES = ("decode", "preprocess", "inference", "postprocess")


@dataclass(frozen=True)
class Prepared:
    """An image made ready for the model: the tensor and how to map the output back. A tiled image
    (`input.resize: tile`) has no tensor: `pixels` are what the model sees, cut into tiles by `infer`."""

    image: DecodedImage
    tensor: np.ndarray | None
    geometry: Geometry
    timings: dict[str, float] = field(default_factory=dict)
    pixels: np.ndarray | None = None  # tiled runs only
    letterbox: Letterbox | None = None  # a YOLO export's: where the image sits in its input (not a classify head)

    @property
    def tiled(self) -> bool:
        return self.pixels is not None


@dataclass(frozen=True)
class TiledOutput:
    """What a tiled run leaves for the postprocess stage: the blended decision and the kept scores."""

    mask: np.ndarray  # uint8 labels at the image's size, before clean_mask
    scores: np.ndarray  # float16 (C, h, w): the image's size, or reduced by a whole factor (tiling.KEPT_PIXELS)
    highest: float  # binary: the largest blended foreground probability


class Stopped(Exception):
    """`should_stop()` answered True between two tile batches: the image has no result."""


ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class Result:
    path: Path | None
    task: str
    image_hw: tuple[int, int]
    # segmentation: the labels, kept at the model's working size and made at the image's size on use (`mask`,
    # `labels.at_size`, `labels.region`); a uint8 mask at the image's size may be given instead (wrapped)
    labels: LabelMap | None
    predictions: tuple[Prediction, ...]  # top-k, best first (classification)
    timings: dict[str, float]  # ms per stage (STAGES)
    provider: str
    # float16 probabilities (C, h, w) on the model's output grid, C = 1 for binary; None for classification and
    # label-map outputs. `geometry` maps them to the image (postprocess.probability_at_image_size).
    scores: np.ndarray | None = None
    geometry: Geometry | None = None  # of the kept scores (their own grid), None without scores
    image_score: float | None = None  # binary: max foreground probability; classification: top-1; anomaly: the
    # model's score output; else None
    warnings: tuple[str, ...] = ()  # why the image does not fit the model (app.inference.image.fit), one line each
    # a detection / instance / oriented-box model's objects, best first (their image score: the best of them)
    instances: Instances | None = None

    def __post_init__(self) -> None:
        if isinstance(self.labels, np.ndarray):
            object.__setattr__(self, "labels", LabelMap.of_array(self.labels))

    @property
    def mask(self) -> np.ndarray | None:
        """uint8 label map at the image's size (segmentation), made on first use: the image-sized work of a big
        image is done only by what needs every pixel (writing, metrics, area rules, the editor)."""
        return self.labels.full() if self.labels is not None else None

    def class_pixels(self) -> np.ndarray:
        """Pixel count per label value 0..255 (segmentation), empty for classification."""
        return class_pixel_counts(self.mask) if self.mask is not None else np.zeros(0, np.int64)


def decode(path: str | Path, *, frame: int = 0) -> tuple[DecodedImage, float]:
    started = time.perf_counter()
    image = read_image(path, frame=frame)
    return image, _ms(started)


def prepare(spec: ModelSpec, image: DecodedImage, *, decode_ms: float = 0.0) -> Prepared:
    started = time.perf_counter()
    pixels = model_pixels(spec, image)
    if spec.detector is not None:
        return _prepare_detector(spec.detector, image, pixels, decode_ms=decode_ms, started=started)
    check_declared_size(spec, pixels.shape)  # a remote server's fixed input, bounded by this picture
    inp = spec.input
    if tiling.is_tiled(inp.resize, inp.model_hw, inp.tile, pixels.shape[:2]):
        hw = (int(pixels.shape[0]), int(pixels.shape[1]))
        return Prepared(image, None, Geometry(hw, hw, hw), {"decode": decode_ms, "preprocess": _ms(started)},
                        pixels=pixels)
    tensor, geometry = preprocess(inp, pixels)
    return Prepared(image, tensor, geometry, {"decode": decode_ms, "preprocess": _ms(started)})


def _prepare_detector(detector: DetectorSpec, image: DecodedImage, pixels: np.ndarray, *, decode_ms: float,
                      started: float) -> Prepared:
    """A YOLO export's input, as Ultralytics' predictor makes it: letterboxed (app.inference.yolo.letterbox), or a
    classify head's centre crop."""
    head = detector.head
    hw = (int(pixels.shape[0]), int(pixels.shape[1]))
    if head.task == "classify":
        tensor = classify_input(pixels, head.imgsz, rgb=True)
        return Prepared(image, tensor, Geometry(hw, hw, head.imgsz), {"decode": decode_ms, "preprocess": _ms(started)})
    tensor, box = letterbox_preprocess(pixels, head.imgsz, stride=head.stride if head.dynamic else None, rgb=True)
    return Prepared(image, tensor, Geometry(hw, box.resized_hw, box.input_hw),
                    {"decode": decode_ms, "preprocess": _ms(started)}, letterbox=box)


def check_declared_size(spec: ModelSpec, image_shape: Sequence[int]) -> None:
    """For a remote model whose input has a fixed size (each picture resized to it before it is uploaded): that
    size bounded by the picture it is given (app.guard.answers.check_declared_input), so a server declaring
    16384² cannot make SegLens upload a gigabyte for a 512² picture. InferenceError in one line, before anything
    is made or sent; a local model (its file is the user's) and a dynamic input are left alone."""
    if spec.remote is None or spec.input.size is None:
        return
    try:
        check_declared_input(str(spec.path), (spec.input.channels, *spec.input.size), image_shape)
    except AnswerRefused as exc:
        raise InferenceError(str(exc)) from None


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


def infer(model: ModelSession, prepared: Prepared, *, batch: int = 1, progress: ProgressFn | None = None,
          should_stop: Callable[[], bool] | None = None) -> tuple[Output | TiledOutput, float]:
    """The model's output and its time. A tiled image is run tile by tile here (on the thread that owns the
    session), `batch` tiles per run, `progress(done, total)` after each run; `should_stop()` is asked before
    each run and ends the image with `Stopped`."""
    started = time.perf_counter()
    output: Output | TiledOutput
    if prepared.pixels is not None:  # prepared.tiled
        output = infer_tiles(model, prepared.pixels, batch=batch, progress=progress, should_stop=should_stop)
    else:
        assert prepared.tensor is not None  # an image that is not tiled has its tensor
        output = model.run(prepared.tensor)
    return output, _ms(started)


def infer_tiles(model: ModelSession, pixels: np.ndarray, *, batch: int = 1, progress: ProgressFn | None = None,
                should_stop: Callable[[], bool] | None = None) -> TiledOutput:
    """Cover `pixels` (the model's view of the image) with overlapping tiles, run them in batches and blend
    their probabilities (tiling.Accumulator)."""
    spec, inp = model.spec, model.spec.input
    image_hw = (int(pixels.shape[0]), int(pixels.shape[1]))
    tile_hw = tiling.tile_size(inp.model_hw, inp.tile)
    refused = tiling.too_many_tiles(image_hw, tile_hw, inp.tile.overlap)
    if refused:  # before the grid is made: a 1-px tile size would make a list of millions of origins
        raise InferenceError(refused)
    total = tiling.tile_count(image_hw, tile_hw, inp.tile.overlap)
    decide = (tiling.binary_decider(spec.output.threshold) if spec.output.kind == "binary"
              else postprocess.argmax_planes)
    accumulator: tiling.Accumulator | None = None
    done = 0

    def fold(chunk: list[tuple[int, int]], crops: list[np.ndarray], output: np.ndarray) -> None:
        """On the helper thread, in submission order."""
        nonlocal accumulator
        for i, (origin, crop) in enumerate(zip(chunk, crops, strict=True)):
            planes = _tile_probabilities(spec, output[i: i + 1], (int(crop.shape[0]), int(crop.shape[1])), tile_hw)
            if accumulator is None:
                accumulator = tiling.Accumulator(image_hw, tile_hw, len(planes), blend=inp.tile.blend,
                                                 decide=decide)
            accumulator.add(origin, planes)

    # session.run releases the GIL: while it runs, one helper thread cuts and normalises the next batch and
    # blends the previous batch's scores (as a folder run overlaps decoding with inference)
    with ThreadPoolExecutor(1, thread_name_prefix="seglens-tiles") as helper:
        batches = tile_batches(inp, pixels, batch)
        pending: Future[TileBatch | None] = helper.submit(next, batches, None)
        folded: Future[None] | None = None
        while (item := pending.result()) is not None:
            if should_stop is not None and should_stop():
                raise Stopped(f"stopped after {done} of {total} tiles")
            pending = helper.submit(next, batches, None)
            chunk, crops, tensor = item
            output = cast(np.ndarray, model.run(tensor))  # a tiled model has one output (tiling.untileable)
            if folded is not None:
                folded.result()  # the previous blend (it ran beside this run), and any error in it
            folded = helper.submit(fold, chunk, crops, output)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
        if folded is not None:
            folded.result()  # the last blend
    if accumulator is None:  # tiling.grid always gives a tile: this is for the type checker
        raise InferenceError("no tiles were run")
    mask, scores = accumulator.finish()
    return TiledOutput(mask, scores, accumulator.highest)


def tile_batches(inp: InputSpec, pixels: np.ndarray, batch: int = 1) -> Iterator[TileBatch]:
    """(origins, crops, tensor) per session run, `batch` tiles each, in grid order; made one run at a time
    (a 16384² image has thousands of tiles)."""
    tile_hw = tiling.tile_size(inp.model_hw, inp.tile)
    origins = tiling.grid(pixels.shape[:2], tile_hw, inp.tile.overlap)
    for first in range(0, len(origins), max(1, batch)):
        chunk = origins[first: first + max(1, batch)]
        crops = [pixels[y: y + tile_hw[0], x: x + tile_hw[1]] for y, x in chunk]
        yield chunk, crops, np.concatenate([_tile_tensor(inp, crop, tile_hw) for crop in crops])


def _tile_tensor(inp: InputSpec, crop: np.ndarray, tile_hw: tuple[int, int]) -> np.ndarray:
    """One tile as a batch-of-one tensor: colour, zero padding to the tile (a side shorter than the tile) and
    the size divisor, normalisation."""
    pixels = convert_color(np.ascontiguousarray(crop), inp.color)
    d = inp.size_divisor
    return to_tensor(inp, pad_bottom_right(pixels, (-(-tile_hw[0] // d) * d, -(-tile_hw[1] // d) * d)))


def _tile_probabilities(spec: ModelSpec, output: np.ndarray, crop_hw: tuple[int, int],
                        tile_hw: tuple[int, int]) -> np.ndarray:
    """A tile's activated scores (C, h, w) float32 on the crop's pixels (padding cut, a strided output mapped)."""
    check_finite(spec.path.name, spec.output.fetched, output)  # one broken tile: the whole image is an error
    d = spec.input.size_divisor
    geometry = Geometry(crop_hw, crop_hw, (-(-tile_hw[0] // d) * d, -(-tile_hw[1] // d) * d))
    # binary or scores (tiling.untileable): probabilities are never None here
    scores, geometry = cast(tuple[np.ndarray, Geometry], postprocess.probabilities(spec, output, geometry))
    if scores.shape[1:] == crop_hw:
        return scores.astype(np.float32)
    return np.stack([postprocess.probability_at_image_size(scores, geometry, c) for c in range(len(scores))])


def to_result(model: ModelSession, prepared: Prepared, output: Output | TiledOutput,
              inference_ms: float) -> Result:
    """The postprocess stage: the model's output → labels (kept at the working size, `Result.labels`) or top-k,
    and the timings; the mask at the image's size is made when first used (`Result.mask`).
    An anomaly model's outputs (map, score[, mask]): the map clipped to 0..1 is kept as its scores, the score
    output is the image score, the mask is map >= `output.threshold` (or the model's own pred_mask).
    An output with NaN or ±inf raises InferenceError (app.inference.runtime.finite): an error row, never OK."""
    spec = model.spec
    started = time.perf_counter()
    if not isinstance(output, TiledOutput):  # tiles were checked one by one in infer_tiles
        check_finite(spec.path.name, spec.output.fetched, output)  # NaN/inf: an error, never a decision
    if isinstance(output, TiledOutput):
        return _tiled_result(model, prepared, output, inference_ms, started)
    if spec.detector is not None and prepared.letterbox is not None:
        return _instances_result(model, prepared, output, inference_ms, started)
    geometry = prepared.geometry
    scores: np.ndarray | None = None
    score: float | None = None
    mask: LabelMap | None
    predictions: tuple[Prediction, ...]
    single = cast(np.ndarray, output)  # one output unless the model is an anomaly model (ModelSession.run)
    if spec.output.kind == "anomaly":
        anomaly_map, score, own_mask = postprocess.anomaly_outputs(spec, output)
        mask = (segmentation_labels(spec, anomaly_map, geometry) if own_mask is None
                else exported_labels(spec, own_mask, geometry))
        predictions = ()
        # an anomaly map always has probabilities (postprocess.probabilities)
        scores, geometry = cast(tuple[np.ndarray, Geometry], postprocess.probabilities(spec, anomaly_map, geometry))
    elif spec.task == "classification":
        mask, predictions = None, top_k(spec, single)
        score = predictions[0].score if predictions else None
    else:
        mask, predictions = segmentation_labels(spec, single, geometry), ()
        kept = postprocess.probabilities(spec, single, geometry)
        if kept is not None:
            scores, geometry = kept
            score = postprocess.image_score(scores, geometry) if spec.output.kind == "binary" else None
    timings = {**prepared.timings, "inference": inference_ms, "postprocess": _ms(started)}
    return Result(prepared.image.path, spec.task, geometry.image_hw, mask, predictions, timings,
                  model.info.provider, scores, geometry if scores is not None else None, score,
                  image_fit(spec, prepared.image))


def _tiled_result(model: ModelSession, prepared: Prepared, output: TiledOutput, inference_ms: float,
                  started: float) -> Result:
    """A tiled run's Result: the blended mask cleaned as any other; the kept scores are on the image's grid
    (Geometry image = content = tensor), reduced by a whole factor on very large images, which the warp in
    `probability_at_image_size` / `relabel` maps back exactly as it does a strided output."""
    spec = model.spec
    mask = LabelMap.of_array(postprocess.clean_mask(output.mask, spec.postprocess), spec.postprocess)
    hw = prepared.geometry.image_hw
    score = output.highest if spec.output.kind == "binary" else None
    timings = {**prepared.timings, "inference": inference_ms, "postprocess": _ms(started)}
    return Result(prepared.image.path, spec.task, hw, mask, (), timings, model.info.provider, output.scores,
                  Geometry(hw, hw, hw), score, image_fit(spec, prepared.image))


def _instances_result(model: ModelSession, prepared: Prepared, output: Output, inference_ms: float,
                      started: float) -> Result:
    """A YOLO export's instances, decoded as Ultralytics' predictor decodes them (app.inference.yolo.decode); the
    image score is the best instance's score (0 without any)."""
    spec = model.spec
    assert spec.detector is not None and prepared.letterbox is not None  # to_result's branch
    head, options = spec.detector.head, spec.detector.options
    outputs = output if isinstance(output, tuple) else (output,)
    found = instances(head, detections(head, outputs[0], options), prepared.letterbox,
                      outputs[1] if head.protos is not None else None)
    timings = {**prepared.timings, "inference": inference_ms, "postprocess": _ms(started)}
    best = max((item.score for item in found.items), default=0.0)
    return Result(prepared.image.path, spec.task, prepared.geometry.image_hw, None, (), timings,
                  model.info.provider, image_score=best, warnings=image_fit(spec, prepared.image), instances=found)


def probability_at_image_size(result: Result, class_index: int | None = None) -> np.ndarray | None:
    """The kept probabilities of one class (default: the foreground, or the winning class) at the image's size,
    float32 0–1; None when the result has no scores (classification, label outputs)."""
    if result.scores is None or result.geometry is None:
        return None
    return postprocess.probability_at_image_size(result.scores, result.geometry, class_index)


def relabel(result: Result, *, spec: ModelSpec, threshold: float | None = None,
            min_confidence: float | None = None) -> Result:
    """The result with a mask decided anew from its kept scores (labelmap.relabel_scores): a different
    threshold or minimum confidence without running the model again. Unchanged when there are no scores."""
    if result.scores is None or result.geometry is None:
        return result
    labels = relabelled(result.scores, result.geometry, spec, threshold=threshold, min_confidence=min_confidence)
    return replace(result, labels=labels)


def with_mask(result: Result) -> Result:
    """`result` with its image-sized mask made now and the time counted in its postprocess stage: a folder run
    writes and counts every pixel of every result, so its report's `postprocess_ms` says what that costs (the
    viewer, which shows an overview, makes the mask only where something needs it)."""
    if result.labels is None or result.labels.ready:
        return result
    started = time.perf_counter()
    result.labels.full()
    return replace(result, timings={**result.timings, "postprocess": result.timings["postprocess"] + _ms(started)})


def run_image(model: ModelSession, image: np.ndarray | DecodedImage, *, decode_ms: float = 0.0,
              batch: int | None = None, progress: ProgressFn | None = None,
              should_stop: Callable[[], bool] | None = None) -> Result:
    """Run the whole pipeline on an in-memory image (uint8 gray H×W or RGB H×W×3). A tiled image runs `batch`
    tiles per session run (default: the sidecar's tile.batch where the batch axis is dynamic), reports
    `progress(done, total)` in tiles, and raises `Stopped` when `should_stop()` answers True."""
    decoded = image if isinstance(image, DecodedImage) else from_array(image)
    prepared = prepare(model.spec, decoded, decode_ms=decode_ms)
    output, inference_ms = infer(model, prepared, batch=tile_batch(model, batch), progress=progress,
                                 should_stop=should_stop)
    return to_result(model, prepared, output, inference_ms)


def batchable(model: ModelSession) -> bool:
    """The model's input has a dynamic batch axis: several images (or tiles) can go in one run."""
    shape = model.spec.inputs[0].shape
    return shape is not None and len(shape) > 0 and not isinstance(shape[0], int)


def batch_row(outputs: np.ndarray | tuple[np.ndarray, ...], i: int) -> np.ndarray | tuple[np.ndarray, ...]:
    """Image i of a batched run: of each output when the model returns several (an anomaly model)."""
    if isinstance(outputs, tuple):
        return tuple(o[i: i + 1] for o in outputs)
    return outputs[i: i + 1]


def tile_batch(model: ModelSession, requested: int | None = None) -> int:
    """Tiles per session run: `requested` (--batch) when above 1, else the sidecar's tile.batch; 1 when the
    model's batch axis is fixed."""
    if not batchable(model):
        return 1
    return requested if requested and requested > 1 else model.spec.input.tile.batch


def run_path(model: ModelSession, path: str | Path) -> Result:
    """Decode the file at `path` and run the pipeline on it."""
    image, decode_ms = decode(path)
    return run_image(model, image, decode_ms=decode_ms)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
