"""The one folder run: a RunPlan (what to run, validated once) and `run_folder` (the output lock, --resume's
read-back, the report, the run record, the run itself, the reference's metrics), called by seglens-cli run, its
--ray driver (app.runs.cluster.driver.RayRunner) and the viewer's Run on all (app.ui.workers.worker_batch).

A Runner is where the inputs run: LocalRunner (one session on this thread, app.runs.folder.batch) or RayRunner (actors).
A Progress is what the face is told as it goes: each finished input, a tiled image's tiles, a volume's slices, and
notes (one line each). Everything else a face does is parse, show and print the FolderRun it gets back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.errors import shown
from app.runs.folder.plan import DEFAULT_REPORT_NAME, PlanRefused, Progress, RunPlan, option_problem
from app.spelling import counted

__all__ = ["DEFAULT_REPORT_NAME", "FolderRun", "LocalRunner", "PlanRefused", "Progress", "RunPlan", "Runner",
           "option_problem", "plan_run", "run_folder"]

if TYPE_CHECKING:  # and imported where used: a plan and a run need no model loaded
    from app.inference.model.session import ModelSession, SessionInfo
    from app.inference.model.spec import ModelSpec
    from app.io.discover import InputFile
    from app.runs.folder.metrics import Scorer, ScoreSummary
    from app.runs.folder.volumes import VolumeOptions
    from app.runs.folder.writer import RunSummary
    from app.runs.outputs.provenance import RunIdentity
    from app.runs.outputs.report import ReportWriter
    from app.runs.privacy.names import LineRedactor


def plan_run(spec: ModelSpec, paths: Sequence[Path], *, out: Path, report: Path | None = None,
             save: Sequence[str] = ("mask",), threshold: float | None = None, min_confidence: float | None = None,
             reference: Path | None = None, resume: bool = False, exports: tuple[str, ...] | None = None,
             per_slice: bool = False, opacity: float = 0.5, anonymize: bool = False, ray: bool = False,
             batch: int = 1, started: float | None = None, say: Callable[[str], None] = lambda _: None,
             redact: Callable[[LineRedactor], None] | None = None) -> RunPlan:
    """seglens-cli run's plan from its options: the inputs found under `paths`, every check made once, in the
    order the CLI has always made them (PlanRefused with the line it prints). `say` is told each note and warning
    about the inputs (a volume's gap, an option no input uses), after `redact` was given the run's LineRedactor
    under --anonymize (the terminal names each input by its pseudonym from then on)."""
    from app.io.discover import refuse_clashes

    refused = honoured_problem(spec, threshold=threshold if threshold is not None else min_confidence) or \
        labels_problem(spec, save, resume=resume, ray=ray)
    if refused:
        raise PlanRefused(refused)
    inputs = _inputs(spec, paths, out=out, reference=reference, resume=resume)
    refused = _volume_problem(spec, inputs)
    if refused:
        raise PlanRefused(refused)  # escaped where printed
    refused = option_problem(resume=resume, per_slice=per_slice, exports=None, anonymize=anonymize)
    if refused:
        raise PlanRefused(refused)
    key = _key() if anonymize else b""
    if anonymize and redact is not None:
        from app.runs.privacy.names import line_redactor

        redact(line_redactor(inputs, key))
    volumes = _volume_options(inputs, exports=exports, per_slice=per_slice, opacity=opacity, key=key, say=say,
                              anonymize=anonymize)
    refused = option_problem(resume=False, per_slice=False, exports=exports, anonymize=anonymize)
    if ray and not refused:
        refused = _ray_problem(spec, anonymize=anonymize, reference=reference)
    if refused:
        raise PlanRefused(refused)
    if not anonymize:  # pseudonymous names are distinct by themselves
        inputs = refuse_clashes(inputs)
    return RunPlan(spec=spec, inputs=tuple(inputs), out=out, report_path=report, save=_saved_kinds(spec, save, say),
                   threshold=threshold, min_confidence=min_confidence, volumes=volumes, reference=reference,
                   resume=resume, batch=batch, started=started)


def honoured_problem(spec: ModelSpec, *, threshold: float | None) -> str | None:
    """--threshold on a model that keeps no per-pixel scores (a label map, 2D or 3D, or a classifier), in one
    line: refused, not silently dropped (it once ran ignored while the provenance recorded it)."""
    what = _without_scores(spec)
    if threshold is None or what is None:
        return None
    if spec.task != "segmentation":
        return f"--threshold: {what}; --threshold is a segmentation model's pixel threshold; run it without --threshold"
    return f"--threshold: {what}, so no scores are kept to threshold; run it without --threshold"


def labels_problem(spec: ModelSpec, save: Sequence[str], *, resume: bool, ray: bool) -> str | None:
    """--save coco / yolo where no labels can come of it, in one line: a model that finds no instances, a run
    that carries earlier rows (--resume: their instances are not kept) or runs on Ray's actors."""
    from app.runs.folder.label_exports import label_kinds

    kinds = label_kinds(save)
    flag = f"--save {','.join(kinds)}"
    if not kinds:
        return None
    if spec.task != "instances":
        return (f"{flag} writes an instance model's objects as training labels; {spec.path.name} is a "
                f"{spec.task} model (no instances)")
    if resume:
        return (f"{flag} with --resume is not supported: the inputs done by the earlier run would have no labels; "
                "run again without --resume")
    if ray:
        return f"{flag} with --ray is not supported yet (the cluster's instances stay on its nodes); run without --ray"
    return None


def _volume_problem(spec: ModelSpec, inputs: Sequence[InputFile]) -> str | None:
    """Volumes run with an instance model (whose objects are found image by image), in one line."""
    volume = next((item for item in inputs if item.volume is not None), None)
    if spec.task != "instances" or volume is None:
        return None
    return (f"{spec.path.name} finds instances in 2D images; {volume.path} is a volume (a DICOM series, "
            "multi-frame DICOM or NIfTI), which an instance model does not run on: pass its slices as images")


def _saved_kinds(spec: ModelSpec, save: Sequence[str], say: Callable[[str], None]) -> tuple[str, ...]:
    """`save` without the score pictures a model without scores cannot give, said once (a script's
    `--save mask,heatmap` over several models keeps working, and nobody waits for heatmaps that never come)."""
    what = _without_scores(spec)
    dropped = [kind for kind in save if kind in ("scores", "heatmap")] if what is not None else []
    if dropped:
        say(f"note: --save {','.join(dropped)}: {what}, with no per-pixel scores: "
            f"{' and '.join(dropped)} {'is' if len(dropped) == 1 else 'are'} not written")
    return tuple(kind for kind in save if kind not in dropped)


def _without_scores(spec: ModelSpec) -> str | None:
    from app.inference.decide.tuning import tunable

    if spec.task == "instances":
        return f"{spec.path.name} is an instance model (its score limit is the sidecar's detect.conf)"
    if spec.task != "segmentation":
        return f"{spec.path.name} is a classification model"
    return f"{spec.path.name} outputs a label map" if tunable(spec) is None else None


def _inputs(spec: ModelSpec, paths: Sequence[Path], *, out: Path, reference: Path | None,
            resume: bool) -> list[InputFile]:
    """The inputs under `paths` (not `out`'s or the reference's files), refused in one line when there are none,
    when `out` would take an input's place, or when the reference folder cannot be used."""
    from app.io.discover import discover
    from app.runs.folder.metrics import reference_problem
    from app.runs.outputs.safety import output_folder_problem

    refused = reference_problem(reference, spec, resume=resume)
    if not refused and reference is not None and spec.task == "instances":
        from app.runs.folder.instance_reference import instance_reference_problem

        refused = instance_reference_problem(reference)
    if refused:
        raise PlanRefused(f"--reference {refused}")
    # a mask folder's files are no inputs; an instance model's COCO file or YOLO dataset may hold the images
    masks = reference is not None and spec.task != "instances"
    inputs = discover(list(paths), exclude=[out, *([reference] if masks and reference else [])])
    if not inputs:
        raise PlanRefused("no images found in: " + ", ".join(str(p) for p in paths))  # escaped where printed
    refused = output_folder_problem(out, inputs, inside_ok=True)
    if refused:
        raise PlanRefused(f"--out {refused}")
    if not spec.is_3d:
        return inputs
    from app.runs.folder.volume3d import case_inputs

    return case_inputs(spec, inputs)  # a model of several channels runs on cases (nnU-Net's CASE_0000 …)


def _key() -> bytes:
    from app.runs.folder.volumes import pseudonym_key

    return pseudonym_key()


def _ray_problem(spec: ModelSpec, *, anonymize: bool, reference: Path | None) -> str | None:
    """What --ray cannot do yet, in one line."""
    if spec.is_3d:  # Ray's actors are fed slices and images in chunks; a 3D model's unit is a whole volume
        return ("--ray with a 3D model is not supported yet (its unit is a whole volume, the cluster runs slices "
                "and images); run it without --ray")
    if anonymize:
        return ("--anonymize with --ray is not supported yet (the cluster's names and report rows are not "
                "pseudonymised); run it without --ray")
    if reference:
        return ("--reference with --ray is not supported: score the cluster's masks afterwards with "
                "`seglens-cli compare` or a local run")
    return None


def _volume_options(inputs: Sequence[InputFile], *, exports: tuple[str, ...] | None, per_slice: bool, opacity: float,
                    key: bytes, anonymize: bool, say: Callable[[str], None]) -> VolumeOptions | None:
    """The run's VolumeOptions when it has volumes or --anonymize (None otherwise: an image-only run under
    --anonymize still names its images by their pseudonyms); each volume's warnings (a gap, a split series, an
    order by InstanceNumber) said once, before the run; an option for volumes without one said, not ignored."""
    from app.runs.folder.volumes import VolumeOptions

    volumes = [item for item in inputs if item.volume is not None]
    if not volumes:
        unused = [flag for flag, on in (("--export", exports is not None), ("--per-slice", per_slice)) if on]
        if unused:  # the reader expected a series or a NIfTI file among the inputs
            verb = "applies" if len(unused) == 1 else "apply"
            say(f"note: {', '.join(unused)} {verb} to volumes (DICOM series, multi-frame DICOM, NIfTI); there is "
                "none among the inputs")
        return VolumeOptions(anonymize=True, pseudonym_key=key) if anonymize else None
    for item in volumes:
        for warning in item.volume.warnings if item.volume is not None else ():
            say(f"warning: {shown(item.path)}: {shown(warning)}")
    return VolumeOptions(exports=exports, per_slice=per_slice, opacity=opacity, anonymize=anonymize,
                         pseudonym_key=key)


# --- the run --------------------------------------------------------------------------------------------------


class Runner(Protocol):
    """Where a plan's inputs run. `spec`: the session's spec, which the report's columns follow (a device-side
    argmax changes it); `columns`: the runner's own report columns after the run's (Ray's `node`)."""

    spec: ModelSpec
    columns: tuple[str, ...]

    def session(self, plan: RunPlan, extra_columns: Sequence[str]) -> contextlib.AbstractContextManager[SessionInfo]:
        """Ready to run (inside the output lock): where the model really runs, for the run record."""

    def run(self, plan: RunPlan, *, report: ReportWriter | None, done: Mapping[str, list[str]],
            reference: Scorer | None, png_texts: Mapping[str, Mapping[str, str]] | None,
            progress: Progress, should_stop: Callable[[], bool]) -> RunSummary:
        """Every input of the plan through the model, rows into `report` in input order."""

    @property
    def provider_label(self) -> str:
        """What the summary says the run ran on."""


class LocalRunner:
    """The inputs through `model` on the calling thread (the session's own): app.runs.folder.batch."""

    columns: tuple[str, ...] = ()

    def __init__(self, model: ModelSession) -> None:
        self.model, self.spec = model, model.spec

    @contextlib.contextmanager
    def session(self, plan: RunPlan, extra_columns: Sequence[str]) -> Iterator[SessionInfo]:
        """The open session's facts."""
        yield self.model.info

    def run(self, plan: RunPlan, *, report: ReportWriter | None, done: Mapping[str, list[str]],
            reference: Scorer | None, png_texts: Mapping[str, Mapping[str, str]] | None,
            progress: Progress, should_stop: Callable[[], bool]) -> RunSummary:
        """app.runs.folder.batch.run_inputs with the plan's options."""
        from app.runs.folder import batch  # looked up when run: a test puts a failing run_inputs in its place

        return batch.run_inputs(self.model, plan, report=report, progress=progress, should_stop=should_stop,
                                done=done, png_texts=png_texts, reference=reference)

    @property
    def provider_label(self) -> str:
        """The session's provider ('CUDA (GPU 0)', 'CPU')."""
        return self.model.info.provider_label


@dataclass(frozen=True)
class FolderRun:
    """What a run did: its summary (notices included), the run record, where the report went, the reference's
    metrics and the files they were written to."""

    summary: RunSummary
    identity: RunIdentity | None = None  # None: nothing written
    report: Path | None = None
    metrics: ScoreSummary | None = None
    written: tuple[Path, ...] = ()


def run_folder(plan: RunPlan, runner: Runner, *, progress: Progress | None = None,
               should_stop: Callable[[], bool] = lambda: False) -> FolderRun:
    """Run `plan` on `runner`: under the output folder's lock (a second run into it is refused while this one
    writes), a killed run's temporaries removed, --resume's finished rows carried (and the rows of inputs not in
    this run kept), the report and the run record written, the reference's metrics written last. PlanRefused when
    --resume finds a report made otherwise. `should_stop` is asked between inputs (the viewer's Cancel)."""
    from app.runs.outputs.lock import OutputLock

    progress = progress or Progress()
    scorer = _scorer(plan)
    if plan.out is None:  # scores only: no lock, report or record
        summary = runner.run(plan, report=None, done={}, reference=scorer, png_texts=None, progress=progress,
                             should_stop=should_stop)
        return FolderRun(summary)
    with OutputLock(plan.out):
        if plan.started is not None:
            remove_stale_temporaries(plan.out, plan.started, note=progress.note)
        run = _locked(plan, runner, scorer, progress, should_stop)
        written = scorer.summary.write(plan.out) if scorer else []  # under the lock, as every other output
        _record_metrics(run, scorer)
    return replace(run, written=tuple(written))


def _record_metrics(run: FolderRun, scorer: Scorer | None) -> None:
    """The folder's metrics against the reference added to the run record, once every input is scored (an
    instance model's mAP; a mask reference's stay in the metrics files)."""
    from app.runs.outputs.provenance import record_run

    metrics = scorer.summary.record() if scorer is not None else None
    if metrics is not None and run.identity is not None and run.report is not None:
        record_run(run.report, replace(run.identity, reference_metrics=metrics))


def _scorer(plan: RunPlan) -> Scorer | None:
    """The scorer of `--reference` for the plan's model: masks, or instances (PlanRefused when their reference
    file cannot be read)."""
    if plan.reference is None:
        return None
    if plan.spec.task == "instances":
        from app.runs.folder.instance_reference import InstanceScorer

        return InstanceScorer(plan.reference, plan.spec, plan.inputs, key=plan.key)
    from app.runs.folder.metrics import ReferenceScorer

    return ReferenceScorer(plan.reference, plan.spec, plan.inputs, key=plan.key)


def _locked(plan: RunPlan, runner: Runner, scorer: Scorer | None, progress: Progress,
            should_stop: Callable[[], bool]) -> FolderRun:
    """The run inside the lock: the runner's session, the --resume check, the report and the rows."""
    from app.runs.outputs.provenance import RunIdentity, record_run, resume_problem
    from app.runs.outputs.report import ReportWriter

    report_path = plan.report
    assert report_path is not None and plan.out is not None  # a run that writes
    extra = _extra_columns(plan, runner.spec, report_path, scorer)
    with runner.session(plan, extra) as info:
        # the spec as loaded (a device-side argmax changes the session's), --threshold and where it runs
        identity = RunIdentity.of(plan.spec, threshold=plan.threshold, min_confidence=plan.min_confidence,
                                  session=info)
        identity = replace(identity, reference=scorer.recorded) if scorer else identity
        stale = resume_problem(report_path, identity) if plan.resume else None
        if stale:
            raise PlanRefused(f"--resume into {plan.out}: {stale}; run without --resume to redo every input, or "
                              "choose a new --out")  # escaped where printed (app.errors.shown)
        columns = [*extra, *runner.columns]
        done, others = _carried(plan, runner.spec, report_path, columns)
        with ReportWriter(report_path, runner.spec, extra_columns=columns) as report:
            record_run(report_path, identity)
            summary = runner.run(plan, report=report, done=done, reference=scorer,
                                 png_texts=identity.png_texts(runner.spec), progress=progress, should_stop=should_stop)
            for row in others:  # finished rows are never lost to a run of part of the inputs
                report.add_row(row)
    if others:
        summary.notices.append(f"{counted(len(others), 'row')} of inputs not in this run kept from the earlier report")
    return FolderRun(summary, identity, report_path, scorer.summary if scorer else None)


def _extra_columns(plan: RunPlan, spec: ModelSpec, report: Path, scorer: Scorer | None) -> list[str]:
    """The report's columns after the model's: the volume columns when the run has volumes (or --anonymize, or
    --resume of a report that had them: the earlier run's volumes stay), then the reference's metrics."""
    from app.runs.folder.resume import has_columns
    from app.runs.folder.volumes import volume_columns

    has_volumes = any(item.volume is not None for item in plan.inputs) or (
        plan.resume and has_columns(report, volume_columns(spec)))
    return [*(volume_columns(spec) if has_volumes else ()), *(scorer.columns if scorer else ())]


def _carried(plan: RunPlan, spec: ModelSpec, report: Path,
             columns: Sequence[str]) -> tuple[dict[str, list[str]], list[list[str]]]:
    """--resume: (the finished rows of this run's inputs, the earlier report's rows of inputs not in it)."""
    from app.runs.folder.resume import finished_earlier, rows_of_others

    if not plan.resume or plan.out is None:
        return {}, []
    names = _anonymized_names(plan)
    done = finished_earlier(report, spec, plan.inputs, out_dir=plan.out, save=plan.save,
                            exports=plan.volumes.exports if plan.volumes else None, extra_columns=columns,
                            names=names)
    others = rows_of_others(report, spec, plan.inputs, extra_columns=columns, names=names and names[1])
    return done, others


def _anonymized_names(plan: RunPlan) -> tuple[list[Path], list[str]] | None:
    """(output stems, report paths) of the inputs under --anonymize (app.runs.privacy.names), else None."""
    if not plan.anonymize:
        return None
    from app.runs.privacy.names import anonymized_stems

    stems = anonymized_stems(plan.inputs, plan.key)
    return stems, [stem.as_posix() for stem in stems]


def remove_stale_temporaries(out: Path, started: float, *, note: Callable[[str], None]) -> None:
    """The temporaries a killed run left in `out` (older than this run's start) removed, and said."""
    from app.io.files import remove_stale_temporaries as remove

    removed = remove(out, older_than=started)
    if removed:
        note(f"note: removed {counted(removed, 'unfinished temporary file')} left in {shown(out)} by an interrupted "
             "run")
