"""The one way seglens-cli's lines reach the terminal during a run under --anonymize: stdout and stderr wrapped,
every write passed through the run's LineRedactor (app.runs.privacy.names), so an error, a note, a warning, the
progress line or a summary built anywhere — by SegLens or a library writing to sys.stderr — names each input by
its pseudonymous name and carries no word of its path or its patient.

And what seglens-cli prints about a folder run (run, run --ray, compare): the progress line (Progress), the
session's announcement, the summary and the metrics (print_run)."""

from __future__ import annotations

import io
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.errors import shown
from app.runs.folder.plan import Progress as RunProgress
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.model.session import SessionInfo
    from app.inference.model.spec import ModelSpec
    from app.runs.cluster.driver import RayProgress
    from app.runs.compare.agreement import Compared
    from app.runs.folder.metrics import ScoreSummary
    from app.runs.folder.run import FolderRun
    from app.runs.folder.writer import Outcome, RunSummary
    from app.runs.privacy.names import LineRedactor


class Terminal:
    """`with Terminal() as terminal:` around a command; `terminal.anonymize(redactor)` once its inputs are known.
    On leaving, the streams the command found are back (a test's capture, the real terminal)."""

    def __init__(self) -> None:
        self._saved = (sys.stdout, sys.stderr)
        self._handlers: list[tuple[logging.StreamHandler[Any], Any]] = []

    def __enter__(self) -> Terminal:
        self._saved = (sys.stdout, sys.stderr)
        return self

    def anonymize(self, redactor: LineRedactor) -> None:
        """Every later write to stdout and stderr goes through `redactor.line`, a logging handler's too (main's
        basicConfig handler holds the stderr it found, and `-v` sends it every DEBUG line: a library's wording,
        a path)."""
        redacting = {id(stream): _Redacting(stream, redactor) for stream in self._saved}
        sys.stdout, sys.stderr = (redacting[id(stream)] for stream in self._saved)
        for handler in _stream_handlers():
            if id(handler.stream) in redacting:
                self._handlers.append((handler, handler.stream))
                handler.setStream(redacting[id(handler.stream)])

    def __exit__(self, *exc: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, _Redacting):
                stream.flush()
        for handler, stream in self._handlers:
            handler.setStream(stream)
        self._handlers.clear()
        sys.stdout, sys.stderr = self._saved


def _stream_handlers() -> list[logging.StreamHandler[Any]]:
    """The handlers of every logger that write to a stream (a file handler is not the terminal's)."""
    loggers = [logging.getLogger(), *(logger for logger in list(logging.root.manager.loggerDict.values())
                                      if isinstance(logger, logging.Logger))]  # not a PlaceHolder
    return [handler for logger in loggers for handler in logger.handlers
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)]


class _Redacting(io.TextIOBase):
    """A text stream writing `redactor.line(text)` of each write to `stream` (print writes a line in one call)."""

    def __init__(self, stream: TextIO, redactor: LineRedactor) -> None:
        super().__init__()
        self._stream, self._redactor = stream, redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.line(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # read-only: the wrapped stream's
        return getattr(self._stream, "encoding", "utf-8")


# --- a folder run on the terminal -----------------------------------------------------------------------------


def say(line: str) -> None:
    """A note or a warning about the run, on stderr (the line as the run composed it)."""
    print(line, file=sys.stderr)


def announce_session(info: SessionInfo, spec: ModelSpec) -> None:
    """A session that does not run where it was asked to: said before the run (no GPU is no news: `provider`)."""
    if info.fallback_reason and info.requested.startswith("cuda"):
        print(f"warning: CUDA was requested but {shown(spec.path.name)} runs on the CPU: {info.fallback_reason}",
              file=sys.stderr)
    elif info.fallback_warns:  # a GPU is there but unusable; without one the CPU is no news (provider says so)
        print(f"note: running on the CPU ({info.fallback_reason})", file=sys.stderr)


def print_run(run: FolderRun, progress: Progress, *, provider_label: str, out: Path) -> None:
    """After a run: its notices, the inputs that do not fit the model, the summary, the reference's metrics and
    the provenance line."""
    summary = run.summary
    for notice in dict.fromkeys(summary.notices):
        print(f"note: {shown(notice)}", file=sys.stderr)
    progress.print_misfits()
    resumed = f" ({summary.resumed} done by an earlier run)" if summary.resumed else ""
    print(f"{counted(summary.total, 'input')}: {summary.ok} ok{resumed}, {summary.failed} failed; provider "
          f"{provider_label}; outputs in {shown(out)}, report {shown(run.report)}")
    if summary.verdict_line():
        print(summary.verdict_line())
    if summary.instances_line():
        print(summary.instances_line())
    if summary.label_files:
        print("labels: " + ", ".join(shown(p) for p in summary.label_files))
    if summary.label_error:
        print(f"error: {shown(summary.label_error)}", file=sys.stderr)
    if run.metrics is not None:
        print_metrics(run.metrics, list(run.written))
    if run.identity is not None and run.report is not None:
        print(shown(run.identity.summary_line(run.report)))


def print_metrics(metrics: ScoreSummary, written: list[Path]) -> None:
    """The metrics summary and the files `metrics.write` wrote (inside the run's lock, before this)."""
    for line in metrics.lines():
        print(shown(line))
    print("metrics: " + ", ".join(shown(p) for p in written))


class Progress(RunProgress):
    """A one-line progress bar on stderr (terminals only); error lines are printed above it."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.started = time.perf_counter()
        self.misfits: dict[str, list[Any]] = {}  # why an image does not fit the model → [inputs, the first one's name]

    def outcome(self, outcome: Outcome | Compared | RayProgress, summary: RunSummary) -> None:
        """An input is done: its error or reference notice above the bar, the bar moved on."""
        from app.runs.cluster.driver import RayProgress

        scored = None if isinstance(outcome, RayProgress) else outcome.scored  # Ray's progress carries no metrics
        if outcome.error:
            self._clear()
            print(f"error: {shown(outcome.error)}", file=sys.stderr)
        elif scored is not None and scored.notice:
            self._clear()
            print(f"note: {shown(scored.notice)}", file=sys.stderr)
        self._keep_misfits(outcome)
        if not self.enabled:
            return
        done = summary.ok + summary.failed
        rate = done / max(time.perf_counter() - self.started, 1e-9)
        filled = int(30 * done / max(self.total, 1))
        bar = "#" * filled + "-" * (30 - filled)
        sys.stderr.write(f"\r[{bar}] {done}/{self.total}  {rate:.1f} img/s  {summary.failed} failed")
        sys.stderr.flush()

    def tiles(self, done: int, total: int) -> None:
        """A tiled image's progress, on the same line (the bar comes back when the image is done)."""
        if self.enabled:
            sys.stderr.write(f"\r\x1b[K  tiles {done}/{total}")
            sys.stderr.flush()

    def slices(self, done: int, total: int) -> None:
        """A volume's progress in slices, on the same line (the bar comes back when the volume is done)."""
        if self.enabled:
            sys.stderr.write(f"\r\x1b[K  slices {done}/{total}")
            sys.stderr.flush()

    def patches(self, done: int, total: int) -> None:
        """A 3D model's progress through a volume, on the same line (the bar comes back when the volume is done)."""
        if self.enabled:
            sys.stderr.write(f"\r\x1b[K  patch {done} of {total}")
            sys.stderr.flush()

    def note(self, line: str) -> None:
        """A line about the run (a killed run's temporaries removed), above the bar."""
        self._clear()
        print(line, file=sys.stderr)

    def _keep_misfits(self, outcome: Outcome | Compared | RayProgress) -> None:
        """An image that does not fit the model (app.inference.image.fit): counted here, said once per reason at the
        end (a folder of photos into a CT model would otherwise print a line per photo)."""
        from app.runs.cluster.driver import RayProgress
        from app.runs.folder.writer import Outcome

        if isinstance(outcome, RayProgress):  # its result stayed on the cluster: no warnings here
            return
        kept = (outcome.result or outcome.volume) if isinstance(outcome, Outcome) else outcome  # compare: itself
        for reason in kept.warnings if kept is not None else ():
            first = outcome.name or outcome.input.path.name  # a pseudonym under --anonymize
            self.misfits.setdefault(reason, [0, first])[0] += 1

    def print_misfits(self) -> None:
        """Each reason inputs did not fit the model, once, with how many and the first one."""
        for reason, (count, first) in self.misfits.items():
            fit = "does not fit" if count == 1 else "do not fit"
            print(f"note: {counted(count, 'input')} {fit} the model (e.g. {shown(first)}; the report's warning "
                  f"column): {shown(reason)}", file=sys.stderr)

    def _clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")

    def close(self) -> None:
        """The bar's line ended (terminals only)."""
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
