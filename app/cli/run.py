"""seglens-cli run and compare: parse, plan, run (app.runs.folder.run, app.runs.compare.agreement), print the summary
(app.cli.console)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.cli.options import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, resolved_model, runtime_options, tiled
from app.cli.options import shown as _shown
from app.cli.remote_options import open_remote, remote_requested, timing_line
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.model.session import ModelSession
    from app.inference.model.spec import ModelSpec
    from app.io.discover import InputFile
    from app.runs.folder.run import Runner, RunPlan
    from app.runs.pacs.run import PacsPlan

# --- run ---------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    """seglens-cli run: the plan from the options, run_folder on this machine or on Ray, the summary."""
    started = time.time()  # temporaries older than this run are a killed run's; newer ones are nobody's to take
    from app.cli.pacs import run_pacs_plan

    pacs = run_pacs_plan(args)  # --from / --send refused here, before anything connects or runs
    tty = sys.stderr.isatty() and not args.no_progress
    remote = open_remote(args, args.model, sidecar=args.config) if remote_requested(args) else None
    try:
        return _run(args, started=started, pacs=pacs, tty=tty, remote=remote)
    finally:
        if remote is not None:  # the server's connections let go now, not at some garbage collection
            remote.close()


def _run(args: argparse.Namespace, *, started: float, pacs: PacsPlan, tty: bool, remote: ModelSession | None) -> int:
    import app.cli.console as console
    from app.cli.pacs import retrieved_paths, send_written
    from app.runs.folder.run import run_folder

    if pacs.source is not None:
        from app.inference.model.builder import load_spec

        if remote is None:  # a model error before the retrieve, not after it (a remote one: said by now)
            load_spec(resolved_model(args.model), args.config)
        args.paths = retrieved_paths(pacs, progress=tty, anonymize=args.anonymize)
    plan = _plan(args, started=started, remote=remote)
    runner = _runner(args, plan, remote)
    progress = console.Progress(len(plan.inputs), enabled=tty)
    try:
        run = run_folder(plan, runner, progress=progress)
    finally:
        progress.close()
    assert plan.out is not None  # a CLI run always writes
    console.print_run(run, progress, provider_label=runner.provider_label, out=plan.out)
    if remote is not None and (line := timing_line(remote)):
        print(_shown(line))  # the latency split: network+queue and the server's compute
    sent = send_written(pacs, plan, progress=tty) if pacs.send is not None else True
    complete = run.summary.failed == 0 and run.summary.label_error is None  # --save coco / yolo: written too
    return EXIT_OK if complete and sent else EXIT_SOME_FAILED


def _plan(args: argparse.Namespace, *, started: float, remote: ModelSession | None = None) -> RunPlan:
    """The RunPlan of `seglens-cli run`'s options (app.runs.folder.run.plan_run makes every check)."""
    from app.cli.console import say
    from app.inference.decide.tuning import with_threshold
    from app.inference.model.builder import load_spec
    from app.runs.folder.run import plan_run

    if args.max_megapixels:
        os.environ["SEGLENS_MAX_MEGAPIXELS"] = str(args.max_megapixels)  # read by the decoding threads
    if remote is None:
        args.model = resolved_model(args.model)  # a bundled name becomes its file (the Ray job is given it too)
    loaded = remote.spec if remote is not None else load_spec(args.model, args.config)
    spec = tiled(loaded, args.tile, tta=args.tta, batch=args.batch)
    spec, min_confidence = with_threshold(spec, args.threshold)
    terminal = getattr(args, "terminal", None)
    return plan_run(spec, args.paths, out=args.out, report=args.report, save=args.save, threshold=args.threshold,
                    min_confidence=min_confidence, reference=args.reference, resume=args.resume,
                    exports=args.export, per_slice=args.per_slice, opacity=args.opacity, anonymize=args.anonymize,
                    ray=bool(args.ray), batch=args.batch, started=started, say=say,
                    redact=terminal.anonymize if terminal is not None else None)


def _runner(args: argparse.Namespace, plan: RunPlan, remote: ModelSession | None = None) -> Runner:
    """Where the plan runs: Ray's actors (--ray), a remote server's session (--device remote), else a session
    opened here (said when not where asked)."""
    if remote is not None:
        from app.runs.folder.run import LocalRunner

        remote.spec = plan.spec  # as the options adjusted it (--tile, --threshold): the same tensors go over
        return LocalRunner(remote)
    if args.ray:
        from app.cli.cluster import ray_runner

        return ray_runner(args, plan)
    from app.cli.console import announce_session
    from app.inference.runtime.session import open_session
    from app.runs.folder.run import LocalRunner

    # a 3D model's warm-up is a whole patch through its network (seconds to a minute on a CPU) before a run whose
    # first window warms it as well: not spent
    model = open_session(plan.spec, args.device, runtime=runtime_options(args), warm_up=not plan.spec.is_3d)
    announce_session(model.info, plan.spec)
    return LocalRunner(model)


# --- compare -----------------------------------------------------------------------------------------

def cmd_compare(args: argparse.Namespace) -> int:
    started = time.time()
    import app.cli.console as console
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.io.discover import discover, refuse_clashes
    from app.runs.compare.agreement import REPORT_NAME, compare_inputs, compare_problem
    from app.runs.folder.run import remove_stale_temporaries
    from app.runs.outputs.lock import OutputLock
    from app.runs.outputs.provenance import RunIdentity, compare_summary_line, record_compare
    from app.runs.outputs.safety import output_folder_problem

    remote = [open_remote(args, m) for m in (args.model_a, args.model_b)] if remote_requested(args) else None
    spec_a, spec_b = (m.spec for m in remote) if remote else (load_spec(resolved_model(m))
                                                              for m in (args.model_a, args.model_b))
    refused = compare_problem(spec_a, spec_b) or _compare_3d_problem(spec_a, spec_b)
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
    models: list[ModelSession] = list(remote or []) or [open_session(spec, args.device) for spec in (spec_a, spec_b)]
    for model, spec in zip(models, (spec_a, spec_b), strict=True):
        console.announce_session(model.info, spec)
    progress = console.Progress(len(inputs), enabled=sys.stderr.isatty() and not args.no_progress)
    identities = [RunIdentity.of(model.spec, session=model.info) for model in models]
    with OutputLock(args.out):  # everything compare writes, its metrics and record included, under the lock
        remove_stale_temporaries(args.out, started, note=console.say)
        record_compare(args.out / REPORT_NAME, *identities)
        summary, metrics, report = compare_inputs(models[0], models[1], inputs, out_dir=args.out,
                                                  progress=progress.outcome, key=key)
        written = metrics.write(args.out)
    progress.close()
    progress.print_misfits()
    print(f"{counted(summary.total, 'input')}: {summary.ok} ok, {summary.failed} failed; "
          f"B = {_shown(spec_b.path.name)} measured against A = {_shown(spec_a.path.name)}; pictures in "
          f"{_shown(args.out)}, report {_shown(report)}")
    console.print_metrics(metrics, written)
    print(_shown(compare_summary_line(report, *identities)))
    return EXIT_OK if summary.failed == 0 else EXIT_SOME_FAILED


def _compare_3d_problem(*specs: ModelSpec) -> str | None:
    """compare runs both models image by image (a volume slice by slice): a 3D model is refused in one line."""
    three = next((spec for spec in specs if spec.is_3d), None)
    if three is None:
        return None
    return (f"compare runs two models image by image and slice by slice; {three.path.name} is a 3D model (it runs "
            "on whole volumes): run each with `seglens-cli run` and compare their label volumes")


def _anonymize_terminal(args: argparse.Namespace, inputs: Sequence[InputFile]) -> None:
    """--anonymize: from here on every line printed names each input by its pseudonymous name, whoever built it
    (app.cli.console.Terminal, app.runs.privacy.names.LineRedactor)."""
    terminal = getattr(args, "terminal", None)
    if not args.anonymize or terminal is None:
        return
    from app.runs.folder.volumes import pseudonym_key
    from app.runs.privacy.names import line_redactor

    terminal.anonymize(line_redactor(inputs, pseudonym_key()))


def _compare_key(args: argparse.Namespace) -> bytes:
    """compare --anonymize: the pseudonym key its names are made with (app.runs.privacy.names), else none."""
    if not args.anonymize:
        return b""
    from app.runs.folder.volumes import pseudonym_key

    return pseudonym_key()
