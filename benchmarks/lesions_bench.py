"""3D connected components (app.inference.decide.lesions) of a CT-sized mask, against scipy.ndimage.label (issue 26).

    uv run python benchmarks/lesions_bench.py [--shape 300 512 512] [--spheres 300] [--repeats 3] [--seed 0]

A [D, H, W] uint8 mask with `--spheres` balls of radius 2-12 voxels at random places, half of them class 1 and half
class 2 (some touch or overlap, so fewer components than balls); then, side by side in one process, `--repeats`
times each (medians): `lesions()` at 6- and 26-connectivity over both classes, and scipy.ndimage.label of each
class's boolean mask (what lesions() replaces; scipy is a dev dependency only). The two must find the same
component sizes. Prints a Markdown table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from scipy import ndimage

from app.inference.decide.lesions import lesions

T = TypeVar("T")


def phantom(shape: tuple[int, int, int], spheres: int, seed: int) -> np.ndarray:
    """The mask: balls of two classes (a later ball paints over an earlier one)."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(shape, np.uint8)
    for n in range(spheres):
        radius = int(rng.integers(2, 13))
        centre = [int(rng.integers(radius, size - radius)) for size in shape]
        box = tuple(slice(c - radius, c + radius + 1) for c in centre)
        k, r, c = np.ogrid[-radius:radius + 1, -radius:radius + 1, -radius:radius + 1]
        mask[box][k * k + r * r + c * c <= radius * radius] = 1 + n % 2
    return mask


def timed(run: Callable[[], T], repeats: int) -> tuple[float, float, T]:
    """The median wall and CPU seconds (every thread of the process: OpenCV labels in parallel) of `repeats` calls,
    and the last call's answer. CPU time says more than wall time on a shared, loaded machine."""
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        out = run()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=(300, 512, 512))
    parser.add_argument("--spheres", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    mask = phantom(tuple(args.shape), args.spheres, args.seed)
    rows, figures = [], {"shape": list(args.shape), "foreground_voxels": int(np.count_nonzero(mask))}
    for connectivity in (6, 26):
        structure = ndimage.generate_binary_structure(3, 1 if connectivity == 6 else 3)
        ours, ours_cpu, found = timed(lambda c=connectivity: lesions(mask, voxel_ml=0.001, connectivity=c),
                                      args.repeats)
        theirs, theirs_cpu, labelled = timed(
            lambda s=structure: [ndimage.label(mask == c, structure=s)[0] for c in (1, 2)], args.repeats)
        sizes = sorted(les.voxels for les in found)
        reference = sorted(int(s) for lab in labelled for s in np.bincount(lab.ravel())[1:])
        assert sizes == reference, "lesions() and scipy.ndimage.label disagree"
        rows.append(f"| {connectivity} | {len(sizes)} | {ours * 1000:.0f} ({ours_cpu * 1000:.0f}) | "
                    f"{theirs * 1000:.0f} ({theirs_cpu * 1000:.0f}) |")
        figures[f"c{connectivity}"] = {"components": len(sizes), "lesions_ms": round(ours * 1000),
                                       "lesions_cpu_ms": round(ours_cpu * 1000), "scipy_ms": round(theirs * 1000),
                                       "scipy_cpu_ms": round(theirs_cpu * 1000)}
    print(f"mask {' × '.join(map(str, args.shape))}, {figures['foreground_voxels']} foreground voxels, "
          f"{args.spheres} balls of 2 classes; medians of {args.repeats}")
    print("| connectivity | components | lesions() ms wall (CPU) | scipy.ndimage.label, both classes, ms wall (CPU) |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
