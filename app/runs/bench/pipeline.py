"""`seglens-cli bench`: the model's raw limit and the full pipeline, side by side in one process.

(a) raw: `session.run` in a loop on tensors prepared beforehand — the ceiling for a folder run;
(b) pipeline: the same images through decode → preprocess → inference → postprocess → writes, pipelined.
Warm-up is excluded from both (the session is warmed when opened; first-run latency is reported apart).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from app.inference.image import pipeline
from app.inference.model.session import ModelSession
from app.io.discover import InputFile
from app.runs.folder.batch import run_inputs
from app.runs.folder.plan import Callbacks, RunPlan
from app.spelling import counted

if TYPE_CHECKING:
    from app.runs.folder.writer import Outcome, RunSummary


@dataclass(frozen=True)
class Stats:
    runs: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    images_per_s: float

    @classmethod
    def of(cls, latencies_ms: list[float], wall_s: float) -> Stats:
        ordered = sorted(latencies_ms)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        return cls(len(ordered), statistics.median(ordered), p95, statistics.fmean(ordered),
                   len(ordered) / wall_s if wall_s > 0 else 0.0)


@dataclass(frozen=True)
class BenchReport:
    model: str
    provider: str
    fallback_reason: str | None
    images: int
    image_size: str
    first_run_ms: float
    raw: Stats
    pipeline: Stats
    saved: tuple[str, ...]

    @property
    def ratio(self) -> float:
        """Pipeline throughput ÷ raw throughput (1.0 = the pipeline costs nothing on top of the model)."""
        return self.pipeline.images_per_s / self.raw.images_per_s if self.raw.images_per_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "pipeline_over_raw": round(self.ratio, 3)}


def synthetic_images(folder: Path, size: tuple[int, int], count: int = 8, seed: int = 0) -> list[InputFile]:
    """`count` PNGs of `size` (H, W) with smooth structure and noise, like camera frames."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    h, w = size
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    files = []
    for i in range(count):
        base = 110 + 50 * np.sin(x / (60 + 7 * i)) * np.cos(y / (45 + 5 * i))
        pixels = np.clip(base[..., None] + rng.normal(0, 10, (h, w, 3)), 0, 255).astype(np.uint8)
        path = folder / f"bench_{i:02d}.png"
        Image.fromarray(pixels).save(path, compress_level=1)
        files.append(InputFile(path, Path(path.name)))
    return files


def image_inputs(inputs: list[InputFile]) -> tuple[list[InputFile], int]:
    """(the inputs bench times one picture at a time, how many were left out): images as they are, a DICOM series
    as its slice files (each one a DICOM image; handed over whole, the series' `<folder>/<SeriesInstanceUID>` was
    "file not found"); a NIfTI or multi-frame volume has no file per slice and is left out."""
    images: list[InputFile] = []
    left_out = 0
    for item in inputs:
        volume = item.volume
        if volume is None:
            images.append(item)
        elif volume.kind == "dicom":
            images.extend(InputFile(ref.path, item.rel.parent / ref.path.name) for ref in volume.slices)
        else:
            left_out += 1
    return images, left_out


def raw_limit(model: ModelSession, inputs: list[InputFile], runs: int) -> Stats:
    """session.run on prepared tensors, cycling through the inputs `runs` times in all (a tiled image: all its
    tile batches, one image)."""
    prepared = [pipeline.prepare(model.spec, pipeline.decode(i.path)[0]) for i in inputs]
    batch = pipeline.tile_batch(model)
    # an image that is not tiled has its tensor, a tiled one its pixels
    tensors = [[cast(np.ndarray, p.tensor)] if p.pixels is None else
               [t for *_, t in pipeline.tile_batches(model.spec.input, p.pixels, batch)] for p in prepared]
    latencies = []
    started = time.perf_counter()
    for k in range(runs):
        t0 = time.perf_counter()
        for tensor in tensors[k % len(tensors)]:
            model.run(tensor)
        latencies.append((time.perf_counter() - t0) * 1000)
    return Stats.of(latencies, time.perf_counter() - started)


def pipeline_throughput(model: ModelSession, inputs: list[InputFile], runs: int, save: tuple[str, ...]) -> Stats:
    """The pipelined folder run on `runs` inputs (cycling), writing `save` outputs to a scratch folder."""
    cycled = [InputFile(inputs[k % len(inputs)].path, Path(f"{k:05d}_{inputs[k % len(inputs)].rel}"))
              for k in range(runs)]
    latencies: list[float] = []

    def progress(outcome: Outcome, _summary: RunSummary) -> None:
        if outcome.result is not None:
            latencies.append(sum(outcome.result.timings.values()))

    with tempfile.TemporaryDirectory(prefix="seglens-bench-") as scratch:
        started = time.perf_counter()
        plan = RunPlan(spec=model.spec, inputs=tuple(cycled), out=Path(scratch) if save else None, save=save)
        run_inputs(model, plan, progress=Callbacks(outcome=progress))
        wall = time.perf_counter() - started
    return Stats.of(latencies or [0.0], wall)


def bench(model: ModelSession, inputs: list[InputFile], *, runs: int, save: tuple[str, ...]) -> BenchReport:
    raw = raw_limit(model, inputs, runs)
    piped = pipeline_throughput(model, inputs, runs, save)
    images = [pipeline.decode(i.path)[0] for i in inputs[:4]]
    sizes = sorted({f"{image.width}×{image.height}" for image in images})
    return BenchReport(model.spec.path.name, model.info.provider_label, model.info.fallback_reason, len(inputs),
                       ", ".join(sizes), model.info.first_run_ms, raw, piped, save)


def format_report(report: BenchReport, gpu_speedup: float | None = None) -> str:
    def row(name: str, s: Stats) -> str:
        return f"  {name:<10}{s.p50_ms:>9.1f}{s.p95_ms:>9.1f}{s.mean_ms:>9.1f}   │{s.images_per_s:>11.2f}"

    lines = [f"{report.model} on {report.provider}; {counted(report.images, 'image')} {report.image_size}; "
             f"{report.raw.runs} runs each; outputs written: {', '.join(report.saved) or 'none'}"]
    if report.fallback_reason and report.fallback_reason not in report.provider:  # "CPU (no NVIDIA GPU)" says it
        lines.append(f"  (not on GPU: {report.fallback_reason})")
    lines += [f"  first run (warm-up, excluded) {report.first_run_ms:.1f} ms",
              f"  {'':<10}{'latency: ms per image':^27}   │{'throughput':>11}",
              f"  {'':<10}{'p50':>9}{'p95':>9}{'mean':>9}   │{'images/s':>11}",
              row("raw", report.raw), row("pipeline", report.pipeline),
              f"  pipeline ÷ raw throughput: {report.ratio:.2f}"]
    if gpu_speedup is not None:
        lines.append(f"  GPU ÷ CPU raw speed-up: {gpu_speedup:.1f}× (raw throughput)")
    return "\n".join(lines + list(BENCH_LEGEND))


BENCH_LEGEND = (
    "  latency: one image's time (raw: session.run alone on a tensor prepared beforehand, the model's limit;",
    "           pipeline: its decode, preprocess, inference and postprocess added up)",
    "  throughput: images ÷ wall-clock time (pipeline: the stages overlapped and the outputs written, as in a "
    "folder run)")
