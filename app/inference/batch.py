"""Folder runs: every input through the pipeline, results written, one report row each, in input order.

A failure on one input (unreadable image, inference error, unwritable output) becomes an error row and the
run goes on with the next.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.errors import SegLensError
from app.inference import pipeline
from app.inference.pipeline import Result
from app.inference.session import ModelSession
from app.io.discover import InputFile, output_stems
from app.io.outputs import ReportWriter, write_result_images

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What happened to one input: a result, or the one-line error."""

    index: int
    input: InputFile
    result: Result | None
    error: str | None


@dataclass
class RunSummary:
    total: int = 0
    ok: int = 0
    failed: int = 0
    cancelled: bool = False


ProgressFn = Callable[[Outcome, RunSummary], None]


def run_inputs(
    model: ModelSession,
    inputs: Sequence[InputFile],
    *,
    out_dir: Path | None,
    save: Sequence[str] = ("mask",),
    report: ReportWriter | None = None,
    progress: ProgressFn | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> RunSummary:
    summary = RunSummary(total=len(inputs))
    stems = output_stems(list(inputs))
    for index, item in enumerate(inputs):
        if should_stop():
            summary.cancelled = True
            if report:  # the report still lists every input, saying which were never processed
                for rest in inputs[index:]:
                    report.add_error(rest.path, "not processed: the run was cancelled", status="skipped")
            break
        outcome = _process(model, index, item, out_dir / stems[index] if out_dir else None, save)
        _record(outcome, summary, report, model)
        if progress:
            progress(outcome, summary)
    return summary


def _process(model: ModelSession, index: int, item: InputFile, out_stem: Path | None,
             save: Sequence[str]) -> Outcome:
    try:
        image, decode_ms = pipeline.decode(item.path)
        result = pipeline.run_image(model, image, decode_ms=decode_ms)
        if out_stem is not None:
            write_result_images(result, model.spec, out_stem, save, image.pixels)
        return Outcome(index, item, result, None)
    except SegLensError as exc:
        return Outcome(index, item, None, about(item.path, exc))
    except Exception as exc:  # a bug or an odd library error must not end the whole run
        log.debug("unexpected error on %s", item.path, exc_info=True)
        return Outcome(index, item, None, unexpected_error(item.path, exc))


def about(path: Path, exc: BaseException) -> str:
    """The error's one line, starting with the input's path (model errors name only the model)."""
    message = str(exc)
    return message if message.startswith(str(path)) else f"{path}: {message}"


def unexpected_error(path: Path, exc: BaseException) -> str:
    """One line for an error nobody planned for: the file, the exception type, its first 300 characters."""
    return f"{path}: unexpected error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"


def _record(outcome: Outcome, summary: RunSummary, report: ReportWriter | None, model: ModelSession) -> None:
    if outcome.result is not None:
        summary.ok += 1
        if report:
            report.add_result(outcome.input.path, outcome.result)
    else:
        summary.failed += 1
        if report:
            report.add_error(outcome.input.path, outcome.error or "", provider=model.info.provider)
