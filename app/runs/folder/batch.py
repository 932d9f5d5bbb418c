"""Folder runs: every input through the pipeline, results written, one report row each, in input order.

Three overlapping stages keep the model busy (`InferenceSession.run` releases the GIL):
  prefetch  decode + preprocess on a small thread pool, at most `depth` inputs ahead (back-pressure);
  inference the calling thread, which owns the session, in input order (optionally batched);
  writer    postprocess + PNGs + report row on one thread, fed through a bounded queue, in input order.
Memory stays bounded however many files there are. A failure on one input becomes an error row and the run
goes on; cancelling stops before the next inference, lets the writer finish what it holds (files are only
ever complete) and lists the rest as not processed.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from app.errors import SegLensError, error_line, one_line, unexpected_error_line
from app.inference.image import pipeline
from app.inference.model.session import ModelSession
from app.io.discover import InputFile, output_stems
from app.runs.folder import volume3d as volume3d_run
from app.runs.folder.label_exports import RunLabels, label_kinds
from app.runs.folder.metrics import Scorer
from app.runs.folder.plan import Progress, RunPlan
from app.runs.folder.volumes import VolumeAssembler, VolumeOptions
from app.runs.folder.writer import HELPER_NICENESS, Outcome, RunSummary, Writer, WriteSetup, lower_thread_priority
from app.runs.folder.writer import Work as _Work
from app.runs.outputs.report import ReportWriter
from app.runs.outputs.safety import OutputGuard
from app.runs.outputs.segments import algorithm_of
from app.runs.privacy.names import anonymized_stems
from app.spelling import counted

if TYPE_CHECKING:
    from app.io.images import DecodedImage
    from app.io.volumes import Volume

__all__ = ["HELPER_NICENESS", "Outcome", "RunStopped", "RunSummary", "lower_thread_priority", "run_inputs"]

log = logging.getLogger(__name__)


def run_inputs(
    model: ModelSession,
    plan: RunPlan,
    *,
    report: ReportWriter | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    done: Mapping[str, list[str]] | None = None,
    png_texts: Mapping[str, Mapping[str, str]] | None = None,
    reference: Scorer | None = None,
    stems: Sequence[Path] | None = None,
    prefetch_workers: int = 2,
    helper_niceness: int = HELPER_NICENESS,
) -> RunSummary:
    """Run `model` on every input of `plan` into `plan.out` (None: nothing written), `plan.batch` inputs per
    session run where they batch; call from the thread that owns the session.

    `done` maps input paths finished by an earlier run (`--resume`) to their report rows: those are not run
    again, their rows are carried into this report in their place. `helper_niceness`: see HELPER_NICENESS.
    `plan.min_confidence` (multi-class): pixels whose winning probability is below it become background
    (pipeline.relabel on the kept scores, no second model run). `png_texts`: text chunks per output kind (the
    run's provenance: app.runs.outputs.provenance.RunIdentity.png_texts). `reference`: each mask is measured against
    its ground truth on the writer thread, the cells go into the report (made with `reference.columns`) and the
    images into `reference.summary` (rows carried by `done` are not re-measured: the CLI refuses the two together).
    A tiled image (`input.resize: tile`) runs here as tiles, `plan.batch` (else the sidecar's tile.batch) per
    session run, `progress.tiles(done, total)` after each; `should_stop` is also asked between its tile batches,
    and an image stopped there has no outputs and is listed as not processed.
    A volume (`InputFile.volume`) runs slice by slice (batched like images), is assembled on the writer thread and
    written as `plan.volumes` says (exports, per-slice rows; app.runs.folder.volumes), `progress.slices(done, total)`
    after each slice. A volume stopped part-way has no outputs and is listed as not processed.
    A 3D model (`model.spec.is_3d`) runs each volume once, whole (app.runs.folder.volume3d): its memory estimate checked
    and its image read on the prefetch pool (one volume ahead), predict_volume here with `progress.patches(done,
    total)`, `should_stop` asked between patch batches (stopped: not processed, as above), the label volume
    assembled at once on the writer thread; a plain 2D image is that input's one-line error.
    `stems`: the inputs' output stems when they are part of a larger run (app.runs.cluster.run sends chunks of one
    folder's inputs: a name's de-duplication must be the whole run's), else computed here.
    """
    inputs, batch_size, progress = plan.inputs, plan.batch, progress or Progress()
    summary = RunSummary(total=len(inputs))
    setup = _write_setup(model, plan, stems, png_texts=png_texts, reference=reference, progress=progress)
    writer = Writer(model, setup, report, summary, progress.outcome, helper_niceness,
                    depth=1 if model.spec.is_3d else 4)  # a 3D model's works hold whole volumes
    tile_progress = progress.tiles
    writer.start()
    stopped_at, why = len(inputs), "the run was cancelled"
    current = 0
    try:
        with ThreadPoolExecutor(max(1, prefetch_workers), thread_name_prefix="prefetch",
                                initializer=lower_thread_priority, initargs=(helper_niceness,)) as pool:
            # a 3D model's unit is a whole volume: one read ahead of the one running, not a handful
            flight = 1 if model.spec.is_3d else max(1, model.in_flight)  # a remote session's: several
            depth = 1 if model.spec.is_3d else 2 * max(1, prefetch_workers) + batch_size + flight
            prepared = _prefetch(pool, model, inputs, depth=depth, done=done or {})
            with contextlib.closing(prepared):  # on a break, cancel what is still queued for decoding
                tiles = _TileRun(pipeline.tile_batch(model, batch_size), tile_progress, should_stop,
                                 progress.patches)
                groups = _groups(prepared, batch_size if pipeline.batchable(model) else 1)
                for group, inferred in _in_flight(model, groups, tiles, flight):
                    current = group[0].index
                    if should_stop():
                        stopped_at = current
                        break
                    try:
                        works = inferred()
                    except pipeline.Stopped:
                        stopped_at = current
                        break
                    for work in works:
                        writer.put(work)
    except Exception as exc:  # the model or device failed for good: what is left is listed, not dropped
        if writer.failure is None:
            from app.logs import log_exception

            log_exception(log, logging.ERROR, f"the run stopped at input {current}", exc)  # its text at DEBUG
            stopped_at, why = current, f"the run stopped: {one_line(exc, typed=True)}"
            summary.failed += len(inputs) - current
    finally:
        writer.close()
    if writer.failure is not None:
        _stop_for_writer(writer, inputs, summary, report)
    if stopped_at < len(inputs):
        _list_unprocessed(inputs[stopped_at:], why, summary, report, writer.names and writer.names[stopped_at:])
    _write_labels(setup, summary, finished=stopped_at == len(inputs))
    return summary


def _write_labels(setup: WriteSetup, summary: RunSummary, *, finished: bool) -> None:
    """--save coco / yolo: the run's instances as label files once every input is done; a run stopped early, or
    files that cannot be written, in `summary.label_error` (the report and the pictures stand)."""
    if setup.labels is None or setup.out_dir is None:
        return
    kinds = " and ".join(kind.upper() for kind in setup.labels.kinds)
    if not finished:
        summary.label_error = f"{kinds} labels not written: the run did not finish every input"
        return
    try:
        summary.label_files.extend(setup.labels.write(setup.out_dir, setup.guard))
    except SegLensError as exc:
        summary.label_error = f"{kinds} labels not written: {one_line(exc)}"


def _write_setup(model: ModelSession, plan: RunPlan, stems: Sequence[Path] | None, *,
                 png_texts: Mapping[str, Mapping[str, str]] | None, reference: Scorer | None,
                 progress: Progress) -> WriteSetup:
    """What the writer writes: the output stems (under --anonymize the pseudonymous ones, and the report names
    them so: no input path in the report), the guard against writing over an input, the volume assembler."""
    inputs, volumes = plan.inputs, plan.volumes
    if stems is None:
        stems = anonymized_stems(inputs, plan.key) if plan.anonymize else output_stems(list(inputs))
    stems = list(stems)
    assembler = None
    if any(item.volume is not None for item in inputs):
        assembler = VolumeAssembler(model.spec, volumes or VolumeOptions(), texts=png_texts,
                                    algorithm=algorithm_of(model.spec.path, remote=model.spec.remote is not None),
                                    out_dir=plan.out)
    return WriteSetup(plan.out, stems, plan.save, names=[stem.as_posix() for stem in stems] if plan.anonymize else None,
                      min_confidence=plan.min_confidence, png_texts=png_texts, reference=reference,
                      guard=OutputGuard(plan.out, inputs) if plan.out is not None else None, volumes=assembler,
                      volume_options=volumes or VolumeOptions(), slice_progress=progress.slices,
                      labels=_run_labels(model, plan))


def _run_labels(model: ModelSession, plan: RunPlan) -> RunLabels | None:
    """Where --save coco / yolo keep the run's instances (None: neither asked, or nothing written)."""
    kinds = label_kinds(plan.save)
    if not kinds or plan.out is None or model.spec.task != "instances":
        return None
    return RunLabels(model.spec.class_names, kinds)


class RunStopped(SegLensError):
    """A stage of the run failed for good (the report's disk is full, a writer bug): the run ends here."""


def _stop_for_writer(writer: Writer, inputs: Sequence[InputFile], summary: RunSummary,
                     report: ReportWriter | None) -> None:
    """The writer died: inputs it recorded keep their rows, the rest are listed as skipped where the report can
    still be written (it may be what failed), and the run ends with one line."""
    done = writer.recorded
    why = f"the run stopped: {one_line(cast(BaseException, writer.failure), typed=True)}"  # the writer failed
    with contextlib.suppress(Exception):
        _list_unprocessed(inputs[done:], why, summary, report, writer.names and writer.names[done:])
    raise RunStopped(f"{why} ({done} of {counted(len(inputs), 'input')} finished and reported; the rest not "
                     "processed)") from writer.failure



def _list_unprocessed(rest: Sequence[InputFile], why: str, summary: RunSummary, report: ReportWriter | None,
                      names: Sequence[str] | None = None) -> None:
    """Cancelled or stopped: the report still lists every input, saying which were never processed (`names`:
    their report paths under --anonymize)."""
    summary.cancelled = why.startswith("the run was cancelled")
    if report:
        for n, item in enumerate(rest):
            report.add_error(item.path if names is None else names[n], f"not processed: {why}", status="skipped")


def _prefetch(pool: ThreadPoolExecutor, model: ModelSession, inputs: Sequence[InputFile],
              *, depth: int, done: Mapping[str, list[str]]) -> Generator[_Work, None, None]:
    """Prepared inputs in order, with at most `depth` decoded ahead of the consumer."""
    pending: deque[Future[_Work]] = deque()
    items = _units(inputs, done, whole=model.spec.is_3d)
    for unit in items:
        pending.append(pool.submit(_prepare, model, *unit, done))
        if len(pending) >= depth:
            break
    try:
        while pending:
            work = pending.popleft().result()
            nxt = next(items, None)
            if nxt is not None:
                pending.append(pool.submit(_prepare, model, *nxt, done))
            yield work
    finally:  # cancelled or failed: don't decode what nobody will use
        for future in pending:
            future.cancel()


def _units(inputs: Sequence[InputFile], done: Mapping[str, list[str]], *,
           whole: bool = False) -> Iterator[tuple[int, InputFile, int | None]]:
    """(index, input, slice) in order: an image once (slice None), a volume once per slice (`whole`, a 3D
    model: once)."""
    for index, item in enumerate(inputs):
        if whole or item.volume is None or item.problem or str(item.path) in done:
            yield index, item, None
        else:
            yield from ((index, item, k) for k in range(item.volume.depth))


def _prepare(model: ModelSession, index: int, item: InputFile, k: int | None, done: Mapping[str, list[str]]) -> _Work:
    if str(item.path) in done:
        return _Work(index, item, carried=done[str(item.path)])
    if item.problem:
        return _Work(index, item, error=f"{item.path}: {item.problem}")
    try:
        if model.spec.is_3d:  # the volume whole, or why this input is none (a 2D image: its one line)
            return _Work(index, item, volume_image=volume3d_run.read_volume(model.spec, item.volume)) \
                if item.volume is not None else _Work(index, item, error=f"{item.path}: {volume3d_run.NEEDS_VOLUME}")
        if k is not None:
            image, decode_ms = _read_slice(cast("Volume", item.volume), k)  # a slice is of a volume input
            return _Work(index, item, prepared=pipeline.prepare(model.spec, image, decode_ms=decode_ms), slice=k)
        image, decode_ms = pipeline.decode(item.path)
        return _Work(index, item, prepared=pipeline.prepare(model.spec, image, decode_ms=decode_ms))
    except SegLensError as exc:
        return _Work(index, item, error=error_line(item.path, exc), slice=k)
    except Exception as exc:  # a decoder bug must not end the run
        log.debug("unexpected error preparing %s", item.path, exc_info=True)
        return _Work(index, item, error=unexpected_error_line(item.path, exc), slice=k)


def _read_slice(volume: Volume, k: int) -> tuple[DecodedImage, float]:
    from app.io.images import read_slice

    started = time.perf_counter()
    image = read_slice(volume, k)
    return image, (time.perf_counter() - started) * 1000


@dataclass(frozen=True)
class _TileRun:
    """How the inference stage runs a tiled image: tiles per run, progress in tiles, the stop question."""

    batch: int
    progress: Callable[[int, int], None] | None
    should_stop: Callable[[], bool]
    patches: Callable[[int, int], None] | None = None  # a 3D model's volume: patch k of n


def _groups(works: Iterator[_Work], size: int) -> Iterator[list[_Work]]:
    """Consecutive works; several at once only when their tensors have the same shape (batchable)."""
    group: list[_Work] = []
    for work in works:
        if work.prepared is None or work.prepared.tiled or size == 1:
            if group:
                yield group
                group = []
            yield [work]
            continue
        if group and (_prepared(group[0]).tiled or _tensor(group[0]).shape != _tensor(work).shape):
            yield group
            group = []
        group.append(work)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def _in_flight(model: ModelSession, groups: Iterator[list[_Work]], tiles: _TileRun,
               flight: int) -> Iterator[tuple[list[_Work], Callable[[], list[_Work]]]]:
    """Each group with what gives its works, in input order. `flight` 1: the inference runs when asked (here, on
    the session's thread). More (a remote session, whose requests wait on the network): that many groups are sent
    at once from helper threads, so the server always has the next one; what is asked for waits on its own."""
    if flight <= 1:
        for group in groups:
            yield group, functools.partial(_infer, model, group, tiles)
        return
    pending: deque[tuple[list[_Work], Future[list[_Work]]]] = deque()
    with ThreadPoolExecutor(flight, thread_name_prefix="in-flight") as sender:
        try:
            for group in groups:
                pending.append((group, sender.submit(_infer, model, group, tiles)))
                if len(pending) >= flight:
                    first, future = pending.popleft()
                    yield first, future.result
            while pending:
                first, future = pending.popleft()
                yield first, future.result
        finally:  # stopped or failed: what was not sent yet is not sent
            for _group, future in pending:
                future.cancel()


def _infer(model: ModelSession, group: list[_Work], tiles: _TileRun) -> list[_Work]:
    if group[0].volume_image is not None:
        return [_infer_volume(model, group[0], tiles)]
    if group[0].prepared is None:
        return group  # a failed prepare passes straight to the writer, keeping its place in the order
    try:
        if len(group) == 1:
            output, ms = pipeline.infer(model, group[0].prepared, batch=tiles.batch, progress=tiles.progress,
                                        should_stop=tiles.should_stop)
            return [_with_output(group[0], output, ms)]
        started = time.perf_counter()
        outputs = model.run(np.concatenate([_tensor(w) for w in group]))
        share = (time.perf_counter() - started) * 1000 / len(group)
        return [_with_output(w, pipeline.batch_row(outputs, i), share) for i, w in enumerate(group)]
    except SegLensError as exc:
        return [replace(w, prepared=None, error=error_line(w.input.path, exc)) for w in group]


def _infer_volume(model: ModelSession, work: _Work, tiles: _TileRun) -> _Work:
    """A 3D model on a whole volume (pipeline.Stopped passes up: the volume is then not processed)."""
    volume, image = cast("Volume", work.input.volume), cast(volume3d_run.VolumeImage, work.volume_image)
    try:
        output = volume3d_run.predict(model, volume, image, progress=tiles.patches, should_stop=tiles.should_stop)
    except SegLensError as exc:
        return replace(work, volume_image=None, error=error_line(work.input.path, exc))
    return replace(work, volume_image=None, volume_output=output)  # the image is not needed past the model


def _with_output(work: _Work, output: pipeline.Output | pipeline.TiledOutput, ms: float) -> _Work:
    return replace(work, output=output, inference_ms=ms)


def _prepared(work: _Work) -> pipeline.Prepared:
    """A work in a group of several (_groups): prepared, not tiled."""
    return cast(pipeline.Prepared, work.prepared)


def _tensor(work: _Work) -> np.ndarray:
    """Its tensor: an image that is not tiled has one."""
    return cast(np.ndarray, _prepared(work).tensor)
