"""The inference worker's Run on all, review report and Compare all (BatchJobs, a collaborator that
app.ui.workers.worker.InferenceWorker composes and calls from its slots, on its thread): every listed input through
the CLI's folder run (app.runs.folder.run.run_folder), with the reader's threshold."""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.runs.folder.plan import Progress

if TYPE_CHECKING:
    from collections.abc import Callable

    from PySide6.QtCore import SignalInstance

    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.model.session import ModelSession
    from app.inference.model.spec import ModelSpec
    from app.runs.folder.run import RunPlan
    from app.runs.folder.writer import Outcome, RunSummary
    from app.runs.review.ground_truth import GroundTruth, References
    from app.runs.review.html import ReportItem
    from app.ui.state.messages import ListedInput, ReportRequest, RunAllRequest, Tuning

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchSignals:
    """The worker's signals the jobs answer on (the window connects to the worker's, so they stay its)."""

    progress: SignalInstance  # batch_progress
    finished: SignalInstance  # batch_finished
    report_finished: SignalInstance
    agreement: SignalInstance  # agreement_ready
    compare_finished: SignalInstance


def tuned(model: ModelSession, threshold: float | None) -> tuple[ModelSession, float | None]:
    """(session, min_confidence) for the reader's threshold: a binary or anomaly model's copy with that pixel
    threshold in its spec (it shares the ONNX Runtime session), or the session and a multi-class model's
    minimum confidence (app.inference.decide.tuning.with_threshold)."""
    from app.inference.decide.tuning import with_threshold

    spec, min_confidence = with_threshold(model.spec, threshold)
    if spec is model.spec:
        return model, min_confidence
    tuned_model = copy.copy(model)
    tuned_model.spec = spec
    return tuned_model, min_confidence


class BatchJobs:
    """Run on all, the review report and Compare all; the worker passes its sessions with each call and runs
    these on its own thread. Keeps the CPU session Run on all uses (see _for_batch)."""

    def __init__(self, signals: BatchSignals, *, cancel: threading.Event, session_threads: list[int],
                 references: References) -> None:
        """`cancel`: the worker's Cancel (set from the GUI thread); `session_threads`: its list of the threads
        sessions were created on; `references`: its images' references (each folder walked once)."""
        self._signals = signals
        self._cancel = cancel
        self._session_threads = session_threads
        self._references = references
        self._batch_model: ModelSession | None = None  # CPU: one intra-op thread short (see _for_batch)
        self.batch_threads: int | None = None

    def forget_session(self) -> None:
        """A new model: its batch session is opened afresh on the next run."""
        self._batch_model = None

    @property
    def session_threads_in_use(self) -> int | None:
        """Intra-op threads of the separate batch session, None while Run on all uses the interactive one."""
        return self.batch_threads if self._batch_model is not None else None

    def run_all(self, model: ModelSession | None, options: RuntimeOptions | None, request: RunAllRequest) -> None:
        """Process every input, exporting masks/overlays and the CSV report through the CLI's own folder run
        (app.runs.folder.run), at the reader's threshold and score limit (`request.tuning`) as the CLI's
        --threshold would; without a folder, the scores and verdicts only (nothing written)."""
        from app.errors import SegLensError
        from app.runs.folder.batch import RunSummary
        from app.runs.folder.run import LocalRunner, run_folder
        from app.ui.state.messages import BatchFinished

        self._cancel.clear()
        if model is None:
            self._signals.finished.emit(BatchFinished(RunSummary(), error="no model is loaded"))
            return
        tuning = request.tuning
        try:
            batch, min_confidence = self._tuned_for_batch(model, options,
                                                          tuning.threshold if tuning is not None else None)
            plan = _plan(batch, request, min_confidence=min_confidence)
            run = run_folder(plan, LocalRunner(batch), progress=_Progress(self._signals.progress, batch.spec),
                             should_stop=self._cancel.is_set)
        except SegLensError as exc:
            self._signals.finished.emit(BatchFinished(RunSummary(total=len(request.inputs)), error=str(exc)))
            return
        except Exception as exc:  # whatever is raised, the window hears the run ended (no progress bar for ever)
            from app.errors import unexpected_error_line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, "run on all failed", exc)  # no folder: paths only at DEBUG
            line = unexpected_error_line(Path(request.out_dir or "run on all"), exc)
            self._signals.finished.emit(BatchFinished(RunSummary(total=len(request.inputs)), error=line))
            return
        self._signals.finished.emit(BatchFinished(run.summary, report_path=str(run.report or "")))

    def export_report(self, model: ModelSession | None, request: ReportRequest) -> None:
        """The HTML review report of the request's entries, written atomically to its `report_path`; under
        `anonymize` the rows go by their pseudonyms (the workstation's pseudonym key, as `report --anonymize`)."""
        from app.runs.outputs.provenance import RunIdentity
        from app.runs.outputs.segments import segments_of
        from app.runs.privacy.words import own_words
        from app.runs.review.html import write_review_report
        from app.ui.state.messages import ReportFinished

        self._cancel.clear()
        path = Path(request.report_path)
        if model is None:
            self._signals.report_finished.emit(ReportFinished(error="no model is loaded"))
            return
        try:
            tuning = request.tuning
            model, min_confidence = tuned(model, tuning.threshold)
            items = report_items(model, request, self._references, min_confidence=min_confidence,
                                 should_stop=self._cancel.is_set)
            run = RunIdentity.of(model.spec, threshold=tuning.threshold, min_confidence=min_confidence,
                                 session=model.info)  # the header says what made the results, as the CLI's does
            write_review_report(path, items, model_name=request.model_name, model_sha256=request.model_sha256,
                                seglens_version=request.seglens_version,
                                title=f"SegLens review — {request.model_name}", run=run,
                                own=own_words(segments_of(model.spec.classes)))
        except Exception as exc:  # the window hears that it ended, with the one line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, "the review report failed", exc)
            self._signals.report_finished.emit(ReportFinished(error=failure_line(path, exc)))
            return
        self._signals.report_finished.emit(ReportFinished(report_path=request.report_path))

    def _tuned_for_batch(self, model: ModelSession, options: RuntimeOptions | None,
                         threshold: float | None) -> tuple[ModelSession, float | None]:
        """(a copy of the batch session with the reader's threshold in its spec, min_confidence): a copy, so the
        score limit set on it does not reach the interactive session."""
        from app.inference.decide.tuning import with_threshold

        batch = self._for_batch(model, options)
        spec, min_confidence = with_threshold(batch.spec, threshold)
        tuned_batch = copy.copy(batch)
        tuned_batch.spec = spec
        return tuned_batch, min_confidence

    def _for_batch(self, model: ModelSession, options: RuntimeOptions | None) -> ModelSession:
        """The session for Run on all. On the CPU, ONNX Runtime's intra-op threads take every core for each
        `session.run`, and the window's thread then waits for a core: event-loop stalls of 50-70 ms. A second
        session with one thread fewer leaves a core to the window and to the decode/write threads, at about the
        same folder throughput (the freed core does their work); docs/PERFORMANCE.md. Kept for later runs."""
        import os

        from app.inference.model.runtime_options import RuntimeOptions
        from app.inference.runtime.session import open_session

        threads = (os.cpu_count() or 1) - 1
        if model.info.on_gpu or model.info.remote or (options and options.intra_op_threads) or threads < 1:
            return model  # on a GPU or a server, threads chosen by the user, a single core: nothing to leave free
        if self._batch_model is None:
            try:
                runtime = (options or RuntimeOptions()).merged(RuntimeOptions.written({"intra_op_threads": threads}))
                self._batch_model = open_session(model.spec, "cpu", runtime=runtime, warm_up=False)
                self.batch_threads = threads
            except Exception:  # the interactive session works: use it rather than fail the run
                log.warning("a separate session for Run on all could not be created", exc_info=True)
                return model
            self._session_threads.append(threading.get_ident())
        return self._batch_model

    def compare_all(self, model: ModelSession | None, model_b: ModelSession | None,
                    entries: tuple[ListedInput, ...]) -> None:
        """Both models on every listed input, for the list's agreement column and sort (app.runs.compare.on_all);
        Cancel stops it between images and slices."""
        from app.io.discover import InputFile
        from app.runs.compare.on_all import compare_all
        from app.ui.state.messages import AgreementMeasured, CompareFinished

        self._cancel.clear()
        if model is None or model_b is None:
            self._signals.compare_finished.emit(CompareFinished(False, "load model B first (Model ▸ Compare with "
                                                                       "another model…)"))
            return
        inputs = [InputFile(Path(e.path), Path(e.rel), volume=e.volume) for e in entries]
        outcome = compare_all(model, model_b, inputs, should_stop=self._cancel.is_set,
                              measured=lambda item, iou, done: self._signals.agreement.emit(
                                  AgreementMeasured(str(item.path), iou, done, len(inputs))))
        self._signals.compare_finished.emit(CompareFinished(outcome.completed, outcome.message))


def ground_truth(tuning: Tuning) -> GroundTruth:
    """Where the reader's tuning says an image's reference is looked for (app.runs.review.ground_truth)."""
    from app.runs.review.ground_truth import GroundTruth

    return GroundTruth(Path(tuning.input_root) if tuning.input_root is not None else None,
                       Path(tuning.reference_root) if tuning.reference_root else None)


def report_items(model: ModelSession, request: ReportRequest, references: References, *,
                 min_confidence: float | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> list[ReportItem]:
    """The review report's rows (app.runs.review.items, which `seglens-cli report` shares), measured against the
    viewer's references; under `request.anonymize` named by their pseudonyms (app.runs.privacy.names, the
    workstation's key: the names Run on all and `run --anonymize` give them)."""
    from app.inference.decide.tuning import with_score_limit
    from app.io.discover import InputFile
    from app.runs.folder.volumes import pseudonym_key
    from app.runs.review.items import Naming
    from app.runs.review.items import report_items as review_rows

    tuning = request.tuning
    spec = with_score_limit(model.spec, tuning.score_limit)
    inputs = [InputFile(Path(e.path), Path(e.rel), volume=e.volume) for e in request.entries]
    root = Path(tuning.input_root) if tuning.input_root else Path(".")
    naming = Naming(root, anonymize=request.anonymize, key=pseudonym_key() if request.anonymize else b"")
    return review_rows(model, inputs, spec=spec, reviews=request.reviews, naming=naming,
                       min_confidence=min_confidence, metrics=references.metrics(spec, ground_truth(tuning)),
                       should_stop=should_stop)


def _plan(model: ModelSession, request: RunAllRequest, *, min_confidence: float | None) -> RunPlan:
    """The RunPlan of Run on all: the listed inputs (two named alike an error row unless De-identify names them),
    the dialog's volume choices (else the CLI's defaults), the reader's reference folder (as `run --reference`);
    no folder: nothing written, no volume exports."""
    from app.inference.decide.tuning import with_score_limit
    from app.runs.folder.run import RunPlan
    from app.runs.folder.volumes import VolumeOptions, pseudonym_key

    inputs, out_dir, save, tuning = request.inputs, request.out_dir, request.save, request.tuning
    model.spec = spec = with_score_limit(model.spec, tuning.score_limit if tuning is not None else None)
    threshold = tuning.threshold if tuning is not None else None
    if spec.is_3d:  # a model of several channels runs on cases (nnU-Net's CASE_0000 …), as seglens-cli run's
        from app.runs.folder.volume3d import case_inputs

        inputs = tuple(case_inputs(spec, inputs))
    has_volumes = any(item.volume is not None for item in inputs)
    if not out_dir:
        return RunPlan(spec=spec, inputs=inputs, out=None, save=(), min_confidence=min_confidence,
                       threshold=threshold, volumes=VolumeOptions(exports=()) if has_volumes else None)
    options = (request.volumes or VolumeOptions()) if has_volumes else None
    if options is not None and options.anonymize:
        options = replace(options, pseudonym_key=pseudonym_key())
    else:  # two listed x.png would write one x.png_mask.png
        from app.io.discover import refuse_clashes

        inputs = tuple(refuse_clashes(list(inputs)))
    reference = Path(tuning.reference_root) if tuning is not None and tuning.reference_root else None
    return RunPlan(spec=spec, inputs=inputs, out=Path(out_dir), save=save, threshold=threshold,
                   min_confidence=min_confidence, volumes=options, reference=reference)


class _Progress(Progress):
    """Each finished input to the window (batch_progress), with the reader's decision on its result."""

    def __init__(self, signal: SignalInstance, spec: ModelSpec) -> None:
        self.signal, self.spec = signal, spec

    def outcome(self, outcome: Outcome, summary: RunSummary) -> None:  # the viewer's runs are local: an Outcome
        from app.inference.decide.tuning import judge
        from app.ui.state.messages import BatchProgress

        judged = judge(self.spec, outcome.result) if outcome.result is not None else None
        self.signal.emit(BatchProgress(outcome, copy.copy(summary), judged))


def model_b_error_line(model_path: Path, exc: Exception) -> str:
    """Model B's failure on a picture as B's one line (`b.onnx: non-finite model output …`): a model's own errors
    name the model, not the image; an unexpected one goes to the log in full."""
    from app.errors import SegLensError, unexpected_error_line

    if isinstance(exc, SegLensError):
        return str(exc)  # already one line
    from app.logs import log_exception

    log_exception(log, logging.ERROR, f"model B {model_path.name} failed", exc)
    return unexpected_error_line(model_path.name, exc)


def failure_line(path: Path, exc: Exception) -> str:
    """The message the file list and the status bar show; an unexpected error also goes to the log in full."""
    from app.errors import SegLensError, unexpected_error_line

    if isinstance(exc, SegLensError):
        from app.ui.state.remote_messages import viewer_line

        line = viewer_line(exc)  # a server's refusal: what to mend in the viewer
        return line if line.startswith(str(path)) else f"{path}: {line}"
    from app.logs import file_ref, log_exception

    log_exception(log, logging.ERROR, f"processing {file_ref(path)} failed", exc)
    log.debug("%s is %s", file_ref(path), path)
    return unexpected_error_line(path, exc)


def content_sha256(path: Path) -> str:
    """The model file's SHA-256, or "" when it cannot be read again (then nothing is remembered for it)."""
    from app.io.files import file_sha256

    try:
        return file_sha256(Path(path))
    except OSError:
        return ""
