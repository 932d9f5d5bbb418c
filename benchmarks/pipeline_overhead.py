"""How much the pipeline adds around inference, per stage, for a 1920×1080 image.

    uv run python benchmarks/pipeline_overhead.py [--runs 15] [--model PATH]

Without --model it builds a small UNet-shaped model (benchmarks/unet_onnx.py). It runs two working sizes
side by side in one process: the image's own size (1920×1080 → padded to 1920×1088) and a 960×544 working
size (sidecar `input.size`), which is how the bundled demo model runs. Prints medians in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from unet_onnx import build_unet

from app.inference.image import pipeline
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session


def sample_image(rng: np.random.Generator) -> np.ndarray:
    """A textured 1920×1080 RGB image with some structure (PNG/JPEG sizes like real photos)."""
    y, x = np.mgrid[0:1080, 0:1920]
    base = 120 + 40 * np.sin(x / 90.0) + 30 * np.cos(y / 70.0)
    noise = rng.normal(0, 12, (1080, 1920, 3))
    return np.clip(base[..., None] + noise + [0, 10, 20], 0, 255).astype(np.uint8)


def measure(model_path: Path, files: dict[str, Path], runs: int) -> dict[str, float]:
    model = open_session(load_spec(model_path), "cpu")
    stages: dict[str, list[float]] = {}
    for _ in range(runs):
        for kind, path in files.items():
            result = pipeline.run_path(model, path)
            stages.setdefault(f"decode_{kind}", []).append(result.timings["decode"])
            for stage in ("preprocess", "inference", "postprocess"):
                stages.setdefault(stage, []).append(result.timings[stage])
    return {stage: statistics.median(values) for stage, values in stages.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--model", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        image = sample_image(np.random.default_rng(0))
        files = {"png": folder / "frame.png", "jpeg": folder / "frame.jpg"}
        Image.fromarray(image).save(files["png"])
        Image.fromarray(image).save(files["jpeg"], quality=92)
        model = args.model or build_unet(folder / "unet.onnx")
        configs = {"native 1920×1080": None, "working 960×544": "input:\n  size: [544, 960]\n"}
        rows = []
        for label, sidecar in configs.items():
            target = folder / f"m_{len(rows)}.onnx"
            target.write_bytes(Path(model).read_bytes())
            if sidecar:
                target.with_suffix(".yaml").write_text(sidecar)
            rows.append((label, measure(target, files, args.runs)))
    print(f"model: {args.model or 'UNet-shaped, base 16, 4 classes (benchmarks/unet_onnx.py)'}; "
          f"image 1920×1080 RGB; medians of {args.runs} runs per decode format (CPU)")
    header = "| working size | decode PNG | decode JPEG | preprocess | inference | postprocess | (pre+post)/inference |"
    print(header)
    print("|---|---|---|---|---|---|---|")
    for label, m in rows:
        ratio = (m["preprocess"] + m["postprocess"]) / m["inference"]
        print(f"| {label} | {m['decode_png']:.1f} | {m['decode_jpeg']:.1f} | {m['preprocess']:.1f} | "
              f"{m['inference']:.1f} | {m['postprocess']:.1f} | {ratio:.1%} |")


if __name__ == "__main__":
    main()
