"""seglens-cli run --ray and doctor --ray: the folder run and the GPU check on a Ray cluster (app/runs/cluster/run.py).

Only reached with `--ray`: nothing here is imported by a local run, and Ray itself only inside app.runs.cluster.run.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from app.cli.options import EXIT_OK, runtime_options
from app.cli.options import shown as _shown
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.model.spec import ModelSpec
    from app.runs.folder.run import Runner, RunPlan


def ray_runner(args: argparse.Namespace, plan: RunPlan) -> Runner:
    """The Runner of `cmd_run --ray` (app.runs.cluster.driver.RayRunner): connected to the cluster, its actors planned
    (started by run_folder inside the output lock, announced as they come up)."""
    from app.runs.cluster import run as ray_run
    from app.runs.cluster.driver import RayRunner

    options = ray_run.RayOptions(address=args.ray, actors=args.ray_actors, gpus_per_actor=args.ray_gpus_per_actor)
    ray_run.connect(options.address)
    from app.inference.model.runtime_options import RuntimeOptions

    runtime = runtime_options(args)
    threads = runtime.intra_op_threads
    count, cpus, gpus = ray_run.actor_plan(options, device=str(args.device), threads=threads or None)
    if not gpus and "intra_op_threads" not in runtime.given:  # each actor's session uses the CPUs Ray gives it
        runtime = runtime.merged(RuntimeOptions.written({"intra_op_threads": max(1, int(cpus))}))
    job = {"model_path": args.model, "sidecar": args.config, "device": str(args.device), "runtime": runtime,
           "tile": args.tile}
    return RayRunner(plan.spec, options=options, job=job, cpus=cpus, gpus=gpus, count=count, announce=_announce_actors)


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
    print(f"ray: {counted(len(infos), 'actor')} on {counted(len(nodes), 'node')}, provider {', '.join(providers)}",
          file=sys.stderr)


def doctor_on_cluster(args: argparse.Namespace) -> int:
    """doctor on every alive node of the cluster: what a session there really gets (CUDA or CPU, and why)."""
    from app.runs.cluster import run as ray_run

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
