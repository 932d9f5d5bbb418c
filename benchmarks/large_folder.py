"""A 10,000-image folder through `seglens-cli run`: bounded memory, every file reported once, in order.

    uv run python benchmarks/large_folder.py [--count 10000] [--model models/nuclei.onnx]

Generates small PNGs (a few broken ones among them), runs the CLI as a subprocess, and reports wall time,
the CLI's peak RSS, and whether the report lists every input exactly once in input (natural) order.
"""

from __future__ import annotations

import argparse
import csv
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app.io.discover import discover  # noqa: E402


def make_images(folder: Path, count: int) -> None:
    rng = np.random.default_rng(0)
    tile = rng.integers(0, 255, (96, 96), np.uint8)
    for i in range(count):
        sub = folder / f"batch_{i // 1000:02d}"
        sub.mkdir(exist_ok=True)
        if i % 997 == 13:
            (sub / f"img_{i}.png").write_bytes(b"\x89PNG broken")
        else:
            Image.fromarray(np.roll(tile, i, axis=1)).save(sub / f"img_{i}.png", compress_level=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "nuclei.onnx")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        images, out = Path(tmp) / "images", Path(tmp) / "out"
        images.mkdir()
        make_images(images, args.count)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "app.cli", "run", str(args.model), str(images), "--out", str(out)],
                              cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        with open(out / "seglens_report.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        expected = [str(f.path) for f in discover([images])]
        listed = [r["path"] for r in rows]
        masks = len(list(out.rglob("*_mask.png")))
    print(f"{args.count} images ({args.model.name}): exit {done.returncode}, {wall:.1f} s "
          f"({args.count / wall:.0f} images/s), peak RSS of the CLI {peak_mb:.0f} MB")
    print(f"report rows {len(rows)}; every input exactly once: {sorted(listed) == sorted(expected)}; "
          f"in input order: {listed == expected}; ok {sum(r['status'] == 'ok' for r in rows)}, "
          f"errors {sum(r['status'] == 'error' for r in rows)}; masks written {masks}")


if __name__ == "__main__":
    main()
