"""`seglens-cli bench` on a 3D model: the raw time of one patch's `session.run`, and a whole synthetic volume through
the 3D pipeline (app.inference.volume3d.predict) beside the sum of the raw runs it made.

(a) raw: `session.run` in a loop on patch tensors prepared beforehand ([batch, C, D, H, W], the sidecar's
    input.tile.batch) — the model's limit, given per patch;
(b) pipeline: `predict_volume` on a synthetic volume, or a given one (`--images`: the first volume there)
    (resampling, orientation, normalisation, the sliding window, the probabilities back on the native grid), its
    wall time beside the `session.run` time inside it.
Warm-up is excluded from both (the session is warmed when opened; first-run latency is reported apart).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from app.inference.model.session import ModelSession
from app.inference.volume3d.predict import predict_volume
from app.io.volumes import Volume
from app.runs.bench.pipeline import Stats
from app.spelling import counted

_DTYPES = {"float32": np.float32, "float16": np.float16}
_DISTINCT_TENSORS = 4  # a few different patches, so no cache sees the same input twice in a row


@dataclass(frozen=True)
class VolumeBench:
    """One whole volume through predict_volume: its wall time and the session runs inside it."""

    shape: tuple[int, int, int]  # the synthetic volume's D, H, W
    patches: int  # patch evaluations (windows × TTA passes)
    runs: int  # session runs (a batch of patches is one)
    wall_ms: float
    session_ms: float  # the sum of the raw session.run times inside it

    @property
    def ratio(self) -> float:
        """The sum of the raw session.run times ÷ the pipeline's wall time (1.0: the pipeline adds nothing)."""
        return self.session_ms / self.wall_ms if self.wall_ms > 0 else 0.0


@dataclass(frozen=True)
class PatchBenchReport:
    model: str
    provider: str
    fallback_reason: str | None
    patch: tuple[int, int, int]
    channels: int
    batch: int  # patches per session.run
    first_run_ms: float
    raw: Stats  # per session.run (one batch of patches); images_per_s is runs per second
    volume: VolumeBench

    @property
    def per_patch_ms(self) -> float:
        return self.raw.mean_ms / self.batch

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_patch_ms": round(self.per_patch_ms, 3),
                "volume": {**asdict(self.volume), "session_over_pipeline": round(self.volume.ratio, 3)}}


def patch_tensors(model: ModelSession, count: int = _DISTINCT_TENSORS, seed: int = 0) -> list[np.ndarray]:
    """`count` random [batch, C, D, H, W] tensors of the model's patch, batch and dtype."""
    volume = model.spec.volume
    assert volume is not None  # this bench is for 3D models
    shape = (volume.tile.batch, model.spec.input.channels, *volume.patch)
    rng = np.random.default_rng(seed)
    dtype = _DTYPES.get(model.spec.input.dtype, np.float32)
    return [rng.standard_normal(shape, dtype=np.float32).astype(dtype, copy=False) for _ in range(count)]


def raw_patches(model: ModelSession, runs: int) -> Stats:
    """session.run on prepared patch tensors, `runs` times (cycling through a few)."""
    tensors = patch_tensors(model)
    latencies = []
    started = time.perf_counter()
    for k in range(runs):
        t0 = time.perf_counter()
        model.run(tensors[k % len(tensors)])
        latencies.append((time.perf_counter() - t0) * 1000)
    return Stats.of(latencies, time.perf_counter() - started)


def synthetic_volume(shape: tuple[int, int, int], channels: int, seed: int = 0) -> np.ndarray:
    """[C, D, H, W] float32: smooth structure (CT-like values around 0 ± 500) and noise."""
    rng = np.random.default_rng(seed)
    k, j, i = np.meshgrid(*(np.linspace(0, 3 * np.pi, n, dtype=np.float32) for n in shape), indexing="ij")
    base = 400 * np.sin(i) * np.cos(j) + 200 * np.sin(k)
    return np.stack([base + rng.normal(0, 20, shape).astype(np.float32) for _ in range(channels)])


_RAS_UNIT = {"R": (1, 0, 0), "L": (-1, 0, 0), "A": (0, 1, 0), "P": (0, -1, 0), "S": (0, 0, 1), "I": (0, 0, -1)}


def model_affine(axes: str, spacing: tuple[float, float, float] | None) -> np.ndarray | None:
    """The affine of a volume stored as the model wants it (axes and spacing: no reorientation, no resampling):
    the native array's D, H, W (slice k, row j, column i) point toward the axes code's letters. None for
    `native` (a volume without geometry is run as stored)."""
    if axes == "native":
        return None
    steps = spacing or (1.0, 1.0, 1.0)
    affine = np.eye(4)
    for tensor_axis, letter in enumerate(axes):  # affine column 0 is i (W), 1 is j (H), 2 is k (D)
        affine[:3, 2 - tensor_axis] = np.array(_RAS_UNIT[letter], float) * steps[tensor_axis]
    return affine


def whole_volume(model: ModelSession, shape: tuple[int, int, int]) -> VolumeBench:
    """A synthetic volume of `shape` through predict_volume, stored as the model wants it (its spacing, its axes:
    the pipeline's resampling and reorientation are no-ops, so the figure is the blending's overhead)."""
    volume = model.spec.volume
    assert volume is not None
    image = synthetic_volume(shape, model.spec.input.channels)
    return timed_volume(model, image, spacing=volume.spacing, affine=model_affine(volume.axes, volume.spacing))


def given_volume(model: ModelSession, volume: Volume) -> VolumeBench:
    """A real volume (a DICOM series, a NIfTI: `bench --images`) through predict_volume as `run` gives it: its
    image read whole first (not timed), then resampled and reoriented from its own spacing and affine."""
    from app.runs.folder.volume3d import read_volume

    image = read_volume(model.spec, volume).array
    return timed_volume(model, image, spacing=volume.spacing, affine=volume.affine)


def timed_volume(model: ModelSession, image: np.ndarray, *, spacing: tuple[float, float, float] | None,
                 affine: np.ndarray | None) -> VolumeBench:
    """`image` ([C, D, H, W] or [D, H, W]) through predict_volume: its wall time beside the session.run inside it."""
    session_s = 0.0
    runs = 0

    def timed(tensor: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        nonlocal session_s, runs
        t0 = time.perf_counter()
        output = model.run(tensor)
        session_s += time.perf_counter() - t0
        runs += 1
        return output

    started = time.perf_counter()
    prediction = predict_volume(image, spacing=spacing, affine=affine, spec=model.spec, run_raw=timed)
    wall_ms = (time.perf_counter() - started) * 1000
    shape = prediction.labels.shape
    return VolumeBench((shape[0], shape[1], shape[2]), prediction.patches, runs, wall_ms, session_s * 1000)


def default_volume_shape(model: ModelSession) -> tuple[int, int, int]:
    """Twice the patch along each axis: several overlapping windows (27 at overlap 0.5)."""
    volume = model.spec.volume
    assert volume is not None
    d, h, w = volume.patch
    return 2 * d, 2 * h, 2 * w


def bench3d(model: ModelSession, *, runs: int, shape: tuple[int, int, int] | None = None,
            given: Volume | None = None) -> PatchBenchReport:
    """The raw per-patch time and one whole volume through the pipeline, on a warmed 3D session: `given` (a real
    volume), else a synthetic one of `shape`."""
    volume = model.spec.volume
    assert volume is not None  # the CLI calls it for 3D models only
    raw = raw_patches(model, runs)
    whole = given_volume(model, given) if given is not None else \
        whole_volume(model, shape or default_volume_shape(model))
    return PatchBenchReport(model.spec.path.name, model.info.provider_label, model.info.fallback_reason,
                            volume.patch, model.spec.input.channels, volume.tile.batch, model.info.first_run_ms,
                            raw, whole)


def format_report3d(report: PatchBenchReport, gpu_speedup: float | None = None) -> str:
    """The report for people: per-patch raw latency and the whole volume's pipeline ÷ raw."""
    patch = "×".join(map(str, report.patch))
    v, raw = report.volume, report.raw
    lines = [f"{report.model} on {report.provider}; 3D patches {patch} (D×H×W) × "
             f"{counted(report.channels, 'channel')}, batch {report.batch}; {raw.runs} runs"]
    if report.fallback_reason and report.fallback_reason not in report.provider:
        lines.append(f"  (not on GPU: {report.fallback_reason})")
    lines += [f"  first run (warm-up, excluded) {report.first_run_ms:.1f} ms",
              f"  raw session.run per patch: p50 {raw.p50_ms / report.batch:.2f} ms, "
              f"p95 {raw.p95_ms / report.batch:.2f} ms, mean {report.per_patch_ms:.2f} ms; "
              f"{raw.images_per_s * report.batch:.1f} patches/s",
              f"  whole volume {'×'.join(map(str, v.shape))}: {v.wall_ms:.1f} ms for "
              f"{counted(v.patches, 'patch', 'patches')} in {counted(v.runs, 'run')}; session.run "
              f"{v.session_ms:.1f} ms of it",
              f"  raw session.run ÷ pipeline: {v.ratio:.2f} (1.00: the pipeline adds nothing)"]
    if gpu_speedup is not None:
        lines.append(f"  GPU ÷ CPU raw speed-up: {gpu_speedup:.1f}× (per patch)")
    return "\n".join(lines)
