"""Write 1920×1080 benchmark frames: realistic inspection images from the project's surface generator
(`models/training/synth.py`, numpy + OpenCV only) or the noisy pattern `seglens-cli bench` generates.

    uv run python benchmarks/bench_frames.py OUT_DIR [--count 50] [--kind surface|noise] [--format png|jpg]

Seed 4242 (never used for training, evaluation or the samples). PNGs use zlib level 1, JPEGs quality 92.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SEED = 4242


def write_frames(out: Path, count: int, kind: str = "surface", fmt: str = "png") -> list[Path]:
    """`count` 1920×1080 frames in `out`: surface-generator frames (PNG zlib 1 / JPEG q92) or the noisy pattern."""
    out.mkdir(parents=True, exist_ok=True)
    if kind == "noise":
        from app.runs.bench.pipeline import synthetic_images

        return [f.path for f in synthetic_images(out, (1080, 1920), count=count, seed=SEED)]
    from PIL import Image

    from models.training import synth

    paths = []
    for i in range(count):
        image, _ = synth.surface_image(synth.rng_for(SEED, i, "bench"), 1080, 1920)
        path = out / f"frame_{i:03d}.{fmt}"
        Image.fromarray(image).save(path, **({"compress_level": 1} if fmt == "png" else {"quality": 92}))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--kind", choices=["surface", "noise"], default="surface")
    parser.add_argument("--format", choices=["png", "jpg"], default="png")
    args = parser.parse_args()
    write_frames(args.out, args.count, args.kind, args.format)
    print(f"{args.count} frames in {args.out}")


if __name__ == "__main__":
    main()
