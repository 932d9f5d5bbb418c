"""Throughput of a volume run (issue 17): a DICOM series run slice by slice, against raw session runs.

    uv run python benchmarks/volume_bench.py [--slices 200] [--size 512] [--batch 4] [--repeats 3]
                                             [--base 8] [--work DIR] [--no-png]

It writes a synthetic CT series (tests/dicom_factory.write_series: 16-bit, HU through RescaleSlope/Intercept) and a
UNet-shaped 2-class segmentation model (benchmarks/unet_onnx.py, 1 gray input channel, dynamic N/H/W, random
weights; sidecar `input.window: [40, 400]`), then measures side by side in one process, with one ModelSession (so
the thread settings are identical), `--repeats` times each, quoting medians:

  raw       every slice decoded and preprocessed before timing (read_slice + pipeline.prepare), then only
            `model.run` on batches of 1 and of B: slices/s;
  pipeline  app.runs.folder.batch.run_inputs on the discovered series (prefetch decode + preprocess, batched session
            runs, writer thread: postprocess, label-volume assembly, NIfTI export), `save=("mask",)`,
            exports nifti: slices/s, and the ratio pipeline / raw at the same batch size;
  stages    one extra pipeline run with a report and per-slice rows: the median decode / preprocess /
            inference / postprocess milliseconds per slice from the report, plus the volume's finish (summed counts
            and the NIfTI export) timed alone;
  CLI       `python -m app.cli run MODEL SERIES --out DIR --batch B --export nifti` in a fresh process: wall time
            and peak RSS (getrusage(RUSAGE_CHILDREN).ru_maxrss of a wrapper process that runs only it), and the
            same for a folder of PNGs of the same slices for contrast (--no-png: skip).

Prints a Markdown table and one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from dicom_factory import write_series  # noqa: E402
from unet_onnx import build_unet  # noqa: E402

from app.inference.image import pipeline  # noqa: E402
from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402
from app.io.discover import discover  # noqa: E402
from app.io.images import read_slice  # noqa: E402
from app.runs.folder.batch import run_inputs  # noqa: E402
from app.runs.folder.plan import RunPlan  # noqa: E402
from app.runs.folder.volumes import VolumeOptions, volume_columns  # noqa: E402
from app.runs.outputs.report import ReportWriter  # noqa: E402

SIDECAR = "input:\n  window: [40, 400]\nclasses: [background, tissue]\n"

# A wrapper process that runs only the CLI, so RUSAGE_CHILDREN is that one process's peak.
RSS_WRAPPER = """
import resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - started
if done.returncode != 0:
    sys.stderr.write(done.stderr)
print(done.returncode, wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def build(work: Path, slices: int, size: int, base: int) -> tuple[Path, Path]:
    series = work / "series"
    if not series.exists():
        write_series(series, slices=slices, rows=size, columns=size, description="bench")
    model = build_unet(work / f"unet{base}_gray.onnx", base=base, classes=2, in_channels=1)
    model.with_suffix(".yaml").write_text(SIDECAR)
    return series, model


def raw_rate(model, tensors: list[np.ndarray], batch: int) -> tuple[float, float]:
    """Slices/s of model.run alone on pre-made tensors, `batch` per run, and the process's CPU ms per slice."""
    cpu, started = time.process_time(), time.perf_counter()
    for i in range(0, len(tensors), batch):
        chunk = tensors[i: i + batch]
        model.run(chunk[0] if len(chunk) == 1 else np.concatenate(chunk))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return len(tensors) / seconds, cpu * 1000 / len(tensors)


def pipeline_rate(model, series: Path, out: Path, batch: int, depth: int) -> tuple[float, float]:
    """Slices/s of run_inputs on the series (discovery not timed), NIfTI export included; CPU ms per slice (all
    the process's threads: prefetch, inference, writer)."""
    inputs = discover([series])
    cpu, started = time.process_time(), time.perf_counter()
    summary = run_inputs(model, RunPlan(spec=model.spec, inputs=tuple(inputs), out=out, batch=batch,
                                        volumes=VolumeOptions(exports=("nifti",))))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if summary.ok != 1 or not list(out.glob("*_mask.nii.gz")):
        raise SystemExit(f"the pipeline run did not finish the volume: {summary}")
    return depth / seconds, cpu * 1000 / depth


def stage_breakdown(model, series: Path, out: Path, batch: int) -> dict[str, float]:
    """Median per-slice stage milliseconds from a per-slice report, and the volume's finish timed alone."""
    inputs = discover([series])
    report_path = out / "report.csv"
    started = time.perf_counter()
    with ReportWriter(report_path, model.spec, extra_columns=volume_columns(model.spec)) as report:
        run_inputs(model, RunPlan(spec=model.spec, inputs=tuple(inputs), out=out, batch=batch,
                                  volumes=VolumeOptions(exports=("nifti",), per_slice=True)), report=report)
    run_s = time.perf_counter() - started
    with report_path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("slice")]
    stages = {f"{s}_ms": statistics.median(float(r[f"{s}_ms"]) for r in rows) for s in pipeline.STAGES}
    stages["slices_reported"] = len(rows)
    stages["run_s"] = run_s

    # The writer's end-of-volume work, alone: summing the slices' counts (what VolumeAssembler.finish does since the
    # bincount of the whole label volume was dropped), then the NIfTI export (gzip).
    from app.runs.exports import formats as ex

    volume = inputs[0].volume
    labels = np.zeros((volume.depth, volume.rows, volume.columns), np.uint8)
    labels[:, volume.rows // 4: volume.rows // 2, volume.columns // 4: volume.columns // 2] = 1
    per_slice = [np.bincount(plane.ravel(), minlength=256) for plane in labels]
    t = time.perf_counter()
    np.sum(per_slice, axis=0)
    stages["finish_counts_ms"] = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    ex.write_nifti_labels(volume, labels, out / "alone_mask.nii.gz")
    stages["finish_nifti_ms"] = (time.perf_counter() - t) * 1000

    # Serial CPU cost of the helper stages per slice (one thread, nothing else running), for comparison.
    k = volume.depth // 2
    decode, prep, post = [], [], []
    for _ in range(15):
        t = time.perf_counter()
        image = read_slice(volume, k)
        decode.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        prepared = pipeline.prepare(model.spec, image)
        prep.append((time.perf_counter() - t) * 1000)
    output = model.run(prepared.tensor)
    for _ in range(15):
        t = time.perf_counter()
        pipeline.to_result(model, prepared, output, 0.0)
        post.append((time.perf_counter() - t) * 1000)
    infer = []
    for _ in range(5):
        t = time.perf_counter()
        model.run(prepared.tensor)
        infer.append((time.perf_counter() - t) * 1000)
    stages.update(alone_decode_ms=statistics.median(decode), alone_preprocess_ms=statistics.median(prep),
                  alone_postprocess_ms=statistics.median(post), alone_inference_ms=statistics.median(infer))
    return stages


def cli_run(model: Path, inputs: Path, out: Path, batch: int, *extra: str) -> dict[str, float]:
    """Wall seconds and peak RSS (MB) of one CLI run in a fresh process."""
    command = [sys.executable, "-m", "app.cli", "run", str(model), str(inputs), "--out", str(out),
               "--batch", str(batch), "--device", "cpu", "--no-progress", *extra]
    done = subprocess.run([sys.executable, "-c", RSS_WRAPPER, *command], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    rc, wall, rss_kb = done.stdout.split()
    if rc != "0":
        raise SystemExit(f"the CLI run failed (exit {rc}):\n{done.stderr}")
    return {"wall_s": float(wall), "peak_rss_mb": int(rss_kb) / 1024}


def write_pngs(series: Path, folder: Path) -> None:
    """The series' slices as 8-bit PNGs (the model's window applied), for the 2D contrast run."""
    from PIL import Image

    from app.io.window import apply_window

    folder.mkdir(exist_ok=True)
    volume = discover([series])[0].volume
    for k in range(volume.depth):
        pixels = apply_window(read_slice(volume, k).raw, 40, 400)
        Image.fromarray(pixels).save(folder / f"slice_{k:03d}.png", compress_level=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slices", type=int, default=200)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", type=int, default=8, help="UNet base width (benchmarks/unet_onnx.py; default 8)")
    parser.add_argument("--work", type=Path, help="keep the series, model and outputs here (default: a temp dir)")
    parser.add_argument("--no-png", action="store_true", help="skip the 2D PNG-folder CLI run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix="runs_", dir=work))
        series, model_path = build(work, args.slices, args.size, args.base)
        model = open_session(load_spec(model_path), "cpu")
        if model.spec.task != "segmentation" or not pipeline.batchable(model):
            raise SystemExit(f"expected a batchable segmentation model, got {model.spec.task}")
        volume = discover([series])[0].volume
        tensors = [pipeline.prepare(model.spec, read_slice(volume, k)).tensor for k in range(volume.depth)]
        model.run(np.concatenate(tensors[: args.batch]))  # warm-up (allocations, the arena)
        sizes = sorted({1, args.batch})
        raw: dict[int, list[tuple[float, float]]] = {b: [] for b in sizes}
        pipe: dict[int, list[tuple[float, float]]] = {b: [] for b in sizes}
        for r in range(args.repeats):
            for b in sizes:
                raw[b].append(raw_rate(model, tensors, b))
                pipe[b].append(pipeline_rate(model, series, run_dir / f"p{r}_b{b}", b, volume.depth))
            print(f"repeat {r + 1}: " + ", ".join(f"B={b} raw {raw[b][-1][0]:.2f} pipeline {pipe[b][-1][0]:.2f}"
                                                 for b in sizes) + " slices/s", file=sys.stderr)
        del tensors
        stages = stage_breakdown(model, series, run_dir / "stages", args.batch)
        cli = cli_run(model_path, series, run_dir / "cli", args.batch, "--export", "nifti")
        png = None
        if not args.no_png:
            write_pngs(series, work / "pngs")
            png = cli_run(model_path, work / "pngs", run_dir / "cli_png", args.batch)

    med = {b: (statistics.median(r for r, _ in raw[b]), statistics.median(r for r, _ in pipe[b])) for b in sizes}
    cpu = {b: (statistics.median(c for _, c in raw[b]), statistics.median(c for _, c in pipe[b])) for b in sizes}
    print(f"model: UNet-shaped, base {args.base}, 1 gray channel, 2 classes, dynamic N/H/W "
          f"(benchmarks/unet_onnx.py); series {args.slices} slices {args.size}×{args.size} int16 CT; "
          f"{os.cpu_count()} CPUs; medians of {args.repeats} repeats")
    print("| batch | raw model.run (slices/s) | pipeline run_inputs + NIfTI (slices/s) | pipeline / raw "
          "| CPU ms/slice raw | CPU ms/slice pipeline |")
    print("|---|---|---|---|---|---|")
    for b in sizes:
        print(f"| {b} | {med[b][0]:.2f} | {med[b][1]:.2f} | {med[b][1] / med[b][0]:.1%} | {cpu[b][0]:.0f} "
              f"| {cpu[b][1]:.0f} |")
    print()
    print(f"per slice in the pipeline run (B={args.batch}, report medians, ms): decode {stages['decode_ms']:.1f}, "
          f"preprocess {stages['preprocess_ms']:.1f}, inference {stages['inference_ms']:.1f} (batch share), "
          f"postprocess {stages['postprocess_ms']:.1f}")
    print(f"alone, one thread (ms): decode {stages['alone_decode_ms']:.1f}, preprocess "
          f"{stages['alone_preprocess_ms']:.1f}, postprocess {stages['alone_postprocess_ms']:.1f}, inference B=1 "
          f"{stages['alone_inference_ms']:.1f}; volume finish: counts {stages['finish_counts_ms']:.0f}, "
          f"NIfTI export {stages['finish_nifti_ms']:.0f}")
    print(f"CLI (fresh process, --batch {args.batch} --export nifti): {cli['wall_s']:.1f} s wall, "
          f"peak RSS {cli['peak_rss_mb']:.0f} MB" + (f"; {args.slices} PNGs: {png['wall_s']:.1f} s, peak RSS "
                                                     f"{png['peak_rss_mb']:.0f} MB" if png else ""))
    figures = {
        "slices": args.slices, "size": args.size, "batch": args.batch, "repeats": args.repeats, "unet_base": args.base,
        "cpus": os.cpu_count(),
        **{f"raw_b{b}_per_s": round(med[b][0], 3) for b in sizes},
        **{f"pipeline_b{b}_per_s": round(med[b][1], 3) for b in sizes},
        **{f"ratio_b{b}": round(med[b][1] / med[b][0], 4) for b in sizes},
        **{f"raw_b{b}_cpu_ms_per_slice": round(cpu[b][0], 1) for b in sizes},
        **{f"pipeline_b{b}_cpu_ms_per_slice": round(cpu[b][1], 1) for b in sizes},
        "all_raw_per_s": {b: [round(r, 2) for r, _ in raw[b]] for b in sizes},
        "all_pipeline_per_s": {b: [round(r, 2) for r, _ in pipe[b]] for b in sizes},
        "stages_ms": {k: round(v, 2) for k, v in stages.items()},
        "cli_wall_s": round(cli["wall_s"], 2), "cli_peak_rss_mb": round(cli["peak_rss_mb"], 1),
        **({"png_cli_wall_s": round(png["wall_s"], 2), "png_cli_peak_rss_mb": round(png["peak_rss_mb"], 1)}
           if png else {}),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
