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
import logging
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from app.errors import SegLensError, error_line, unexpected_error_line
from app.inference import pipeline
from app.inference.pipeline import Prepared, Result
from app.inference.session import ModelSession
from app.inference.verdict import Verdict, verdict_of
from app.io.discover import InputFile, output_stems
from app.runs.metrics_report import ReferenceScorer, Scored
from app.runs.outputs import ReportWriter, write_result_images
from app.runs.safety import OutputGuard, planned_outputs
from app.runs.volume_run import (
    VolumeAssembler,
    VolumeOptions,
    VolumeResult,
    algorithm_of,
    write_volume_rows,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What happened to one input: a result, or the one-line error."""

    index: int
    input: InputFile
    result: Result | None
    error: str | None
    resumed: bool = False  # done by an earlier run (--resume): its report row was carried over
    verdict: Verdict | None = None  # OK/NG under the sidecar's rules; None without a `verdict` section
    scored: Scored | None = None  # against the ground truth (`--reference`): metrics, or the notice why none
    volume: VolumeResult | None = None  # a volume's assembled result (app.runs.volume_run), `result` None


@dataclass
class RunSummary:
    total: int = 0
    ok: int = 0
    failed: int = 0
    cancelled: bool = False
    resumed: int = 0
    passed: int = 0  # results judged OK by the sidecar's verdict rules (resumed rows included)
    rejected: int = 0  # results judged NG: a result, not a failure (`failed` does not count them)
    notices: list[str] = field(default_factory=list)  # one line each: an export that did not apply to a volume

    def verdict_line(self) -> str | None:
        """`verdict: 7 OK, 2 NG` when any result was judged, else None (the model has no verdict rules)."""
        if not self.passed and not self.rejected:
            return None
        return f"verdict: {self.passed} OK, {self.rejected} NG"


@dataclass(frozen=True)
class _Work:
    """An input on its way to the writer: prepared (or failed), then with the model's output."""

    index: int
    input: InputFile
    prepared: Prepared | None = None
    output: np.ndarray | None = None
    inference_ms: float = 0.0
    error: str | None = None
    carried: list[str] | None = None  # the report row of an earlier run, for an input already done
    slice: int | None = None  # a volume's slice (app.io.volumes): the writer assembles them into the volume


ProgressFn = Callable[[Outcome, RunSummary], None]
_DONE = object()

# The prefetch and writer threads run at this niceness (Linux: per thread; elsewhere unchanged). ONNX Runtime's
# intra-op threads (and the calling thread, which takes part in them) keep normal priority: when every core is
# busy, a preempted intra-op thread stalls the whole operator at its barrier, so the helpers should mostly use
# the CPU that inference leaves idle (with `allow_spinning` off, the default). Niceness 10 still gives them ~10 %
# of a busy core, so a run slows down rather than stalls when other programs load the machine; SCHED_IDLE
# would starve them. Measured: benchmarks/helper_priority.py, docs/PERFORMANCE.md.
HELPER_NICENESS = 10


def lower_thread_priority(niceness: int) -> None:
    """Raise the calling thread's niceness by `niceness` (no-op where threads have no niceness of their own)."""
    if niceness <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))
    except OSError:  # not permitted in some sandboxes: priority is an optimisation only
        pass


def run_inputs(
    model: ModelSession,
    inputs: Sequence[InputFile],
    *,
    out_dir: Path | None,
    save: Sequence[str] = ("mask",),
    report: ReportWriter | None = None,
    progress: ProgressFn | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    batch_size: int = 1,
    prefetch_workers: int = 2,
    done: Mapping[str, list[str]] | None = None,
    helper_niceness: int = HELPER_NICENESS,
    min_confidence: float | None = None,
    png_texts: Mapping[str, Mapping[str, str]] | None = None,
    reference: ReferenceScorer | None = None,
    tile_progress: Callable[[int, int], None] | None = None,
    volumes: VolumeOptions | None = None,
    slice_progress: Callable[[int, int], None] | None = None,
) -> RunSummary:
    """Run `model` on every input; call from the thread that owns the session.

    `done` maps input paths finished by an earlier run (`--resume`) to their report rows: those are not run
    again, their rows are carried into this report in their place. `helper_niceness`: see HELPER_NICENESS.
    `min_confidence` (multi-class): pixels whose winning probability is below it become background
    (pipeline.relabel on the kept scores, no second model run). `png_texts`: text chunks per output kind (the
    run's provenance: app.runs.provenance.RunIdentity.png_texts). `reference`: each mask is measured against
    its ground truth on the writer thread, the cells go into the report (made with `reference.columns`) and the
    images into `reference.summary` (rows carried by `done` are not re-measured: the CLI refuses the two together).
    A tiled image (`input.resize: tile`) runs here as tiles, `batch_size` (else the sidecar's tile.batch) per
    session run, `tile_progress(done, total)` after each; `should_stop` is also asked between its tile batches,
    and an image stopped there has no outputs and is listed as not processed.
    A volume (`InputFile.volume`) runs slice by slice (batched like images), is assembled on the writer thread and
    written as `volumes` says (exports, per-slice rows; app.runs.volume_run), `slice_progress(done, total)` after
    each slice. A volume stopped part-way has no outputs and is listed as not processed.
    """
    summary = RunSummary(total=len(inputs))
    stems = output_stems(list(inputs))
    writer = _Writer(model, out_dir, stems, save, report, summary, progress, helper_niceness)
    writer.min_confidence, writer.png_texts, writer.reference = min_confidence, png_texts, reference
    writer.guard = OutputGuard(out_dir, inputs) if out_dir is not None else None
    if any(item.volume is not None for item in inputs):
        writer.volumes = VolumeAssembler(model.spec, volumes or VolumeOptions(), texts=png_texts,
                                         algorithm=algorithm_of(model.spec.path))
        writer.volume_options = volumes or VolumeOptions()
        writer.slice_progress = slice_progress
    writer.start()
    stopped_at, why = len(inputs), "the run was cancelled"
    current = 0
    try:
        with ThreadPoolExecutor(max(1, prefetch_workers), thread_name_prefix="prefetch",
                                initializer=lower_thread_priority, initargs=(helper_niceness,)) as pool:
            prepared = _prefetch(pool, model, inputs, depth=2 * max(1, prefetch_workers) + batch_size,
                                 done=done or {})
            with contextlib.closing(prepared):  # on a break, cancel what is still queued for decoding
                tiles = _TileRun(pipeline.tile_batch(model, batch_size), tile_progress, should_stop)
                for group in _groups(prepared, batch_size if pipeline.batchable(model) else 1):
                    current = group[0].index
                    if should_stop():
                        stopped_at = current
                        break
                    try:
                        works = _infer(model, group, tiles)
                    except pipeline.Stopped:
                        stopped_at = current
                        break
                    for work in works:
                        writer.put(work)
    except Exception as exc:  # the model or device failed for good: what is left is listed, not dropped
        if writer.failure is None:
            log.error("the run stopped at input %d: %s", current, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            stopped_at, why = current, f"the run stopped: {_one_line(exc)}"
            summary.failed += len(inputs) - current
    finally:
        writer.close()
    if writer.failure is not None:
        _stop_for_writer(writer, inputs, summary, report)
    if stopped_at < len(inputs):
        _list_unprocessed(inputs[stopped_at:], why, summary, report)
    return summary


class RunStopped(SegLensError):
    """A stage of the run failed for good (the report's disk is full, a writer bug): the run ends here."""


def _stop_for_writer(writer: _Writer, inputs: Sequence[InputFile], summary: RunSummary,
                     report: ReportWriter | None) -> None:
    """The writer died: inputs it recorded keep their rows, the rest are listed as skipped where the report can
    still be written (it may be what failed), and the run ends with one line."""
    done = writer.recorded
    why = f"the run stopped: {_one_line(writer.failure)}"
    with contextlib.suppress(Exception):
        _list_unprocessed(inputs[done:], why, summary, report)
    raise RunStopped(f"{why} ({done} of {len(inputs)} inputs finished and reported; the rest not processed)") \
        from writer.failure


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return text if isinstance(exc, SegLensError) else f"{type(exc).__name__}: {text}"


def _list_unprocessed(rest: Sequence[InputFile], why: str, summary: RunSummary, report: ReportWriter | None) -> None:
    """Cancelled or stopped: the report still lists every input, saying which were never processed."""
    summary.cancelled = why.startswith("the run was cancelled")
    if report:
        for item in rest:
            report.add_error(item.path, f"not processed: {why}", status="skipped")


def _prefetch(pool: ThreadPoolExecutor, model: ModelSession, inputs: Sequence[InputFile],
              *, depth: int, done: Mapping[str, list[str]]) -> Iterator[_Work]:
    """Prepared inputs in order, with at most `depth` decoded ahead of the consumer."""
    pending: deque[Future] = deque()
    items = _units(inputs, done)
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


def _units(inputs: Sequence[InputFile], done: Mapping[str, list[str]]) -> Iterator[tuple[int, InputFile, int | None]]:
    """(index, input, slice) in order: an image once (slice None), a volume once per slice."""
    for index, item in enumerate(inputs):
        if item.volume is None or item.problem or str(item.path) in done:
            yield index, item, None
        else:
            yield from ((index, item, k) for k in range(item.volume.depth))


def _prepare(model: ModelSession, index: int, item: InputFile, k: int | None, done: Mapping[str, list[str]]) -> _Work:
    if str(item.path) in done:
        return _Work(index, item, carried=done[str(item.path)])
    if item.problem:
        return _Work(index, item, error=f"{item.path}: {item.problem}")
    try:
        if k is not None:
            image, decode_ms = _read_slice(item.volume, k)
            return _Work(index, item, prepared=pipeline.prepare(model.spec, image, decode_ms=decode_ms), slice=k)
        image, decode_ms = pipeline.decode(item.path)
        return _Work(index, item, prepared=pipeline.prepare(model.spec, image, decode_ms=decode_ms))
    except SegLensError as exc:
        return _Work(index, item, error=error_line(item.path, exc), slice=k)
    except Exception as exc:  # a decoder bug must not end the run
        log.debug("unexpected error preparing %s", item.path, exc_info=True)
        return _Work(index, item, error=unexpected_error_line(item.path, exc), slice=k)


def _read_slice(volume, k: int):
    from app.io.volumes import read_slice

    started = time.perf_counter()
    image = read_slice(volume, k)
    return image, (time.perf_counter() - started) * 1000


@dataclass(frozen=True)
class _TileRun:
    """How the inference stage runs a tiled image: tiles per run, progress in tiles, the stop question."""

    batch: int
    progress: Callable[[int, int], None] | None
    should_stop: Callable[[], bool]


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
        if group and (group[0].prepared.tiled or group[0].prepared.tensor.shape != work.prepared.tensor.shape):
            yield group
            group = []
        group.append(work)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def _infer(model: ModelSession, group: list[_Work], tiles: _TileRun) -> list[_Work]:
    if group[0].prepared is None:
        return group  # a failed prepare passes straight to the writer, keeping its place in the order
    try:
        if len(group) == 1:
            output, ms = pipeline.infer(model, group[0].prepared, batch=tiles.batch, progress=tiles.progress,
                                        should_stop=tiles.should_stop)
            return [_with_output(group[0], output, ms)]
        started = time.perf_counter()
        outputs = model.run(np.concatenate([w.prepared.tensor for w in group]))
        share = (time.perf_counter() - started) * 1000 / len(group)
        return [_with_output(w, pipeline.batch_row(outputs, i), share) for i, w in enumerate(group)]
    except SegLensError as exc:
        return [replace(w, prepared=None, error=error_line(w.input.path, exc)) for w in group]


def _with_output(work: _Work, output: np.ndarray, ms: float) -> _Work:
    return replace(work, output=output, inference_ms=ms)


class _Writer:
    """The writer stage: postprocess, PNGs and the report row, in order, on its own thread."""

    def __init__(self, model, out_dir, stems, save, report, summary, progress, niceness: int = 0) -> None:
        self.model, self.out_dir, self.stems, self.save = model, out_dir, stems, tuple(save)
        self.report, self.summary, self.progress = report, summary, progress
        self.niceness = niceness
        self._queue: queue.Queue = queue.Queue(maxsize=4)  # back-pressure on the inference loop
        self._thread = threading.Thread(target=self._loop, name="writer", daemon=True)
        self.failure: BaseException | None = None
        self.recorded = 0  # inputs whose outcome is recorded (report row written, progress told), in order
        self.guard: OutputGuard | None = None
        self.min_confidence: float | None = None
        self.png_texts: Mapping[str, Mapping[str, str]] | None = None
        self.reference: ReferenceScorer | None = None
        self.volumes: VolumeAssembler | None = None
        self.volume_options = VolumeOptions()
        self.slice_progress: Callable[[int, int], None] | None = None

    def start(self) -> None:
        self._thread.start()

    def put(self, work: _Work) -> None:
        while self._thread.is_alive():
            try:
                self._queue.put(work, timeout=0.2)
                return
            except queue.Full:
                continue
        raise self.failure or RuntimeError("the writer stopped")

    def close(self) -> None:
        """Let the writer finish what it holds, then join it. Never blocks on a writer that died: its queue may
        be full with nobody left to drain it (the hang this loop replaces)."""
        while self._thread.is_alive():
            try:
                self._queue.put(_DONE, timeout=0.2)
                break
            except queue.Full:
                continue
        self._thread.join()

    def _loop(self) -> None:
        lower_thread_priority(self.niceness)
        try:
            while (work := self._queue.get()) is not _DONE:
                outcome = self._finish(work) if work.slice is None else self._finish_slice(work)
                if outcome is not None:
                    self._record(outcome, work.carried)
        except BaseException as exc:  # e.g. the report's disk is full: stop the run, say so
            self.failure = exc

    def _finish(self, work: _Work) -> Outcome:
        if work.carried is not None:
            return Outcome(work.index, work.input, None, None, resumed=True)
        if work.error is not None:
            return Outcome(work.index, work.input, None, work.error)
        try:
            result = pipeline.to_result(self.model, work.prepared, work.output, work.inference_ms)
            if self.min_confidence is not None:
                result = pipeline.relabel(result, spec=self.model.spec, min_confidence=self.min_confidence)
            if self.out_dir is not None:
                stem = self.out_dir / self.stems[work.index]
                refused = self._refused(stem) if result.mask is not None else None
                if refused:
                    return Outcome(work.index, work.input, None, f"{work.input.path}: {refused}")
                write_result_images(result, self.model.spec, stem, self.save, work.prepared.image.pixels,
                                    texts=self.png_texts)
            # Decided here, in the writer stage, not in ReportWriter: the summary's OK/NG counts and the progress
            # callback (the viewer's Run on all) need it as well as the report, which is optional; it is one
            # pure function of the kept result, off the inference thread, once per input.
            scored = self.reference.score(work.input, result.mask) \
                if self.reference is not None and result.mask is not None else None
            return Outcome(work.index, work.input, result, None, verdict=verdict_of(self.model.spec, result),
                           scored=scored)
        except SegLensError as exc:
            return Outcome(work.index, work.input, None, error_line(work.input.path, exc))
        except Exception as exc:
            log.debug("unexpected error finishing %s", work.input.path, exc_info=True)
            return Outcome(work.index, work.input, None, unexpected_error_line(work.input.path, exc))

    def _finish_slice(self, work: _Work) -> Outcome | None:
        """A volume's slice: kept by the assembler; the volume's outcome once its last slice is in."""
        volume, k, result, error = work.input.volume, work.slice, None, work.error
        stem = self.out_dir / self.stems[work.index] if self.out_dir is not None else None
        try:
            if error is None:
                result = pipeline.to_result(self.model, work.prepared, work.output, work.inference_ms)
                if self.min_confidence is not None:
                    result = pipeline.relabel(result, spec=self.model.spec, min_confidence=self.min_confidence)
            per_slice = stem is not None and (self.volume_options.per_slice or volume.affine is None)
            last = self.volumes.add(work.index, volume, k, result, error,
                                    image=work.prepared.image if work.prepared is not None else None,
                                    slice_stem=stem / f"slice_{k + 1:04d}" if per_slice else None, save=self.save)
        except SegLensError as exc:
            last = self.volumes.add(work.index, volume, k, None, error_line(work.input.path, exc))
        if self.slice_progress is not None:
            self.slice_progress(k + 1, volume.depth)
        if not last:
            return None
        try:
            vr = self.volumes.finish(volume, stem, self.model.info.provider)
        except SegLensError as exc:
            return Outcome(work.index, work.input, None, error_line(work.input.path, exc))
        except Exception as exc:  # an export library's bug must not end the run: this volume's error row
            log.debug("unexpected error finishing %s", work.input.path, exc_info=True)
            return Outcome(work.index, work.input, None, unexpected_error_line(work.input.path, exc))
        self.summary.notices.extend(vr.notices)
        return Outcome(work.index, work.input, None, None, verdict=vr.verdict, volume=vr)

    def _refused(self, stem: Path) -> str | None:
        if self.guard is None:
            return None
        return next(filter(None, (self.guard.problem(path) for path in planned_outputs(stem, self.save))), None)

    def _record(self, outcome: Outcome, carried: list[str] | None) -> None:
        summary, report = self.summary, self.report
        if outcome.resumed:
            summary.ok += 1
            summary.resumed += 1
            self._count(_carried_verdict(carried, report))
            if report:
                report.add_row(carried)
        elif outcome.result is not None or outcome.volume is not None:
            try:
                extra = self._extra_cells(outcome)
                if report and outcome.volume is not None:
                    write_volume_rows(report, self.model.spec, outcome.input.path, outcome.volume,
                                      self.volume_options, extra_after=extra)
                elif report:
                    report.add_result(outcome.input.path, outcome.result, verdict=outcome.verdict,
                                      extra=self._volume_blanks(outcome) + extra)
                if self.reference is not None:
                    self.reference.summary.add(str(outcome.input.path), outcome.scored)
                summary.ok += 1
                self._count("" if outcome.verdict is None else "ok" if outcome.verdict.ok else "ng")
            except OSError:
                raise  # the report itself cannot be written: the run stops and says so
            except Exception as exc:  # a result the report cannot describe is that input's error
                log.debug("report row for %s failed", outcome.input.path, exc_info=True)
                outcome = Outcome(outcome.index, outcome.input, None, unexpected_error_line(outcome.input.path, exc))
                summary.failed += 1
                if report:
                    report.add_error(outcome.input.path, outcome.error, provider=self.model.info.provider)
        else:
            summary.failed += 1
            if report:
                report.add_error(outcome.input.path, outcome.error or "", provider=self.model.info.provider)
        if self.progress:
            self.progress(outcome, summary)
        self.recorded += 1

    def _extra_cells(self, outcome: Outcome) -> list:
        """The reference columns' cells (blank for a volume: it has no 2D reference)."""
        if self.reference is None:
            return []
        return [""] * len(self.reference.columns) if outcome.volume is not None else \
            list(self.reference.cells(outcome.scored))

    def _volume_blanks(self, outcome: Outcome) -> list:
        """An image's cells in the volume columns of a run that also has volumes: empty."""
        if self.volumes is None:
            return []
        from app.runs.volume_run import volume_columns

        return [""] * len(volume_columns(self.model.spec))

    def _count(self, verdict: str) -> None:
        if verdict == "ok":
            self.summary.passed += 1
        elif verdict == "ng":
            self.summary.rejected += 1


def _carried_verdict(row: list[str] | None, report: ReportWriter | None) -> str:
    """The `verdict` cell of a row carried over by --resume (its columns are this report's: finished_rows)."""
    if row is None or report is None or "verdict" not in report.columns:
        return ""
    index = report.columns.index("verdict")
    return row[index] if index < len(row) else ""
