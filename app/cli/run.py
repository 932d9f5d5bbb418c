"""seglens-cli run and compare: folder runs (images and volumes) with their progress line and summary."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from app.cli import DEFAULT_REPORT_NAME, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, _runtime, _shown, _tiled, resolved_model

# --- run ---------------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from app.inference.session import SessionInfo
    from app.inference.spec import ModelSpec
    from app.io.discover import InputFile
    from app.runs.compare import Compared
    from app.runs.metrics_report import MetricsSummary
    from app.runs.ray_driver import RayProgress
    from app.runs.volume_run import VolumeOptions
    from app.runs.writer import Outcome, RunSummary


def cmd_run(args: argparse.Namespace) -> int:
    started = time.time()  # temporaries older than this run are a killed run's; newer ones are nobody's to take
    from app.inference.session import open_session
    from app.inference.spec import load_spec
    from app.inference.tuning import with_threshold
    from app.io.discover import discover, refuse_clashes
    from app.runs.batch import run_inputs
    from app.runs.lock import OutputLock
    from app.runs.metrics_report import ReferenceScorer, reference_problem
    from app.runs.outputs import ReportWriter, finished_earlier, has_columns, rows_of_others
    from app.runs.provenance import RunIdentity, record_run, resume_problem
    from app.runs.safety import output_folder_problem
    from app.runs.volume_run import volume_columns

    if args.max_megapixels:
        os.environ["SEGLENS_MAX_MEGAPIXELS"] = str(args.max_megapixels)  # read by the decoding threads
    args.model = resolved_model(args.model)  # a bundled name becomes its file (the Ray job is given the file too)
    spec, min_confidence = with_threshold(_tiled(load_spec(args.model, args.config), args.tile), args.threshold)
    refused = reference_problem(args.reference, spec, resume=args.resume)
    if refused:
        print(f"error: --reference {_shown(refused)}", file=sys.stderr)
        return EXIT_USAGE
    inputs = discover(args.paths, exclude=[args.out, *([args.reference] if args.reference else [])])
    if not inputs:
        print("error: no images found in: " + ", ".join(_shown(p) for p in args.paths), file=sys.stderr)
        return EXIT_USAGE
    refused = output_folder_problem(args.out, inputs, inside_ok=True)
    if refused:
        print(f"error: --out {_shown(refused)}", file=sys.stderr)
        return EXIT_USAGE
    if args.per_slice and args.resume:
        print("error: --per-slice with --resume is not supported: a carried volume would lose its slice rows; "
              "run again without --resume", file=sys.stderr)
        return EXIT_USAGE
    _anonymize_terminal(args, inputs)
    volume_options = _announce_volumes(inputs, args)
    refused = _anonymize_problem(args, volume_options)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return EXIT_USAGE
    if volume_options is None or not volume_options.anonymize:  # pseudonymous names are distinct by themselves
        inputs = refuse_clashes(inputs)
    if args.ray:
        from app.cli.cluster import run_on_cluster

        return run_on_cluster(args, spec, min_confidence, inputs, volume_options, started=started)
    private = volume_options.pseudonym_key if volume_options is not None and volume_options.anonymize else b""
    scorer = ReferenceScorer(args.reference, spec, inputs, key=private) if args.reference else None
    model = open_session(spec, args.device, runtime=_runtime(args))
    _announce_session(model.info, spec)
    report_path = args.report or args.out / DEFAULT_REPORT_NAME
    with OutputLock(args.out):  # a second run into the same folder is refused while this one writes
        _remove_stale_temporaries(args.out, started)
        # the spec as loaded (a device-side argmax changes the session's), --threshold and where it runs
        identity = RunIdentity.of(spec, threshold=args.threshold, min_confidence=min_confidence, session=model.info)
        identity = replace(identity, reference=scorer.recorded) if scorer else identity
        stale = resume_problem(report_path, identity) if args.resume else None
        if stale:
            print(f"error: --resume into {_shown(args.out)}: {_shown(stale)}; run without --resume to redo every "
                  "input, or choose a new --out", file=sys.stderr)
            return EXIT_USAGE
        names = _anonymized_names(inputs, volume_options)
        has_volumes = any(item.volume is not None for item in inputs) or (  # options alone: image-only --anonymize
            args.resume and has_columns(report_path, volume_columns(model.spec)))  # the earlier run's volumes stay
        extra = [*(volume_columns(model.spec) if has_volumes else ()), *(scorer.columns if scorer else ())]
        done = finished_earlier(report_path, model.spec, inputs, out_dir=args.out, save=args.save,
                                exports=volume_options.exports if volume_options else None, extra_columns=extra,
                                names=names) if args.resume else {}
        progress = _Progress(len(inputs), enabled=sys.stderr.isatty() and not args.no_progress)
        others = rows_of_others(report_path, model.spec, inputs, extra_columns=extra,
                                names=names and names[1]) if args.resume else []
        with ReportWriter(report_path, model.spec, extra_columns=extra) as report:
            record_run(report_path, identity)
            summary = run_inputs(model, inputs, out_dir=args.out, save=args.save, report=report,
                                 progress=progress.update, batch_size=args.batch, done=done,
                                 min_confidence=min_confidence, png_texts=identity.png_texts(model.spec),
                                 reference=scorer, tile_progress=progress.tiles, volumes=volume_options,
                                 slice_progress=progress.slices)
            for row in others:  # finished rows are never lost to a run of part of the inputs
                report.add_row(row)
        if others:
            summary.notices.append(f"{len(others)} row(s) of inputs not in this run kept from the earlier report")
        written = scorer.summary.write(args.out) if scorer else []  # under the lock, as every other output
        progress.close()
    for notice in dict.fromkeys(summary.notices):
        print(f"note: {_shown(notice)}", file=sys.stderr)
    progress.print_misfits()
    _print_summary(summary, model.info, args.out, report_path)
    if scorer:
        _print_metrics(scorer.summary, written)
    print(_shown(identity.summary_line(report_path)))
    return EXIT_OK if summary.failed == 0 else EXIT_SOME_FAILED


# --- compare -----------------------------------------------------------------------------------------

def cmd_compare(args: argparse.Namespace) -> int:
    started = time.time()
    from app.inference.session import open_session
    from app.inference.spec import load_spec
    from app.io.discover import discover, refuse_clashes
    from app.runs.compare import REPORT_NAME, compare_inputs, compare_problem
    from app.runs.lock import OutputLock
    from app.runs.provenance import RunIdentity, compare_summary_line, record_compare
    from app.runs.safety import output_folder_problem

    spec_a, spec_b = load_spec(resolved_model(args.model_a)), load_spec(resolved_model(args.model_b))
    refused = compare_problem(spec_a, spec_b)
    inputs = discover(args.paths, exclude=[args.out]) if not refused else []
    inputs = inputs if args.anonymize else refuse_clashes(inputs)  # pseudonymous names are distinct by themselves
    if not refused and not inputs:
        refused = "no images found in: " + ", ".join(_shown(p) for p in args.paths)
    refused = refused or output_folder_problem(args.out, inputs, inside_ok=True)
    if refused:
        print(f"error: {_shown(refused)}", file=sys.stderr)
        return EXIT_USAGE
    key = _compare_key(args)  # an unusable key is one error before anything runs
    _anonymize_terminal(args, inputs)
    models = [open_session(spec, args.device) for spec in (spec_a, spec_b)]
    for model, spec in zip(models, (spec_a, spec_b), strict=True):
        _announce_session(model.info, spec)
    progress = _Progress(len(inputs), enabled=sys.stderr.isatty() and not args.no_progress)
    identities = [RunIdentity.of(model.spec, session=model.info) for model in models]
    with OutputLock(args.out):  # everything compare writes, its metrics and record included, under the lock
        _remove_stale_temporaries(args.out, started)
        record_compare(args.out / REPORT_NAME, *identities)
        summary, metrics, report = compare_inputs(models[0], models[1], inputs, out_dir=args.out,
                                                  progress=progress.update, key=key)
        written = metrics.write(args.out)
    progress.close()
    progress.print_misfits()
    print(f"{_counted(summary.total, 'input')}: {summary.ok} ok, {summary.failed} failed; "
          f"B = {_shown(spec_b.path.name)} measured against A = {_shown(spec_a.path.name)}; pictures in "
          f"{_shown(args.out)}, report {_shown(report)}")
    _print_metrics(metrics, written)
    print(_shown(compare_summary_line(report, *identities)))
    return EXIT_OK if summary.failed == 0 else EXIT_SOME_FAILED


def _anonymize_terminal(args: argparse.Namespace, inputs: Sequence[InputFile]) -> None:
    """--anonymize: from here on every line printed names each input by its pseudonymous name, whoever built it
    (app.cli.console.Terminal, app.runs.private_names.LineRedactor)."""
    terminal = getattr(args, "terminal", None)
    if not args.anonymize or terminal is None:
        return
    from app.runs.private_names import line_redactor
    from app.runs.volume_run import pseudonym_key

    terminal.anonymize(line_redactor(inputs, pseudonym_key()))


def _compare_key(args: argparse.Namespace) -> bytes:
    """compare --anonymize: the pseudonym key its names are made with (app.runs.private_names), else none."""
    if not args.anonymize:
        return b""
    from app.runs.volume_run import pseudonym_key

    return pseudonym_key()


def _announce_volumes(inputs: Sequence[InputFile], args: argparse.Namespace) -> VolumeOptions | None:
    """The run's VolumeOptions when it has volumes or --anonymize (None otherwise: an image-only run under
    --anonymize still names its images by their pseudonyms); each volume's warnings (a gap, a split series, an
    order by InstanceNumber) printed once, before the run."""
    from app.runs.volume_run import VolumeOptions, pseudonym_key

    volumes = [item for item in inputs if item.volume is not None]
    if not volumes:
        unused = [flag for flag, on in (("--export", args.export is not None), ("--per-slice", args.per_slice))
                  if on]
        if unused:  # said, not silently ignored: the reader expected a series or a NIfTI file among the inputs
            verb = "applies" if len(unused) == 1 else "apply"
            print(f"note: {', '.join(unused)} {verb} to volumes (DICOM series, multi-frame DICOM, NIfTI); there is "
                  "none among the inputs", file=sys.stderr)
        return VolumeOptions(anonymize=True, pseudonym_key=pseudonym_key()) if args.anonymize else None

    for item in volumes:
        for warning in item.volume.warnings if item.volume is not None else ():  # every one is a volume
            print(f"warning: {_shown(item.path)}: {_shown(warning)}", file=sys.stderr)
    return VolumeOptions(exports=args.export, per_slice=args.per_slice, opacity=args.opacity,
                         anonymize=args.anonymize, pseudonym_key=pseudonym_key() if args.anonymize else b"")


def _print_metrics(metrics: MetricsSummary, written: list[Path]) -> None:
    """The metrics summary and the files `metrics.write` wrote (inside the run's lock, before this)."""
    for line in metrics.lines():
        print(_shown(line))
    print("metrics: " + ", ".join(_shown(p) for p in written))


def _print_summary(summary: RunSummary, info: SessionInfo, out: Path, report_path: Path) -> None:
    resumed = f" ({summary.resumed} done by an earlier run)" if summary.resumed else ""
    print(f"{_counted(summary.total, 'input')}: {summary.ok} ok{resumed}, {summary.failed} failed; provider "
          f"{info.provider_label}; outputs in {_shown(out)}, report {_shown(report_path)}")
    if summary.verdict_line():
        print(summary.verdict_line())


def _counted(count: int, noun: str) -> str:
    """`1 input`, `2 inputs`: the summary lines read as sentences."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _anonymized_names(inputs: Sequence[InputFile],
                      options: VolumeOptions | None) -> tuple[list[Path], list[str]] | None:
    """(output stems, report paths) of the inputs under --anonymize (app.runs.private_names), else None."""
    if options is None or not options.anonymize:
        return None
    from app.runs.private_names import anonymized_stems

    stems = anonymized_stems(inputs, options.pseudonym_key)
    return stems, [stem.as_posix() for stem in stems]


def _anonymize_problem(args: argparse.Namespace, options: VolumeOptions | None) -> str | None:
    """Why the --anonymize / --export source combination cannot run (one line), None when it can."""
    if args.export and "source" in args.export and not args.anonymize:
        return "--export source writes the source series de-identified: it needs --anonymize"
    if options is not None and options.anonymize and args.ray:
        return ("--anonymize with --ray is not supported yet (the cluster's names and report rows are not "
                "pseudonymised); run it without --ray")
    return None


def _remove_stale_temporaries(out: Path, started: float) -> None:
    from app.io.files import remove_stale_temporaries

    removed = remove_stale_temporaries(out, older_than=started)
    if removed:
        print(f"note: removed {removed} unfinished temporary file(s) left in {_shown(out)} by an interrupted run",
              file=sys.stderr)


def _announce_session(info: SessionInfo, spec: ModelSpec) -> None:
    if info.fallback_reason and info.requested.startswith("cuda"):
        print(f"warning: CUDA was requested but {_shown(spec.path.name)} runs on the CPU: {info.fallback_reason}",
              file=sys.stderr)
    elif info.fallback_warns:  # a GPU is there but unusable; without one the CPU is no news (provider says so)
        print(f"note: running on the CPU ({info.fallback_reason})", file=sys.stderr)


class _Progress:
    """A one-line progress bar on stderr (terminals only); error lines are printed above it."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.started = time.perf_counter()
        self.misfits: dict[str, list[Any]] = {}  # why an image does not fit the model → [inputs, the first one's name]

    def update(self, outcome: Outcome | Compared | RayProgress, summary: RunSummary) -> None:
        if outcome.error:
            self._clear()
            print(f"error: {_shown(outcome.error)}", file=sys.stderr)
        elif (scored := getattr(outcome, "scored", None)) is not None and scored.notice:
            self._clear()
            print(f"note: {_shown(scored.notice)}", file=sys.stderr)
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

    def _keep_misfits(self, outcome: Outcome | Compared | RayProgress) -> None:
        """An image that does not fit the model (app.inference.fit): counted here, said once per reason at the
        end (a folder of photos into a CT model would otherwise print a line per photo)."""
        kept = getattr(outcome, "result", None) or getattr(outcome, "volume", None) or outcome  # compare: itself
        for reason in getattr(kept, "warnings", ()):
            # a pseudonym under --anonymize; a RayProgress has no warnings, so never comes here
            first = getattr(outcome, "name", None) or cast("Outcome | Compared", outcome).input.path.name
            self.misfits.setdefault(reason, [0, first])[0] += 1

    def print_misfits(self) -> None:
        for reason, (count, first) in self.misfits.items():
            fit = "does not fit" if count == 1 else "do not fit"
            print(f"note: {_counted(count, 'input')} {fit} the model (e.g. {_shown(first)}; the report's warning "
                  f"column): {_shown(reason)}", file=sys.stderr)

    def _clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
