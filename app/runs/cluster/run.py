"""Folder runs on a Ray cluster (`seglens-cli run --ray local|ADDRESS`): the same pipeline, outputs, report and
`--resume` as a local run, spread over actors that each own one warmed-up ModelSession.

Plain actors, not Ray Data's `map_batches`, because of what the report promises:
- every input exactly once, in input order, rows written as they finish (so Ctrl+C and `--resume` behave as
  locally). The driver must know which inputs a result covers and re-submit exactly those when an actor dies;
  an actor task per chunk gives that directly. Ray Data retries inside its streaming executor and emits blocks in
  completion order unless `preserve_order`, which stalls the stream behind its slowest block;
- inside an actor a chunk runs through the local pipeline itself (app.runs.folder.batch: prefetch threads, batched
  session runs, the writer thread), so decode, inference and writing overlap there exactly as on a workstation,
  and there is one pipeline to prove;
- Ray Data would add pyarrow and pandas to the extra for no gain here. Ray Data itself was not benchmarked; what
  Ray costs this way (≤ ~5 ms per image against a local run) is in docs/PERFORMANCE.md, "Ray".

Flow: the driver lists the inputs (natural order, as locally), carries the rows `--resume` found, cuts the rest
into chunks and keeps at most `in_flight` chunks per actor submitted: back-pressure, so the driver holds the
results of a bounded number of chunks however many inputs there are. A finished chunk's rows wait in a reorder
buffer until every earlier chunk is written. When an actor dies (killed, its node lost), the driver puts a new one
in its place (a fresh warmed session, wherever Ray places it) and re-submits the chunks the dead one held
(`retries` times, then their inputs become error rows): a row is written only once, when its chunk comes back.
Actors write outputs straight into `--out`, which every node must reach (checked at start with a probe file); the
model's bytes travel through the object store, so nodes need no shared model path.

Only this module and its driver (app.runs.cluster.driver) import Ray (the core, the viewer and the frozen build
never do: pyproject's import contracts).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from app.errors import SegLensError, one_line
from app.guard.untrusted import MODEL_FILE_LIMIT, read_untrusted
from app.io.discover import InputFile
from app.io.files import atomic_write
from app.runs.folder.volumes import VolumeOptions

if TYPE_CHECKING:
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.model.session import ModelSession

Actor = Any  # a Ray actor handle of SegLensActor (its methods are called as `.remote()`)

NODE_COLUMN = "node"


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide: `address` "local" (a Ray instance on this machine), "auto" (the cluster this machine is
    part of), "ray://host:10001" (Ray Client) or a GCS "host:port"; `actors` None = one per GPU, else one per
    `cpus / threads`; `gpus_per_actor` (fractional allowed) None = 1 when the cluster has GPUs and the device is
    not "cpu"."""

    address: str = "local"
    actors: int | None = None
    gpus_per_actor: float | None = None
    chunk: int = 8  # inputs per actor task: large enough to batch and overlap, small enough to rebalance
    in_flight: int = 2  # chunks per actor submitted at once: one running, one queued behind it
    retries: int = 3  # re-submissions of a chunk whose actor died, before its inputs become error rows


@dataclass(frozen=True)
class Job:
    """What every actor needs to build the same session as a local run (sent once, by value)."""

    model_name: str
    model: object  # ObjectRef of the model's bytes (the object store carries them to every node)
    sidecar: bytes | None  # the sidecar YAML's bytes (--config or <model>.yaml), None without one
    device: str
    runtime: RuntimeOptions  # the command line's --runtime, over the sidecar's
    threshold: float | None
    tile: bool | None
    out_dir: str
    save: tuple[str, ...]
    batch: int
    volumes: VolumeOptions | None
    decoders: int  # prefetch threads per actor: the CPUs Ray gives it (at least 2, as locally)
    extra_columns: tuple[str, ...]  # the report's extra columns before `node` (volume columns)
    probe: str  # a file the driver made in out_dir: an actor that cannot see it is on a node that cannot write there


def connect(address: str, *, num_cpus: int | None = None) -> None:
    """Join or start Ray once per process (a test's own instance is reused). Ray's `uv run` hook, which would
    repackage this folder for every worker, is switched off: workers use this environment (local) or SegLens as
    installed on the node (a cluster)."""
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
    except ImportError as exc:
        from app.errors import MissingExtra

        raise MissingExtra(feature="seglens-cli run --ray", extra="ray") from exc

    if ray.is_initialized():
        return
    if address not in ("local", "auto"):
        _check_reachable(address)
    import logging

    quiet = not logging.getLogger().isEnabledFor(logging.DEBUG)  # -v shows Ray's own messages too
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": not quiet,
              "logging_level": logging.ERROR if quiet else logging.INFO}
    try:
        if address == "local":
            ray.init(num_cpus=num_cpus, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise SegLensError(f"--ray {address}: cannot reach the Ray cluster ({one_line(exc)})") \
            from exc


def _check_reachable(address: str, *, timeout: float = 5.0) -> None:
    """A TCP connection to the cluster's address, first: Ray itself keeps retrying a dead address for minutes,
    printing C++ warnings, before it gives up."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise SegLensError(f"--ray {address}: expected local, auto, ray://HOST:PORT or HOST:PORT") from None
    try:
        socket.create_connection((host or "127.0.0.1", number), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SegLensError(f"--ray {address}: nothing answers at {host}:{number} ({reason}); start the cluster "
                           "(`ray start --head`) or check the address") from None


def actor_plan(options: RayOptions, *, device: str, threads: int | None) -> tuple[int, float, float]:
    """(actors, CPUs per actor, GPUs per actor) from the cluster's resources: one actor per GPU (or per
    `1 / gpus_per_actor` of one), each with its share of the CPUs to decode for it (a GPU eats images faster than
    two threads decode them: docs/PERFORMANCE.md, "Ray"); else one per `threads` CPUs (default: 1 thread per actor
    on a 2-core machine)."""
    import ray

    resources = ray.cluster_resources()
    gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 1))
    if gpus and device != "cpu":
        per = options.gpus_per_actor or 1.0
        count = options.actors or max(1, int(gpus / per))
        return count, max(1.0, float(int(cpus // count))), per
    per_cpu = float(threads or 1)
    return options.actors or max(1, int(cpus // per_cpu)), per_cpu, 0.0


class ActorFactory:
    """Makes the run's actors. An actor that dies is replaced by the driver with a new one (a fresh warmed session,
    wherever Ray places it: another node when its node was lost), rather than by Ray's `max_restarts`, whose
    restart would need the constructor's arguments kept alive in the object store by Ray itself."""

    def __init__(self, job: Job, *, cpus: float, gpus: float) -> None:
        import ray

        self.job, self.cpus, self.gpus = job, cpus, gpus
        self._class = ray.remote(max_restarts=0, max_task_retries=0)(SegLensActor)

    def make(self) -> Actor:
        return self._class.options(num_cpus=self.cpus, num_gpus=self.gpus).remote(self.job)


def start_actors(factory: ActorFactory, count: int) -> list[Actor]:
    """`count` actors, each with its session built and warmed (and the output folder checked) before this returns."""
    import ray

    actors = [factory.make() for _ in range(count)]
    try:
        infos = ray.get([a.info.remote() for a in actors])  # waits for every session to be built
    except ray.exceptions.RayActorError as exc:  # the constructor raised on a node: its last line says why
        cause = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), str(exc))
        raise SegLensError(f"the Ray actors could not build their sessions: {cause[:300]}") from exc
    for info in infos:
        if info["problem"]:
            raise SegLensError(info["problem"])
    return actors


class SegLensActor:
    """One warmed session on one node, running chunks of inputs through the local pipeline (app.runs.folder.batch)."""

    def __init__(self, job: Job) -> None:
        import ray

        self.job = job
        self.problem: str | None = None
        self.node = f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
        if not Path(job.probe).is_file():
            self.problem = (f"--out {job.out_dir} is not reachable from node {self.node}: every node writes its "
                            "outputs there, so it must be a folder they share (NFS, a mounted volume)")
            return
        self.model, self.min_confidence = self._session(job)

    def _session(self, job: Job) -> tuple[ModelSession, float | None]:
        from app.inference.decide.tuning import with_threshold
        from app.inference.image.tiling import with_tiling
        from app.inference.model.builder import load_spec
        from app.inference.runtime.session import open_session

        folder = Path(tempfile.mkdtemp(prefix="seglens-model-"))
        model = folder / job.model_name  # the same file name: provenance and the SEG's algorithm name match
        atomic_write(model, _bytes(job.model))  # a private folder of its own (mkdtemp): no one else writes there
        sidecar = None
        if job.sidecar is not None:
            sidecar = model.with_suffix(".yaml")
            atomic_write(sidecar, job.sidecar)
        spec, min_confidence = with_threshold(with_tiling(load_spec(model, sidecar), job.tile), job.threshold)
        return open_session(spec, job.device, runtime=job.runtime), min_confidence

    def info(self) -> dict[str, Any]:
        """Where this actor runs and what its session really got (the honest provider, with the cause)."""
        if self.problem:
            return {"node": self.node, "problem": self.problem}
        info = self.model.info
        return {"node": self.node, "problem": None, "provider": info.provider, "requested": info.requested,
                "fallback_reason": info.fallback_reason, "fallback_warns": info.fallback_warns,
                "provider_label": info.provider_label, "gpu_present": info.gpu_present, "device_id": info.device_id}

    def run(self, items: list[tuple[int, InputFile, Path]], png_texts: Mapping[str, Mapping[str, str]] | None = None,
            ) -> tuple[list[list[str]], str, list[str]]:
        """The report rows of `items` (as the CSV writes them, without the node column), this node, notices;
        `png_texts`: the run's provenance for the PNGs (app.runs.outputs.provenance.RunIdentity.png_texts)."""
        from app.runs.folder.batch import run_inputs
        from app.runs.folder.plan import RunPlan
        from app.runs.outputs.report import RowsReport

        job = self.job
        report = RowsReport(self.model.spec, extra_columns=job.extra_columns)
        plan = RunPlan(spec=self.model.spec, inputs=tuple(item for _, item, _ in items), out=Path(job.out_dir),
                       save=job.save, batch=job.batch, min_confidence=self.min_confidence, volumes=job.volumes)
        summary = run_inputs(self.model, plan, report=report, png_texts=png_texts,
                             stems=[stem for _, _, stem in items], prefetch_workers=job.decoders)
        return report.rows, self.node, summary.notices


def actor_info(actor: Actor) -> dict[str, Any]:
    """An actor's node and its session's provider, requested device and fallback reason."""
    import ray

    info: dict[str, Any] = ray.get(actor.info.remote())
    return info


def node_doctors() -> list[dict[str, Any]]:
    """`doctor` run on every alive node ({"node", "text", "json"}): what a session there really gets."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def check() -> dict[str, Any]:
        from app.inference.runtime import doctor

        facts = doctor.gather()
        verdict = doctor.decide(facts)
        node = f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
        return {"node": node, "text": doctor.report(facts, verdict), "json": doctor.as_json(facts, verdict)}

    remote = ray.remote(num_cpus=0)(check)
    refs = [remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()
            for node in ray.nodes() if node.get("Alive")]
    doctors: list[dict[str, Any]] = ray.get(refs)
    return doctors


def _bytes(value: object) -> bytes:
    """The model's bytes: Ray resolves a top-level ObjectRef argument, not one inside a dataclass."""
    import ray

    # Job.model: the ObjectRef of the model's bytes, or those bytes
    return cast(bytes, ray.get(value) if isinstance(value, ray.ObjectRef) else value)


def make_job(model_path: Path, sidecar: Path | None, **settings: Any) -> Job:
    """The job description, the model's bytes put into the object store once."""
    import ray

    from app.inference.model.sidecar import MAX_SIDECAR_BYTES

    blob = ray.put(read_untrusted(model_path, limit=MODEL_FILE_LIMIT))
    side = sidecar if sidecar is not None else model_path.with_suffix(".yaml")
    side_bytes = read_untrusted(side, limit=MAX_SIDECAR_BYTES) if os.path.lexists(side) else None
    return Job(model_name=model_path.name, model=blob, sidecar=side_bytes, **settings)


def make_probe(out_dir: Path) -> Path:
    """A small file in `out_dir` every actor must see (removed by the caller when the run ends)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    probe = out_dir / f".seglens-ray-probe-{uuid.uuid4().hex[:12]}"
    atomic_write(probe, b"SegLens: this folder must be reachable from every Ray node\n")
    return probe
