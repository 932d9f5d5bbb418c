"""What measuring a mask against its ground truth costs per 1080p image (issue 15): `image_metrics` (one
bincount confusion matrix → per-class IoU/Dice/precision/recall), the viewer's `difference_map` and
`disagreement_map`, and reading a reference PNG (`read_reference`), each on 1920×1080 label maps with 4 classes.

    uv run python benchmarks/metrics_bench.py [--runs 21]

Synthetic maps: blobs of classes 1–3 on background (seed 15), the reference a shifted copy with 2 % of the pixels
relabelled. Prints median wall ms per image.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.inference.decide.metrics import difference_map, disagreement_map, image_metrics
from app.io.files import encode_png
from app.io.references import read_reference
from benchmarks.timing import median_ms

HW, CLASSES = (1080, 1920), 4


def label_maps(seed: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """(prediction, reference): blocky class regions, the reference shifted and partly relabelled."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, CLASSES, (HW[0] // 40, HW[1] // 40)).astype(np.uint8)
    coarse[rng.random(coarse.shape) < 0.5] = 0  # mostly background
    pred = np.kron(coarse, np.ones((40, 40), np.uint8))
    ref = np.roll(pred, (7, -5), axis=(0, 1))
    noise = rng.random(HW) < 0.02
    ref[noise] = rng.integers(0, CLASSES, int(noise.sum()))
    return pred, ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    pred, ref = label_maps()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "ref.png"
        path.write_bytes(encode_png(ref))
        figures = {
            "image_metrics (4 classes)": median_ms(lambda: image_metrics(pred, ref, CLASSES), args.runs),
            "difference_map (all classes)": median_ms(lambda: difference_map(pred, ref), args.runs),
            "difference_map (one class)": median_ms(lambda: difference_map(pred, ref, 1), args.runs),
            "disagreement_map": median_ms(lambda: disagreement_map(pred, ref), args.runs),
            "read_reference (PNG)": median_ms(lambda: read_reference(path, CLASSES), args.runs),
        }
    print(f"1920×1080 label maps, {CLASSES} classes, median of {args.runs} runs:")
    for name, ms in figures.items():
        print(f"  {name:<30} {ms:7.1f} ms")


if __name__ == "__main__":
    main()
