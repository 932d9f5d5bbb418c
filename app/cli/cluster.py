"""seglens-cli run --ray and doctor --ray: the folder run and the GPU check on a Ray cluster (app/runs/ray_run.py).

Only reached with `--ray`: nothing here is imported by a local run, and Ray itself only inside app.runs.ray_run.
"""

from __future__ import annotations

import argparse
import json
import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from app.cli import DEFAULT_REPORT_NAME, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, _runtime, _shown

if TYPE_CHECKING:
    from app.inference.session import SessionInfo
    from app.inference.spec import ModelSpec
    from app.io.discover import InputFile
    from app.runs.volume_run import VolumeOptions


def run_on_cluster(args: argparse.Namespace, spec: ModelSpec, min_confidence: float | None,
                   inputs: list[InputFile], volume_options: VolumeOptions | None, *, started: float) -> int:
    """The run of `cmd_run` on Ray: the same checks, report, provenance and exit codes as a local run."""
    from app.cli.run import _print_summary, _Progress, _remove_stale_temporaries
    from app.runs import ray_driver, ray_run
    from app.runs.lock import OutputLock
    from app.runs.outputs import ReportWriter, finished_earlier, rows_of_others
    from app.runs.provenance import RunIdentity, record_run, resume_problem
    from app.runs.volume_run import volume_columns

    if args.reference:
        print("error: --reference with --ray is not supported: score the cluster's masks afterwards with "
              "`seglens-cli compare` or a local run", file=sys.stderr)
        return EXIT_USAGE
    options = ray_run.RayOptions(address=args.ray, actors=args.ray_actors, gpus_per_actor=args.ray_gpus_per_actor)
    ray_run.connect(options.address)
    runtime = _runtime(args)
    threads = runtime.get("intra_op_threads")
    count, cpus, gpus = ray_run.actor_plan(options, device=str(args.device), threads=int(threads) if threads else None)
    if not gpus and "intra_op_threads" not in runtime:  # each actor's session uses the CPUs Ray gives it
        runtime["intra_op_threads"] = max(1, int(cpus))
    report_path = args.report or args.out / DEFAULT_REPORT_NAME
    extra = tuple(volume_columns(spec)) if volume_options else ()
    with OutputLock(args.out):
        _remove_stale_temporaries(args.out, started)
        probe = ray_run.make_probe(args.out)
        try:
            job = ray_run.make_job(args.model, args.config, device=str(args.device), runtime=runtime,
                                   threshold=args.threshold, tile=args.tile, out_dir=str(args.out.resolve()),
                                   save=tuple(args.save), batch=args.batch, volumes=volume_options,
                                   decoders=max(2, int(cpus)),
                                   extra_columns=extra, probe=str(probe.resolve()))
            factory = ray_run.ActorFactory(job, cpus=cpus, gpus=gpus)
            actors = ray_run.start_actors(factory, count)
            infos = [ray_run.actor_info(actor) for actor in actors]
            _announce_actors(infos, spec)
            identity = RunIdentity.of(spec, threshold=args.threshold, min_confidence=min_confidence,
                                      # the three fields RunIdentity.of reads, as the first actor's session has them
                                      session=cast("SessionInfo", SimpleNamespace(**{k: infos[0][k] for k in (
                                          "provider", "requested", "fallback_reason")})))
            stale = resume_problem(report_path, identity) if args.resume else None
            if stale:
                print(f"error: --resume into {_shown(args.out)}: {_shown(stale)}; run without "
                      "--resume to redo every input, or choose a new --out", file=sys.stderr)
                return EXIT_USAGE
            columns = [*extra, ray_run.NODE_COLUMN]
            done = finished_earlier(report_path, spec, inputs, out_dir=args.out, save=args.save,
                                    exports=volume_options.exports if volume_options else None,
                                    extra_columns=columns) if args.resume else {}
            others = rows_of_others(report_path, spec, inputs, extra_columns=columns) if args.resume else []
            progress = _Progress(len(inputs), enabled=sys.stderr.isatty() and not args.no_progress)
            with ReportWriter(report_path, spec, extra_columns=columns) as report:
                record_run(report_path, identity)
                summary = ray_driver.run_on_ray(actors, factory, inputs, report=report, options=options,
                                                save=args.save, out_dir=args.out, extra_columns=extra, done=done,
                                                progress=lambda p: progress.update(p, p.summary),
                                                png_texts=identity.png_texts(spec))
                for row in others:  # finished rows are never lost to a run of part of the inputs
                    report.add_row(row)
            if others:
                summary.notices.append(f"{len(others)} row(s) of inputs not in this run kept from the earlier report")
            progress.close()
        finally:
            probe.unlink(missing_ok=True)
    for notice in dict.fromkeys(summary.notices):
        print(f"note: {_shown(notice)}", file=sys.stderr)
    nodes = sorted({info["node"] for info in infos})
    labels = ", ".join(sorted({info["provider_label"] for info in infos}))
    cluster = SimpleNamespace(provider_label=f"{labels} on {len(actors)} Ray actor(s), {len(nodes)} node(s)")
    _print_summary(summary, cast("SessionInfo", cluster), args.out, report_path)  # it reads provider_label
    print(_shown(identity.summary_line(report_path)))
    return EXIT_OK if summary.failed == 0 else EXIT_SOME_FAILED


def _announce_actors(infos: list[dict[str, Any]], spec: ModelSpec) -> None:
    """Each actor's session as it really runs: a GPU asked for (or `auto`) and not used is said, with the cause, per
    node, as a local run says it."""
    for node, requested, reason in sorted({(i["node"], i["requested"], i["fallback_reason"]) for i in infos
                                           if i["fallback_reason"] and i.get("fallback_warns", True)}):
        if requested.startswith("cuda"):
            print(f"warning: on node {_shown(node)}, CUDA was requested but {_shown(spec.path.name)} runs on the CPU: "
                  f"{_shown(reason)}", file=sys.stderr)
        else:
            print(f"note: on node {_shown(node)}, running on the CPU ({_shown(reason)})", file=sys.stderr)
    nodes = {info["node"] for info in infos}
    providers = sorted({info["provider"] for info in infos})
    print(f"ray: {len(infos)} actor(s) on {len(nodes)} node(s), provider {', '.join(providers)}", file=sys.stderr)


def doctor_on_cluster(args: argparse.Namespace) -> int:
    """doctor on every alive node of the cluster: what a session there really gets (CUDA or CPU, and why)."""
    from app.runs import ray_run

    ray_run.connect(args.ray)
    reports = ray_run.node_doctors()
    if args.json:
        print(json.dumps(reports, indent=2))
        return EXIT_OK
    for report in reports:
        print(f"== node {_shown(report['node'])}")
        print(_shown(report["text"]))
        print()
    return EXIT_OK
