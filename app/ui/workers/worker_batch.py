"""The inference worker's Run on all and review report (a mixin of app.ui.workers.worker.InferenceWorker, on its
thread): every listed input through the CLI's folder run (app.runs.folder_run.run_folder), with the reader's
threshold."""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Slot

from app.runs.plan import Progress

if TYPE_CHECKING:
    from app.ui.state.messages import ReportRequest, Tuning

log = logging.getLogger("app.ui.workers.worker")


class BatchSlots:
    """Slots of InferenceWorker (its sessions, `_tuned`, `_cancel` and batch signals); run on the worker thread."""

    @Slot(list, str, list, object, object)
    def run_all(self, inputs: list, out_dir: str, save: list, tuning: Tuning | None = None,
                volumes: dict | None = None) -> None:
        """Process every input, exporting masks/overlays and the CSV report through the CLI's own folder run
        (app.runs.folder_run), at the reader's threshold and score limit (`tuning`) as the CLI's --threshold
        would; without a folder, the scores and verdicts only (nothing written)."""
        from app.errors import SegLensError
        from app.runs.batch import RunSummary
        from app.runs.folder_run import LocalRunner, run_folder

        self._cancel.clear()
        if self._model is None:
            self.batch_finished.emit(RunSummary(), "no model is loaded")
            return
        try:
            model, min_confidence = self._tuned_for_batch(tuning.threshold if tuning is not None else None)
            plan = _plan(model, inputs, out_dir, save, tuning, volumes, min_confidence=min_confidence)
            run = run_folder(plan, LocalRunner(model), progress=_Progress(self, model.spec),
                             should_stop=self._cancel.is_set)
        except SegLensError as exc:
            self.batch_finished.emit(RunSummary(total=len(inputs)), str(exc))
            return
        except Exception as exc:  # whatever is raised, the window hears the run ended (no progress bar for ever)
            from app.errors import unexpected_error_line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, "run on all failed", exc)  # no folder: paths only at DEBUG
            self.batch_finished.emit(RunSummary(total=len(inputs)),
                                     unexpected_error_line(Path(out_dir or "run on all"), exc))
            return
        self.batch_finished.emit(run.summary, str(run.report or ""))

    @Slot(object)
    def export_report(self, request: ReportRequest) -> None:
        """The HTML review report of the request's entries, written atomically to its `report_path`; under
        `anonymize` the rows go by their pseudonyms (the workstation's pseudonym key, as `report --anonymize`)."""
        from app.runs.provenance import RunIdentity
        from app.runs.review_report import write_review_report
        from app.ui.workers.report_export import report_items

        self._cancel.clear()
        path = Path(request.report_path)
        if self._model is None:
            self.report_finished.emit(False, "no model is loaded")
            return
        try:
            tuning = request.tuning
            model, min_confidence = self._tuned(tuning.threshold)
            items = report_items(model, request.entries, tuning, request.reviews, references=self._references,
                                 min_confidence=min_confidence, should_stop=self._cancel.is_set,
                                 anonymize=request.anonymize)
            run = RunIdentity.of(model.spec, threshold=tuning.threshold, min_confidence=min_confidence,
                                 session=model.info)  # the header says what made the results, as the CLI's does
            write_review_report(path, items, model_name=request.model_name, model_sha256=request.model_sha256,
                                seglens_version=request.seglens_version,
                                title=f"SegLens review — {request.model_name}", run=run)
        except Exception as exc:  # the window hears that it ended, with the one line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, "the review report failed", exc)
            self.report_finished.emit(False, failure_line(path, exc))
            return
        self.report_finished.emit(True, request.report_path)

    def _tuned_for_batch(self, threshold: float | None):
        """(a copy of the batch session with the reader's threshold in its spec, min_confidence): a copy, so the
        score limit set on it does not reach the interactive session."""
        from app.inference.tuning import with_threshold

        batch = self._for_batch()
        spec, min_confidence = with_threshold(batch.spec, threshold)
        model = copy.copy(batch)
        model.spec = spec
        return model, min_confidence

    def _for_batch(self):
        """The session for Run on all. On the CPU, ONNX Runtime's intra-op threads take every core for each
        `session.run`, and the window's thread then waits for a core: event-loop stalls of 50-70 ms. A second
        session with one thread fewer leaves a core to the window and to the decode/write threads, at about the
        same folder throughput (the freed core does their work); docs/PERFORMANCE.md. Kept for later runs."""
        import os

        from app.inference.session import open_session

        model = self._model
        threads = (os.cpu_count() or 1) - 1
        if model.info.on_gpu or (self._options or {}).get("intra_op_threads") or threads < 1:
            return model  # on a GPU, or threads chosen by the user, or a single core: nothing to leave free
        if self._batch_model is None:
            try:
                options = {**(self._options or {}), "intra_op_threads": threads}
                self._batch_model = open_session(model.spec, "cpu", runtime=options, warm_up=False)
                self._batch_threads = threads
            except Exception:  # the interactive session works: use it rather than fail the run
                log.warning("a separate session for Run on all could not be created", exc_info=True)
                return model
            self.session_threads.append(threading.get_ident())
        return self._batch_model



def _plan(model, inputs: list, out_dir: str, save: list, tuning: Tuning | None, volumes: dict | None, *,
          min_confidence: float | None):
    """The RunPlan of Run on all: the listed inputs (two named alike an error row unless De-identify names them),
    the dialog's volume choices (else the CLI's defaults), the reader's reference folder (as `run --reference`);
    no folder: nothing written, no volume exports."""
    from app.inference.tuning import with_score_limit
    from app.runs.folder_run import RunPlan
    from app.runs.volume_run import VolumeOptions, pseudonym_key

    model.spec = spec = with_score_limit(model.spec, tuning.score_limit if tuning is not None else None)
    threshold = tuning.threshold if tuning is not None else None
    has_volumes = any(item.volume is not None for item in inputs)
    if not out_dir:
        return RunPlan(spec=spec, inputs=tuple(inputs), out=None, save=(), min_confidence=min_confidence,
                       threshold=threshold, volumes=VolumeOptions(exports=()) if has_volumes else None)
    options = VolumeOptions(**(volumes or {})) if has_volumes else None
    if options is not None and options.anonymize:
        options = replace(options, pseudonym_key=pseudonym_key())
    else:  # two listed x.png would write one x.png_mask.png
        from app.io.discover import refuse_clashes

        inputs = refuse_clashes(inputs)
    reference = Path(tuning.reference_root) if tuning is not None and tuning.reference_root else None
    return RunPlan(spec=spec, inputs=tuple(inputs), out=Path(out_dir), save=tuple(save), threshold=threshold,
                   min_confidence=min_confidence, volumes=options, reference=reference)


class _Progress(Progress):
    """Each finished input to the window (batch_progress), with the reader's decision on its result."""

    def __init__(self, worker, spec) -> None:
        self.worker, self.spec = worker, spec

    def outcome(self, outcome, summary) -> None:
        from app.inference.tuning import judge

        judged = judge(self.spec, outcome.result) if outcome.result is not None else None
        self.worker.batch_progress.emit(outcome, copy.copy(summary), judged)


def failure_line(path: Path, exc: Exception) -> str:
    """The message the file list and the status bar show; an unexpected error also goes to the log in full."""
    from app.errors import SegLensError, error_line, unexpected_error_line

    if isinstance(exc, SegLensError):
        return error_line(path, exc)
    from app.logs import file_ref, log_exception

    log_exception(log, logging.ERROR, f"processing {file_ref(path)} failed", exc)
    log.debug("%s is %s", file_ref(path), path)
    return unexpected_error_line(path, exc)
