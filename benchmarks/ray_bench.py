"""Throughput of a folder run on Ray (issue 18: `seglens-cli run --ray local`) against the same run locally.

    uv run python benchmarks/ray_bench.py [--images 160] [--size 512] [--batch 1] [--chunk 8] [--repeats 3]
                                          [--base 8] [--work DIR]

It writes a folder of `--images` structured RGB PNGs (gradients, discs, noise) and a UNet-shaped 2-class
segmentation model (benchmarks/unet_onnx.py, 3 channels, dynamic N/H/W, random weights, a sidecar naming the
classes), starts Ray on this machine the way the CLI does (app.runs.cluster.run.connect("local"): timed), then measures
side by side in one process, `--repeats` times each, quoting medians, every run writing masks and a report like the
CLI (`--save mask`, `--batch B`):

  local       app.runs.folder.batch.run_inputs with one ModelSession of 2 intra-op threads (what a local run gets here);
  ray 2×1     2 actors × 1 CPU / 1 intra-op thread each: what `--ray local` picks on 2 cores
              (ActorFactory(job, cpus=1, gpus=0), start_actors(factory, 2), run_on_ray(...));
  ray 1×2     1 actor × 2 CPUs / 2 intra-op threads: the local run's compute shape behind Ray, so
              (1/rate(ray 1×2) − 1/rate(local)) is Ray's own cost per image.

Actor start-up (make_job, the actors' sessions built and warmed, start_actors returning) is timed apart and not in
the throughput; actors are killed after every run (a CLI run starts its own). Afterwards, for the on-paper scaling
in docs/PERFORMANCE.md: decode time of a 1920×1080 RGB PNG on one core (app.io.images.read_image), the bytes of a
1080p mask and overlay PNG as the pipeline writes them, and the cost of one report row (ReportWriter.add_row).

Prints a Markdown table and one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # workers use this environment as it is

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from unet_onnx import build_unet  # noqa: E402

from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402
from app.io.discover import discover  # noqa: E402
from app.runs.folder.batch import run_inputs  # noqa: E402
from app.runs.folder.plan import RunPlan  # noqa: E402
from app.runs.outputs.report import ReportWriter  # noqa: E402

SIDECAR = "classes: [background, object]\n"


def structured(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """An RGB image with gradients, a few discs and some noise (compresses like a photo-ish PNG, not like noise)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.stack([xx / width * 200, yy / height * 200, (xx + yy) / (width + height) * 200], axis=-1)
    for _ in range(int(rng.integers(3, 8))):
        cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(0.05, 0.2) * min(height, width)
        image[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = rng.uniform(0, 255, 3)
    image += rng.normal(0, 8, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def build(work: Path, images: int, size: int, base: int) -> tuple[Path, Path]:
    from PIL import Image

    folder = work / f"images_{images}_{size}"
    if not folder.exists():
        folder.mkdir(parents=True)
        rng = np.random.default_rng(18)
        for i in range(images):
            Image.fromarray(structured(rng, size, size)).save(folder / f"img_{i:04d}.png")
    model = build_unet(work / f"unet{base}_rgb.onnx", base=base, classes=2, in_channels=3)
    model.with_suffix(".yaml").write_text(SIDECAR)
    return folder, model


def check(out: Path, report: Path, images: int, summary) -> None:
    if summary.ok != images or summary.failed or len(list(out.glob("*_mask.png"))) != images or not report.is_file():
        raise SystemExit(f"the run in {out} did not finish every input: {summary}")


def local_run(model_path: Path, folder: Path, out: Path, batch: int, images: int, session=None) -> tuple[float, object]:
    """Images/s of run_inputs with a 2-thread session, masks and a report written (discovery not timed)."""
    session = session or open_session(load_spec(model_path), "cpu", runtime={"intra_op_threads": 2})
    inputs = discover([folder])
    started = time.perf_counter()
    with ReportWriter(out / "seglens_report.csv", session.spec) as report:
        summary = run_inputs(session, RunPlan(spec=session.spec, inputs=tuple(inputs), out=out, batch=batch),
                             report=report)
    seconds = time.perf_counter() - started
    check(out, out / "seglens_report.csv", images, summary)
    return images / seconds, session


def ray_run_once(model_path: Path, folder: Path, out: Path, *, actors: int, threads: int, batch: int, chunk: int,
                 images: int) -> tuple[float, float]:
    """(start-up seconds, images/s) of one Ray run: `actors` actors × `threads` CPUs and intra-op threads each."""
    import ray

    from app.runs.cluster import driver as ray_driver
    from app.runs.cluster import run as ray_run

    spec = load_spec(model_path)
    started = time.perf_counter()
    probe = ray_run.make_probe(out)
    job = ray_run.make_job(model_path, None, device="cpu", runtime={"intra_op_threads": threads}, threshold=None,
                           tile=None, out_dir=str(out.resolve()), save=("mask",), batch=batch, volumes=None, decoders=2,
                           extra_columns=(), probe=str(probe.resolve()))
    factory = ray_run.ActorFactory(job, cpus=threads, gpus=0)
    pool = ray_run.start_actors(factory, actors)
    startup = time.perf_counter() - started
    inputs = discover([folder])
    started = time.perf_counter()
    with ReportWriter(out / "seglens_report.csv", spec, extra_columns=[ray_run.NODE_COLUMN]) as report:
        summary = ray_driver.run_on_ray(pool, factory, inputs, report=report, options=ray_run.RayOptions(chunk=chunk),
                                     save=("mask",), out_dir=out)
    seconds = time.perf_counter() - started
    probe.unlink(missing_ok=True)
    check(out, out / "seglens_report.csv", images, summary)
    for actor in pool:
        ray.kill(actor)
    _wait_for_cpus()
    return startup, images / seconds


def _wait_for_cpus(timeout: float = 30.0) -> None:
    """Until the killed actors have given their CPUs back (so the next start-up does not time Ray's clean-up)."""
    import ray

    total = ray.cluster_resources().get("CPU", 0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and ray.available_resources().get("CPU", 0) < total:
        time.sleep(0.05)


def paper_inputs(work: Path, model_path: Path) -> dict[str, float]:
    """The figures the on-paper scaling uses, measured here: 1080p PNG decode on one core, 1080p mask and overlay
    PNG bytes as the pipeline writes them, one report row."""
    from PIL import Image

    from app.io.images import read_image
    from app.runs.outputs.report import RowsReport

    folder = work / "hd"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(1080)
    for i in range(2):
        Image.fromarray(structured(rng, 1080, 1920)).save(folder / f"hd_{i}.png")
    path = folder / "hd_0.png"
    read_image(path)
    decode = []
    for _ in range(9):
        t = time.perf_counter()
        read_image(path)
        decode.append((time.perf_counter() - t) * 1000)
    session = open_session(load_spec(model_path), "cpu", runtime={"intra_op_threads": 2})
    out = work / "hd_out"
    run_inputs(session, RunPlan(spec=session.spec, inputs=tuple(discover([folder])), out=out, save=("mask", "overlay")),
               prefetch_workers=1)
    masks = [p.stat().st_size for p in out.glob("*_mask.png")]
    overlays = [p.stat().st_size for p in out.glob("*_overlay.png")]
    # A report row: what the driver does per image (RowsReport keeps rows in memory; the CSV writer's cost is the
    # same csv.writer call on a buffered file, timed with the real writer below).
    rows = RowsReport(session.spec)
    rows.add_error(path, "x")
    row = rows.rows[0]
    with ReportWriter(work / "rows.csv", session.spec) as report:
        t = time.perf_counter()
        for _ in range(20_000):
            report.add_row(row)
        row_us = (time.perf_counter() - t) / 20_000 * 1e6
    return {"hd_png_bytes": (folder / "hd_0.png").stat().st_size, "hd_decode_ms": statistics.median(decode),
            "hd_mask_kb": statistics.median(masks) / 1024, "hd_overlay_kb": statistics.median(overlays) / 1024,
            "report_row_us": row_us}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=160)
    parser.add_argument("--size", type=int, default=512, help="square image side (default 512: ~12 s a local pass)")
    parser.add_argument("--batch", type=int, default=1, help="--batch of every run (default 1, the CLI's)")
    parser.add_argument("--chunk", type=int, default=8, help="RayOptions.chunk (default 8, the CLI's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", type=int, default=8, help="UNet base width (benchmarks/unet_onnx.py; default 8)")
    parser.add_argument("--work", type=Path, help="keep the images, model and outputs here (default: a temp dir)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        runs = Path(tempfile.mkdtemp(prefix="runs_", dir=work))
        folder, model_path = build(work, args.images, args.size, args.base)

        import ray

        from app.runs.cluster import run as ray_run

        started = time.perf_counter()
        ray_run.connect("local")  # what `--ray local` does: ray.init on this machine, all its CPUs
        ray_init_s = time.perf_counter() - started
        logging.getLogger("ray").setLevel(logging.ERROR)
        cpus = ray.cluster_resources().get("CPU", 0)

        local, two, one = [], [], []  # images/s; (start-up s, images/s)
        session = None
        for r in range(args.repeats):
            rate, session = local_run(model_path, folder, runs / f"local{r}", args.batch, args.images, session)
            local.append(rate)
            two.append(ray_run_once(model_path, folder, runs / f"ray2x1_{r}", actors=2, threads=1,
                                    batch=args.batch, chunk=args.chunk, images=args.images))
            one.append(ray_run_once(model_path, folder, runs / f"ray1x2_{r}", actors=1, threads=2,
                                    batch=args.batch, chunk=args.chunk, images=args.images))
            print(f"repeat {r + 1}: local {local[-1]:.2f}, ray 2×1 {two[-1][1]:.2f} (start-up {two[-1][0]:.2f} s), "
                  f"ray 1×2 {one[-1][1]:.2f} (start-up {one[-1][0]:.2f} s) images/s", file=sys.stderr)
        ray.shutdown()
        paper = paper_inputs(work, model_path)
    load_after = os.getloadavg()

    med_local = statistics.median(local)
    med = {"2x1": (statistics.median(s for s, _ in two), statistics.median(r for _, r in two)),
           "1x2": (statistics.median(s for s, _ in one), statistics.median(r for _, r in one))}
    overhead_ms = 1000 / med["1x2"][1] - 1000 / med_local
    print(f"model: UNet-shaped, base {args.base}, RGB, 2 classes, dynamic N/H/W (benchmarks/unet_onnx.py); "
          f"{args.images} PNGs {args.size}×{args.size}; --batch {args.batch}, chunk {args.chunk}; {os.cpu_count()} "
          f"CPUs (Ray sees {cpus:g}); medians of {args.repeats} repeats; load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f}")
    print("| run | images/s | ÷ local | ms/image | actor start-up (s, not in images/s) |")
    print("|---|---|---|---|---|")
    print(f"| local (1 session × 2 threads) | {med_local:.2f} {_all(local)} | 1.00 | {1000 / med_local:.1f} | — |")
    for key, label in (("2x1", "ray 2 actors × 1 thread (`--ray local`)"), ("1x2", "ray 1 actor × 2 threads")):
        runs_ = two if key == "2x1" else one
        print(f"| {label} | {med[key][1]:.2f} {_all([r for _, r in runs_])} | {med[key][1] / med_local:.2f} "
              f"| {1000 / med[key][1]:.1f} | {med[key][0]:.2f} {_all([s for s, _ in runs_])} |")
    print()
    print(f"ray.init (connect('local')): {ray_init_s:.2f} s; Ray's own cost per image (1×2 − local): "
          f"{overhead_ms:.2f} ms")
    print(f"1080p RGB PNG ({paper['hd_png_bytes'] / 1024:.0f} KB): decode {paper['hd_decode_ms']:.1f} ms on one "
          f"core; 1080p mask PNG {paper['hd_mask_kb']:.0f} KB, overlay PNG {paper['hd_overlay_kb']:.0f} KB; "
          f"one report row {paper['report_row_us']:.1f} µs")
    figures = {
        "images": args.images, "size": args.size, "batch": args.batch, "chunk": args.chunk, "repeats": args.repeats,
        "unet_base": args.base, "cpus": os.cpu_count(), "ray_cpus": cpus,
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "ray_init_s": round(ray_init_s, 3),
        "local_per_s": round(med_local, 3), "ray_2x1_per_s": round(med["2x1"][1], 3),
        "ray_1x2_per_s": round(med["1x2"][1], 3),
        "ratio_2x1": round(med["2x1"][1] / med_local, 4), "ratio_1x2": round(med["1x2"][1] / med_local, 4),
        "startup_2x1_s": round(med["2x1"][0], 3), "startup_1x2_s": round(med["1x2"][0], 3),
        "ray_overhead_ms_per_image": round(overhead_ms, 3),
        "all_local_per_s": [round(x, 2) for x in local], "all_2x1": [[round(s, 2), round(r, 2)] for s, r in two],
        "all_1x2": [[round(s, 2), round(r, 2)] for s, r in one],
        **{k: round(v, 2) for k, v in paper.items()},
    }
    print(json.dumps(figures))


def _all(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


if __name__ == "__main__":
    main()
