"""The writer stage of a folder run (app.runs.folder.batch): postprocess, outputs and the report row of every input, in
input order, on its own thread; and the records a run reports with (Outcome, RunSummary).

A volume's slices arrive one by one and are assembled by app.runs.folder.volumes.VolumeAssembler; the volume's
outcome is recorded when its last slice is in. A 3D model's volume arrives whole (its VolumePrediction) and is
handed to the assembler at once.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from app.errors import SegLensError, error_line, unexpected_error_line
from app.inference.decide.verdict import Verdict, verdict_of
from app.inference.image import pipeline
from app.inference.image.pipeline import Prepared, Result
from app.io.discover import InputFile
from app.runs.folder.metrics import Scored, Scorer
from app.runs.folder.volumes import VolumeAssembler, VolumeOptions, VolumeResult, write_volume_rows
from app.runs.outputs.images import write_result_images
from app.runs.outputs.report import ReportWriter
from app.runs.outputs.safety import OutputGuard, planned_outputs
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.image.pipeline import Output, TiledOutput
    from app.inference.model.instances import Instances
    from app.inference.model.session import ModelSession
    from app.io.images import DecodedImage
    from app.io.volumes import Volume
    from app.runs.folder.label_exports import RunLabels
    from app.runs.folder.volume3d import VolumeImage, VolumeOutput

log = logging.getLogger("app.runs.folder.batch")


@dataclass(frozen=True)
class Outcome:
    """What happened to one input: a result, or the one-line error."""

    index: int
    input: InputFile
    result: Result | None
    error: str | None
    resumed: bool = False  # done by an earlier run (--resume): its report row was carried over
    verdict: Verdict | None = None  # OK/REVIEW/NG under the sidecar's rules; None without a `verdict` section
    scored: Scored | None = None  # against the ground truth (`--reference`): metrics, or the notice why none
    volume: VolumeResult | None = None  # a volume's assembled result (app.runs.folder.volumes), `result` None
    name: str | None = None  # --anonymize: the input's pseudonymous name, what every line about it calls it


@dataclass
class RunSummary:
    total: int = 0
    ok: int = 0
    failed: int = 0
    cancelled: bool = False
    resumed: int = 0
    passed: int = 0  # results judged OK by the sidecar's verdict rules (resumed rows included)
    rejected: int = 0  # results judged NG: a result, not a failure (`failed` does not count them)
    review: int = 0  # results judged REVIEW (the sidecar's verdict.review_if): neither passed nor rejected
    notices: list[str] = field(default_factory=list)  # one line each: an export that did not apply to a volume
    found: dict[str, int] | None = None  # an instance model's run: objects found per class name (resumed rows aside)
    labelled: int = 0  # … and the images they were found in
    label_files: list[Path] = field(default_factory=list)  # --save coco / yolo: the label files written
    label_error: str | None = None  # … or why they were not: the run's outputs are incomplete

    def verdict_line(self) -> str | None:
        """`verdict: 7 OK, 2 NG` (`7 OK, 1 REVIEW, 2 NG` when any was REVIEW) when any result was judged, else None
        (the model has no verdict rules)."""
        if not self.passed and not self.rejected and not self.review:
            return None
        middle = f"{self.review} REVIEW, " if self.review else ""
        return f"verdict: {self.passed} OK, {middle}{self.rejected} NG"

    def instances_line(self) -> str | None:
        """`instances: 7 found in 3 images (pit 4, scratch 3)` after an instance model's run, else None."""
        if self.found is None:
            return None
        total = sum(self.found.values())
        per_class = ", ".join(f"{name} {n}" for name, n in sorted(self.found.items(), key=lambda kv: (-kv[1], kv[0])))
        where = f" in {counted(self.labelled, 'image')}" if total else ""
        return f"instances: {total or 'none'} found{where}" + (f" ({per_class})" if per_class else "")

    def add_instances(self, instances: Instances) -> None:
        """Count one image's objects."""
        found = self.found if self.found is not None else {}
        for name, n in instances.counts().items():
            found[name] = found.get(name, 0) + n
        self.found = found
        self.labelled += 1 if len(instances) else 0


@dataclass(frozen=True)
class Work:
    """An input on its way to the writer: prepared (or failed), then with the model's output."""

    index: int
    input: InputFile
    prepared: Prepared | None = None
    output: Output | TiledOutput | None = None
    inference_ms: float = 0.0
    error: str | None = None
    carried: list[str] | None = None  # the report row of an earlier run, for an input already done
    slice: int | None = None  # a volume's slice (app.io.volumes): the writer assembles them into the volume
    volume_image: VolumeImage | None = None  # a 3D model's volume, read whole (app.runs.folder.volume3d)
    volume_output: VolumeOutput | None = None  # … and its prediction: the writer assembles it at once


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


@dataclass(frozen=True)
class WriteSetup:
    """What the writer stage writes and how, decided once before the run (by app.runs.folder.batch.run_inputs).

    `stems`: each input's output stem under `out_dir` (None: nothing written); `names`: each input's report path
    under --anonymize; `min_confidence`: the multi-class minimum (pipeline.relabel); `png_texts`: the PNGs' text
    chunks per output kind; `reference`: each mask scored against its ground truth; `guard`: refuses to write over
    an input; `volumes`: assembles a volume's slices (None: no volume among the inputs), written as
    `volume_options` says, `slice_progress(done, total)` told after each slice."""

    out_dir: Path | None
    stems: Sequence[Path]
    save: tuple[str, ...]
    names: Sequence[str] | None = None
    min_confidence: float | None = None
    png_texts: Mapping[str, Mapping[str, str]] | None = None
    reference: Scorer | None = None
    guard: OutputGuard | None = None
    volumes: VolumeAssembler | None = None
    volume_options: VolumeOptions = field(default_factory=VolumeOptions)
    slice_progress: Callable[[int, int], None] | None = None
    labels: RunLabels | None = None  # --save coco / yolo: every image's instances, kept for the run's label files


class Writer:
    """The writer stage: postprocess, PNGs and the report row, in order, on its own thread."""

    def __init__(self, model: ModelSession, setup: WriteSetup, report: ReportWriter | None, summary: RunSummary,
                 progress: ProgressFn | None, niceness: int = 0, depth: int = 4) -> None:
        self.model, self.setup, self.report, self.summary, self.progress = model, setup, report, summary, progress
        self.niceness = niceness
        # back-pressure on the inference loop: `depth` works waiting (a 3D model's are whole volumes: 1)
        self._queue: queue.Queue[Work | object] = queue.Queue(maxsize=depth)
        self._thread = threading.Thread(target=self._loop, name="writer", daemon=True)
        self.failure: BaseException | None = None
        self.recorded = 0  # inputs whose outcome is recorded (report row written, progress told), in order

    @property
    def names(self) -> Sequence[str] | None:
        """--anonymize: each input's report path (app.runs.privacy.names), else None."""
        return self.setup.names

    def start(self) -> None:
        self._thread.start()

    def put(self, work: Work) -> None:
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
            while (item := self._queue.get()) is not _DONE:
                work = cast(Work, item)  # everything but _DONE in the queue is a Work
                outcome = self._finish_volume3d(work) if work.volume_output is not None else \
                    self._finish(work) if work.slice is None else self._finish_slice(work)
                if outcome is not None:
                    self._record(outcome, work.carried)
        except BaseException as exc:  # e.g. the report's disk is full: stop the run, say so
            self.failure = exc

    def _finish(self, work: Work) -> Outcome:
        if work.carried is not None:
            return Outcome(work.index, work.input, None, None, resumed=True)
        if work.error is not None:
            return Outcome(work.index, work.input, None, work.error)
        prepared, output = _ran(work)
        try:
            result = pipeline.to_result(self.model, prepared, output, work.inference_ms)
            if self.setup.min_confidence is not None:
                result = pipeline.relabel(result, spec=self.model.spec, min_confidence=self.setup.min_confidence)
            result = pipeline.with_mask(result)  # written and counted: made here, timed as postprocessing
            if self.setup.out_dir is not None:
                stem = self.setup.out_dir / self.setup.stems[work.index]
                refused = self._refused(stem) if result.mask is not None or result.instances is not None else None
                if refused:
                    return Outcome(work.index, work.input, None, f"{work.input.path}: {refused}")
                write_result_images(result, self.model.spec, stem, self.setup.save, prepared.image.pixels,
                                    texts=self.setup.png_texts, root=self.setup.out_dir)
            # Decided here, in the writer stage, not in ReportWriter: the summary's OK/NG counts and the progress
            # callback (the viewer's Run on all) need it as well as the report, which is optional; it is one
            # pure function of the kept result, off the inference thread, once per input.
            name = None if self.names is None else self.names[work.index]
            if self.setup.labels is not None and result.instances is not None:
                self.setup.labels.add(self.setup.stems[work.index].as_posix(), result.instances)
            scored = self.setup.reference.score_result(work.input, result, name=name) \
                if self.setup.reference is not None else None
            return Outcome(work.index, work.input, result, None, verdict=verdict_of(self.model.spec, result),
                           scored=scored)
        except SegLensError as exc:
            return Outcome(work.index, work.input, None, error_line(work.input.path, exc))
        except Exception as exc:
            log.debug("unexpected error finishing %s", work.input.path, exc_info=True)
            return Outcome(work.index, work.input, None, unexpected_error_line(work.input.path, exc))

    def _finish_slice(self, work: Work) -> Outcome | None:
        """A volume's slice: kept by the assembler; the volume's outcome once its last slice is in."""
        # a slice's work: of a volume input, with its slice number, in a run that assembles volumes
        volume, k = cast("Volume", work.input.volume), cast(int, work.slice)
        volumes = cast(VolumeAssembler, self.setup.volumes)
        result: Result | None = None
        error = work.error
        stem = self.setup.out_dir / self.setup.stems[work.index] if self.setup.out_dir is not None else None
        try:
            if error is None:
                result = pipeline.to_result(self.model, *_ran(work), work.inference_ms)
                if self.setup.min_confidence is not None:
                    result = pipeline.relabel(result, spec=self.model.spec, min_confidence=self.setup.min_confidence)
                result = pipeline.with_mask(result)
            per_slice = stem is not None and (self.setup.volume_options.per_slice or volume.affine is None)
            last = volumes.add(work.index, volume, k, result, error,
                               image=work.prepared.image if work.prepared is not None else None,
                               slice_stem=stem / f"slice_{k + 1:04d}" if stem is not None and per_slice else None,
                               save=self.setup.save)
        except SegLensError as exc:
            last = volumes.add(work.index, volume, k, None, error_line(work.input.path, exc))
        if self.setup.slice_progress is not None:
            self.setup.slice_progress(k + 1, volume.depth)
        if not last:
            return None
        return self._volume_outcome(work, lambda: volumes.finish(volume, stem, self.model.info.provider))

    def _finish_volume3d(self, work: Work) -> Outcome:
        """A 3D model's volume: its label volume and kept probabilities handed to the assembler at once, then
        finished as a 2D model's volume is (exports, the volume's row, --per-slice rows and PNGs)."""
        from app.runs.folder.volume3d import slice_results

        volume, output = cast("Volume", work.input.volume), cast("VolumeOutput", work.volume_output)
        volumes = cast(VolumeAssembler, self.setup.volumes)
        stem = self.setup.out_dir / self.setup.stems[work.index] if self.setup.out_dir is not None else None
        per_slice = stem is not None and (self.setup.volume_options.per_slice or volume.affine is None)
        keeps = self.model.spec.output.kind in ("binary", "scores")
        scores = output.prediction.probabilities if stem is not None and "scores" in self.setup.save and keeps \
            else None

        def finish() -> VolumeResult:
            results = slice_results(self.model.spec, output, provider=self.model.info.provider,
                                    min_confidence=self.setup.min_confidence)
            volumes.add_volume(work.index, volume, results, scores=scores, image=self._slice_image(volume, per_slice),
                               slice_stem=lambda k: cast(Path, stem) / f"slice_{k + 1:04d}" if per_slice else None,
                               save=self.setup.save if per_slice else ())
            return volumes.finish(volume, stem, self.model.info.provider)

        return self._volume_outcome(work, finish)

    def _volume_outcome(self, work: Work, finish: Callable[[], VolumeResult]) -> Outcome:
        """The volume's Outcome from `finish` (its exports and rows): an error row when it fails, its notices kept
        (redacted under --anonymize)."""
        try:
            vr = finish()
        except SegLensError as exc:
            return Outcome(work.index, work.input, None, error_line(work.input.path, exc))
        except Exception as exc:  # an export library's bug must not end the run: this volume's error row
            log.debug("unexpected error finishing %s", work.input.path, exc_info=True)
            return Outcome(work.index, work.input, None, unexpected_error_line(work.input.path, exc))
        self.summary.notices.extend(vr.notices if self.names is None else
                                    (self._redacted(notice, work.index, work.input) for notice in vr.notices))
        return Outcome(work.index, work.input, None, None, verdict=vr.verdict, volume=vr)

    def _slice_image(self, volume: Volume, per_slice: bool) -> Callable[[int], DecodedImage | None]:
        """Slice k as decoded, read again only where something draws on it: the Secondary Capture, per-slice
        overlays (the 3D model ran on the volume's real units, not on a decoded slice)."""
        from app.io.images import read_slice
        from app.runs.folder.volumes import chosen_exports

        wanted = "sc" in chosen_exports(self.model.spec, volume, self.setup.volume_options.exports) or (
            per_slice and "overlay" in self.setup.save)
        return (lambda k: read_slice(volume, k)) if wanted else (lambda _: None)

    def _refused(self, stem: Path) -> str | None:
        guard = self.setup.guard
        if guard is None:
            return None
        return next(filter(None, (guard.problem(path) for path in planned_outputs(stem, self.setup.save))), None)

    def _record(self, outcome: Outcome, carried: list[str] | None) -> None:
        summary, report = self.summary, self.report
        if self.names is not None:  # --anonymize: what the progress callback prints or shows names no input path
            outcome = replace(outcome, name=self.names[outcome.index],
                              error=self._message(outcome) if outcome.error else None)
        if outcome.resumed:
            summary.ok += 1
            summary.resumed += 1
            self._count(_carried_verdict(carried, report))
            if report:
                report.add_row(cast("list[str]", carried))  # a resumed outcome has its carried row
        elif outcome.result is not None or outcome.volume is not None:
            try:
                extra = self._extra_cells(outcome)
                if report and outcome.volume is not None:
                    write_volume_rows(report, self.model.spec, self._path(outcome), outcome.volume,
                                      self.setup.volume_options, extra_after=extra)
                elif report:
                    report.add_result(self._path(outcome), cast(Result, outcome.result), verdict=outcome.verdict,
                                      extra=self._volume_blanks(outcome) + extra)
                if self.setup.reference is not None:
                    self.setup.reference.summary.add(str(self._path(outcome)), outcome.scored)
                if outcome.result is not None and outcome.result.instances is not None:
                    summary.add_instances(outcome.result.instances)
                summary.ok += 1
                self._count("" if outcome.verdict is None else outcome.verdict.cell)
            except OSError:
                raise  # the report itself cannot be written: the run stops and says so
            except Exception as exc:  # a result the report cannot describe is that input's error
                log.debug("report row for %s failed", outcome.input.path, exc_info=True)
                outcome = Outcome(outcome.index, outcome.input, None, unexpected_error_line(outcome.input.path, exc))
                summary.failed += 1
                if report:
                    report.add_error(self._path(outcome), self._message(outcome), provider=self.model.info.provider)
        else:
            summary.failed += 1
            if report:
                report.add_error(self._path(outcome), self._message(outcome), provider=self.model.info.provider)
        if self.progress:
            self.progress(outcome, summary)
        self.recorded += 1

    def _path(self, outcome: Outcome) -> Path | str:
        """The input as the report names it: its path, or under --anonymize its pseudonymous name."""
        return outcome.input.path if self.names is None else self.names[outcome.index]

    def _message(self, outcome: Outcome) -> str:
        """The error cell: under --anonymize without the input's paths (app.runs.privacy.names.redact)."""
        message = outcome.error or ""
        if self.names is None:
            return message
        from app.runs.privacy.names import redact

        return redact(message, outcome.input, self.names[outcome.index], out_dir=self.setup.out_dir)

    def _redacted(self, line: str, index: int, item: InputFile) -> str:
        """A line about input `index` under --anonymize, its paths replaced by its pseudonymous name."""
        from app.runs.privacy.names import redact

        assert self.names is not None  # called under --anonymize only
        return redact(line, item, self.names[index], out_dir=self.setup.out_dir)

    def _extra_cells(self, outcome: Outcome) -> list[str]:
        """The reference columns' cells (blank for a volume: it has no 2D reference)."""
        if self.setup.reference is None:
            return []
        return [""] * len(self.setup.reference.columns) if outcome.volume is not None else \
            list(self.setup.reference.cells(outcome.scored))

    def _volume_blanks(self, outcome: Outcome) -> list[str]:
        """An image's cells in the volume columns of a run that also has volumes: empty."""
        if self.setup.volumes is None:
            return []
        from app.runs.folder.volumes import volume_columns

        return [""] * len(volume_columns(self.model.spec))

    def _count(self, verdict: str) -> None:
        if verdict == "ok":
            self.summary.passed += 1
        elif verdict == "ng":
            self.summary.rejected += 1
        elif verdict == "review":
            self.summary.review += 1


def _ran(work: Work) -> tuple[Prepared, Output | TiledOutput]:
    """A work that reached the writer without an error or a carried row: it was prepared and run."""
    return cast(Prepared, work.prepared), cast("Output | TiledOutput", work.output)


def _carried_verdict(row: list[str] | None, report: ReportWriter | None) -> str:
    """The `verdict` cell of a row carried over by --resume (its columns are this report's: finished_rows)."""
    if row is None or report is None or "verdict" not in report.columns:
        return ""
    index = report.columns.index("verdict")
    return row[index] if index < len(row) else ""
