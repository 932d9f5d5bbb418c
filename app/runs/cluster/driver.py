"""The driver of a Ray run (app/runs/cluster/run.py builds the actors): chunks submitted with bounded work in flight,
rows written to the report in input order as chunks come back, a dead actor replaced and its chunks re-sent,
Ctrl+C keeping what finished. Exactly once: a row is written only when its chunk comes back. RayRunner: the
folder run's Runner on Ray (app.runs.folder.run.run_folder drives it as it drives a local run)."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import one_line
from app.guard.shared import remove_under
from app.io.discover import InputFile, output_stems
from app.runs.cluster.run import NODE_COLUMN, Actor, ActorFactory, RayOptions
from app.runs.folder.writer import RunSummary
from app.runs.outputs.report import ReportWriter
from app.runs.outputs.safety import OutputGuard, planned_outputs
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.model.session import SessionInfo
    from app.inference.model.spec import ModelSpec
    from app.runs.folder.metrics import Scorer
    from app.runs.folder.plan import Progress, RunPlan


@dataclass
class _Chunk:
    number: int
    items: list[tuple[int, InputFile, Path]]  # (index in the run, input, output stem)
    tries: int = 0
    rows: list[list[str]] | None = None
    node: str = ""


# What the driver writes in input order: a chunk to run, a carried row (--resume), an input refused before it is sent
_Entry = _Chunk | list[str] | tuple[InputFile, str]


@dataclass
class RayProgress:
    """One finished input, for the progress line: its error (None when ok) and the running summary."""

    error: str | None
    summary: RunSummary
    scored: object = None
    notices: list[str] = field(default_factory=list)


def run_on_ray(actors: list[Actor], factory: ActorFactory, inputs: Sequence[InputFile], *, report: ReportWriter,
               options: RayOptions,
               save: Sequence[str], out_dir: Path, extra_columns: Sequence[str] = (),
               done: Mapping[str, list[str]] | None = None,
               progress: Callable[[RayProgress], None] | None = None,
               png_texts: Mapping[str, Mapping[str, str]] | None = None,
               on_chunk: Callable[[int], None] | None = None) -> RunSummary:
    """Run `inputs` on `actors` (start_actors; `factory` replaces one that dies), writing the report in input
    order; returns the summary.

    `report` has the columns of `extra_columns` (the actors' rows) then `node`.
    `done`: rows of inputs an earlier run finished (--resume), carried in their place. `on_chunk(n)` is called
    after the n-th finished chunk (tests kill an actor there). Ctrl+C (KeyboardInterrupt) stops submitting: every
    finished row is kept in order and the rest are listed as skipped, then it is raised again.
    """
    summary = RunSummary(total=len(inputs))
    driver = _Driver(actors, report, summary, options, progress, on_chunk)
    driver.factory = factory
    driver.extra_columns, driver.png_texts = tuple(extra_columns), png_texts
    chunks = _chunks(inputs, options.chunk, done or {}, out_dir, save, driver)
    try:
        driver.drive(chunks)
    except KeyboardInterrupt:
        driver.cancel(chunks)
        summary.cancelled = True
        raise
    return summary


def _chunks(inputs: Sequence[InputFile], size: int, done: Mapping[str, list[str]], out_dir: Path,
            save: Sequence[str], driver: _Driver) -> Iterator[_Entry]:
    """In input order: a carried row (list), an input refused before it is sent (input, error), or a chunk of
    inputs to run; lazily, so a million inputs are never all in flight."""
    guard = OutputGuard(out_dir, inputs)
    stems = output_stems(list(inputs))
    batch: list[tuple[int, InputFile, Path]] = []
    number = 0
    for index, (item, stem) in enumerate(zip(inputs, stems, strict=True)):
        carried = done.get(str(item.path))
        refused = None if carried is not None else next(
            filter(None, (guard.problem(p) for p in planned_outputs(out_dir / stem, save))), None)
        if carried is None and refused is None:
            batch.append((index, item, stem))
            if len(batch) < size:
                continue
        if batch:
            yield _Chunk(number, batch)
            number, batch = number + 1, []
        if carried is not None:
            yield carried
        elif refused is not None:
            yield item, f"{item.path}: {refused}"
    if batch:
        yield _Chunk(number, batch)


class _Driver:
    """Submits chunks with bounded work in flight and writes what comes back in input order."""

    def __init__(self, actors: list[Actor], report: ReportWriter, summary: RunSummary, options: RayOptions,
                 progress: Callable[[RayProgress], None] | None, on_chunk: Callable[[int], None] | None) -> None:
        self.actors, self.report, self.summary, self.options = actors, report, summary, options
        self.progress, self.on_chunk = progress, on_chunk
        # everything not yet written, in input order (chunks, carried rows, refusals)
        self.order: deque[_Entry] = deque()
        self.running: dict[Any, tuple[_Chunk, Actor]] = {}  # ObjectRef → (chunk, actor)
        self.finished = 0
        self._next_actor = 0
        self.extra_columns: tuple[str, ...] = ()
        self.png_texts: Mapping[str, Mapping[str, str]] | None = None
        self.factory: ActorFactory | None = None
        self.replaced = 0  # actors that died and were replaced

    def drive(self, source: Iterator[_Entry]) -> None:
        import ray

        limit = max(1, len(self.actors) * self.options.in_flight)
        source = iter(source)
        exhausted = False
        while not exhausted or self.order:
            while not exhausted and len(self.running) < limit:
                entry = next(source, None)
                if entry is None:
                    exhausted = True
                    break
                self.order.append(entry)
                if isinstance(entry, _Chunk):
                    self._submit(entry)
                else:  # a carried row or a refusal: written at once when nothing before it is pending, so a
                    self._write_ready()  # resume of a million finished inputs never queues them all
            self._write_ready()
            if self.running:
                ready, _ = ray.wait(list(self.running), num_returns=1)
                self._collect(ready[0])

    def _submit(self, chunk: _Chunk) -> None:
        actor = self.actors[self._next_actor % len(self.actors)]
        self._next_actor += 1
        chunk.tries += 1
        self.running[actor.run.remote(chunk.items, self.png_texts)] = (chunk, actor)

    def _collect(self, ref: Any) -> None:  # a Ray ObjectRef
        import ray

        chunk, actor = self.running.pop(ref)
        try:
            chunk.rows, chunk.node, notices = ray.get(ref)
            self.summary.notices.extend(notices)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            self._replace(actor)
            if chunk.tries <= self.options.retries:
                self._submit(chunk)  # on whichever actor is next: the replacement queues it behind its warm-up
                return
            chunk.rows = self._error_rows(chunk, f"failed on the cluster after {chunk.tries} tries: {one_line(exc)}")
        except ray.exceptions.RayTaskError as exc:  # a bug in the actor's code: these inputs' error rows
            chunk.rows = self._error_rows(chunk, f"failed on the cluster: {one_line(exc)}")
        self.finished += 1
        if self.on_chunk is not None:
            self.on_chunk(self.finished)

    def _replace(self, dead: Actor) -> None:
        """A new actor in the dead one's place (once: its other chunks fail the same way and find it replaced)."""
        if self.factory is None or dead not in self.actors:
            return
        self.actors[self.actors.index(dead)] = self.factory.make()
        self.replaced += 1

    def _write_ready(self) -> None:
        while self.order:
            entry = self.order[0]
            if isinstance(entry, _Chunk):
                if entry.rows is None:
                    return
                for row in entry.rows:
                    self._row(row, entry.node)
            elif isinstance(entry, tuple):
                self._error(*entry)
            else:
                self._carried(entry)
            self.order.popleft()

    def cancel(self, source: Iterator[_Entry]) -> None:
        """Ctrl+C: finished rows in order, everything else (running, queued, not yet listed) as skipped."""
        why = "not processed: the run was cancelled"
        self.running.clear()
        for entry in [*self.order, *source]:
            if isinstance(entry, _Chunk) and entry.rows is not None:
                for row in entry.rows:
                    self._row(row, entry.node)
            elif isinstance(entry, _Chunk):
                for _, item, _ in entry.items:
                    self.report.add_error(item.path, why, status="skipped")
            elif isinstance(entry, tuple):
                self.report.add_error(entry[0].path, why, status="skipped")
            else:
                self._carried(entry)
        self.order.clear()

    def _row(self, row: list[str], node: str) -> None:
        columns = self.report.columns
        self.report.add_row(_with_node(row, node))
        if "slice" in columns and row[columns.index("slice")]:  # a volume's per-slice row: not an input
            return
        status, error = row[1], row[-1]
        if status == "ok":
            self.summary.ok += 1
            self._count_verdict(row)
        else:
            self.summary.failed += 1
        self._told(error if status != "ok" else None)

    def _carried(self, row: list[str]) -> None:
        self.report.add_row(row)
        self.summary.ok += 1
        self.summary.resumed += 1
        self._count_verdict(row)
        self._told(None)

    def _error(self, item: InputFile, message: str) -> None:
        self.report.add_error(item.path, message)
        self.summary.failed += 1
        self._told(message)

    def _count_verdict(self, row: list[str]) -> None:
        columns = self.report.columns
        verdict = row[columns.index("verdict")] if "verdict" in columns else ""
        self.summary.passed += verdict == "ok"
        self.summary.rejected += verdict == "ng"
        self.summary.review += verdict == "review"

    def _told(self, error: str | None) -> None:
        if self.progress is not None:
            self.progress(RayProgress(error, self.summary))

    def _error_rows(self, chunk: _Chunk, message: str) -> list[list[str]]:
        from app.runs.outputs.report import RowsReport

        rows = RowsReport(self.report.spec, extra_columns=self.extra_columns)
        for _, item, _ in chunk.items:
            rows.add_error(item.path, f"{item.path}: {message}")
        return rows.rows


def _with_node(row: list[str], node: str) -> list[str]:
    """The actor's row with the node column put in its place: after the extra columns, before the timings."""
    from app.inference.image.pipeline import STAGES
    from app.runs.outputs.report import TRAILING_COLUMNS

    cut = len(row) - len(STAGES) - len(TRAILING_COLUMNS)
    return [*row[:cut], node, *row[cut:]]



class RayRunner:
    """A folder run's Runner on Ray (app.runs.folder.run): actors started inside the output lock, after the probe
    file every node must see; the rows in input order, with the node each ran on."""

    columns: tuple[str, ...] = (NODE_COLUMN,)

    def __init__(self, spec: ModelSpec, *, options: RayOptions, job: Mapping[str, Any], cpus: float, gpus: float,
                 count: int, announce: Callable[[list[dict[str, Any]], ModelSpec], None]) -> None:
        """`job`: the settings of app.runs.cluster.run.make_job other than those the plan gives (model, config,
        device, runtime, tile); `count` actors of `cpus` and `gpus` each (app.runs.cluster.run.actor_plan);
        `announce` is told each actor's session once they are up."""
        self.spec, self.options, self.job = spec, options, dict(job)
        self.cpus, self.gpus, self.count, self.announce = cpus, gpus, count, announce
        self.actors: list[Actor] = []
        self.infos: list[dict[str, Any]] = []
        self.factory: ActorFactory | None = None

    @contextlib.contextmanager
    def session(self, plan: RunPlan, extra_columns: Sequence[str]) -> Iterator[SessionInfo]:
        """The actors up, each with its warmed session; the first one's facts for the run record."""
        from app.inference.model.session import SessionInfo
        from app.runs.cluster import run as ray_run

        assert plan.out is not None  # a Ray run writes into a folder every node reaches
        probe = ray_run.make_probe(plan.out)
        try:
            job = ray_run.make_job(**self.job, threshold=plan.threshold, out_dir=str(plan.out.resolve()),
                                   save=plan.save, batch=plan.batch, volumes=plan.volumes,
                                   decoders=max(2, int(self.cpus)), extra_columns=tuple(extra_columns),
                                   probe=str(probe.resolve()))
            self.factory = ray_run.ActorFactory(job, cpus=self.cpus, gpus=self.gpus)
            self.actors = ray_run.start_actors(self.factory, self.count)
            self.infos = [ray_run.actor_info(actor) for actor in self.actors]
            self.announce(self.infos, self.spec)
            first = self.infos[0]
            yield SessionInfo(requested=first["requested"], provider=first["provider"],
                              providers=(first["provider"],), fallback_reason=first["fallback_reason"],
                              gpu_present=first["gpu_present"], device_id=first["device_id"])  # the label as locally
        finally:
            remove_under(probe.parent, probe.name)

    def run(self, plan: RunPlan, *, report: ReportWriter | None, done: Mapping[str, list[str]],
            reference: Scorer | None, png_texts: Mapping[str, Mapping[str, str]] | None,
            progress: Progress, should_stop: Callable[[], bool]) -> RunSummary:
        """run_on_ray with the plan's inputs (the report's columns before `node` are the actors' own)."""
        assert report is not None and plan.out is not None and self.factory is not None  # inside session()
        return run_on_ray(self.actors, self.factory, plan.inputs, report=report, options=self.options,
                          save=plan.save, out_dir=plan.out, extra_columns=self.factory.job.extra_columns, done=done,
                          progress=lambda p: progress.outcome(p, p.summary), png_texts=png_texts)

    @property
    def provider_label(self) -> str:
        """The actors' providers, how many actors on how many nodes."""
        nodes = {info["node"] for info in self.infos}
        labels = ", ".join(sorted({info["provider_label"] for info in self.infos}))
        return f"{labels} on {counted(len(self.actors), 'Ray actor')}, {counted(len(nodes), 'node')}"
