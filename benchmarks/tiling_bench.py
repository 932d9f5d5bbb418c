"""Tiled inference (issue 16): the full tiled pipeline vs raw `session.run` on the same tile batches, and the
peak RSS of a 16384×16384 tiled run.

    uv run python benchmarks/tiling_bench.py [--size 4096] [--batch 4] [--runs 3] [--rss-size 16384]

The nuclei demo model (models/nuclei.onnx: fixed 256×256 gray, binary, dynamic batch) is tiled with the
defaults (overlap 0.25, gaussian) over a synthetic fluorescence-like image. "raw" runs `session.run` on the
very tile tensors the pipeline makes, prepared beforehand; "pipeline" is `pipeline.run_image` (model pixels,
tile tensors, runs, blending, the mask, kept scores, postprocess). The RSS figure comes from a child process
(`resource.getrusage(RUSAGE_SELF).ru_maxrss`), so it is that run's alone; the baseline is the child's RSS once
the session is open and the image made, before the run (VmRSS, current).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app.inference.image import pipeline, tiling  # noqa: E402
from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402

MODEL = REPO / "models" / "nuclei.onnx"


def synthetic(size: int, seed: int = 0) -> np.ndarray:
    """Gray, dark background with noise and ~1 nucleus-like bright disc per 40×40 pixels."""
    rng = np.random.default_rng(seed)
    image = rng.integers(10, 31, (size, size), dtype=np.uint8)  # uint8 noise: no float image at 16384²
    count = size * size // 1600
    for y, x, r in zip(rng.integers(0, size, count), rng.integers(0, size, count), rng.integers(3, 9, count),
                       strict=True):
        cv2.circle(image, (int(x), int(y)), int(r), int(rng.integers(120, 230)), -1)
    return cv2.GaussianBlur(image, (5, 5), 1.2, dst=image)


def tiled_session(batch: int):
    spec = tiling.with_tiling(load_spec(MODEL), True)
    return open_session(spec, "cpu"), batch


def raw_batches(model, image: np.ndarray, batch: int) -> list[np.ndarray]:
    return [tensor for *_, tensor in pipeline.tile_batches(model.spec.input, image, batch)]


def throughput(size: int, batch: int, runs: int) -> dict:
    model, batch = tiled_session(batch)
    image = synthetic(size)
    batches = raw_batches(model, image, batch)
    tiles = sum(len(b) for b in batches)
    session = model._session
    raw, full = [], []
    pipeline.run_image(model, image, batch=batch)  # warm both paths once
    for _ in range(runs):
        started = time.perf_counter()
        for tensor in batches:
            session.run(None, {model.spec.input.name: tensor})
        raw.append(tiles / (time.perf_counter() - started))
        started = time.perf_counter()
        result = pipeline.run_image(model, image, batch=batch)
        full.append(tiles / (time.perf_counter() - started))
    nuclei = cv2.connectedComponents(result.mask, connectivity=8)[0] - 1
    return {"size": size, "batch": batch, "tiles": tiles, "raw_tiles_per_s": statistics.median(raw),
            "pipeline_tiles_per_s": statistics.median(full),
            "ratio": statistics.median(full) / statistics.median(raw), "nuclei_found": nuclei,
            "kept_scores": list(result.scores.shape)}


def rss_child(size: int, batch: int, min_area: int | None) -> None:
    model, batch = tiled_session(batch)
    if min_area is not None:  # the sidecar's postprocess.min_area labels the whole mask's components (int32)
        model.spec = replace(model.spec, postprocess=replace(model.spec.postprocess, min_area=min_area))
    image = synthetic(size)
    baseline = _current_rss_mb()
    started = time.perf_counter()
    result = pipeline.run_image(model, image, batch=batch)
    print(json.dumps({"size": size, "batch": batch, "min_area": model.spec.postprocess.min_area,
                      "seconds": time.perf_counter() - started,
                      "baseline_rss_mb": baseline, "peak_rss_mb": _rss_mb(),
                      "kept_scores": list(result.scores.shape), "mask": list(result.mask.shape)}))


def _current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rss-size", type=int, default=16384, help="0: skip the RSS run")
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--min-area", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child, args.batch, args.min_area)
        return
    for batch in sorted({1, args.batch}):
        row = throughput(args.size, batch, args.runs)
        print(f"{row['size']}² batch {batch}: {row['tiles']} tiles, raw {row['raw_tiles_per_s']:.1f} tiles/s, "
              f"pipeline {row['pipeline_tiles_per_s']:.1f} tiles/s, ratio {row['ratio']:.2f}; "
              f"{row['nuclei_found']} nuclei, kept scores {row['kept_scores']}")
    for min_area in ((None, 0) if args.rss_size else ()):  # the sidecar's min_area 20, then none
        extra = [] if min_area is None else ["--min-area", str(min_area)]
        child = subprocess.run([sys.executable, __file__, "--rss-child", str(args.rss_size), "--batch",
                                str(args.batch), *extra], capture_output=True, text=True, check=True)
        row = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{row['size']}² tiled run, min_area {row['min_area']}: {row['seconds']:.1f} s, peak RSS "
              f"{row['peak_rss_mb']:.0f} MB (baseline {row['baseline_rss_mb']:.0f} MB: session + image), "
              f"kept scores {row['kept_scores']}")


if __name__ == "__main__":
    main()
