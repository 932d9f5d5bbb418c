"""A big image through a non-tiled model, stage by stage (measured, not asserted): where the work scales with the
image's size rather than the model's.

    QT_QPA_PLATFORM=offscreen uv run python benchmarks/fullres_bench.py [--width 12000] [--height 9000]
        [--format png|jpg] [--runs 3] [--model models/surface_defects.onnx]

The image is frame 3 of `benchmarks/bench_frames.py` (the surface generator, 1920×1080) enlarged to WIDTH×HEIGHT
(bilinear), written once into a temporary folder (PNG zlib 1 or JPEG q92); the model is the bundled 540×960
`surface_defects` (stretched, not tiled). Two paths, medians of RUNS in wall ms:

- viewer: the inference worker's `_view` (decode → preprocess → inference → postprocess → `view`: the display copy,
  its mask, the verdict and the legend's counts), then `overlay` (the window's indexed QImage of the display mask and
  one 512-px detail tile at full resolution);
- CLI: the same pipeline stages as the batch writer runs them (the image-sized mask made in the postprocess
  stage: the report counts every pixel), then `write` (the `_mask.png` and `_overlay.png` a
  `run --save mask,overlay` writes, encoded in memory).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

PIPELINE = ("decode", "preprocess", "inference", "postprocess")


def big_image(folder: Path, width: int, height: int, fmt: str) -> Path:
    import cv2
    from PIL import Image

    from models.training import synth

    frame, _ = synth.surface_image(synth.rng_for(4242, 3, "bench"), 1080, 1920)
    big = cv2.resize(frame, (width, height), interpolation=cv2.INTER_LINEAR)
    path = folder / f"big_{width}x{height}.{fmt}"
    Image.fromarray(big).save(path, **({"compress_level": 1} if fmt == "png" else {"quality": 92}))
    return path


def _lap(stages: dict[str, list[float]], name: str, started: float) -> float:
    now = time.perf_counter()
    stages.setdefault(name, []).append((now - started) * 1000)
    return now


def viewer_path(model_path: Path, image: Path, runs: int) -> dict[str, float]:
    """The worker's `_view` on this thread (as it runs on its own), then the window's overlay image and a tile."""
    import numpy as np

    from app.ui.state.messages import LoadRequest, ViewKey, ViewRequest
    from app.ui.widgets.detail import TILE
    from app.ui.widgets.overlay import OverlayImage, indexed_qimage
    from app.ui.workers.worker import InferenceWorker

    worker = InferenceWorker()
    worker.load_model(LoadRequest(0, str(model_path), "cpu", ""))
    stages: dict[str, list[float]] = {}
    for _ in range(runs):
        request = ViewRequest(worker._latest.issue(), ViewKey(str(image)))
        started = time.perf_counter()
        view = worker._view(request)
        total = (time.perf_counter() - started) * 1000
        for name in PIPELINE:
            stages.setdefault(name, []).append(view.result.timings[name])
        stages.setdefault("view", []).append(total - sum(view.result.timings[n] for n in PIPELINE))
        started = time.perf_counter()
        if view.class_counts is None:  # the legend's counts (panels.show_result): the worker's, else the result's
            view.result.class_pixels()
        started = _lap(stages, "legend", started)
        overlay = OverlayImage(view.display_mask, worker._model.spec.classes)
        overlay.image()
        block = view.result.labels.region(TILE, 2 * TILE, TILE, 2 * TILE)  # one detail tile (detail.DetailItem)
        indexed_qimage(np.ascontiguousarray(block), overlay.color_table(set()))
        _lap(stages, "overlay", started)
    return {name: statistics.median(values) for name, values in stages.items()}


def cli_path(model_path: Path, image: Path, runs: int) -> dict[str, float]:
    """decode → prepare → session.run → to_result → the mask and overlay PNGs (as `run --save mask,overlay`)."""
    from app.inference.image import pipeline
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.io.files import encode_png
    from app.io.render import blend_overlay

    model = open_session(load_spec(model_path), "cpu")
    stages: dict[str, list[float]] = {}
    for _ in range(runs):
        decoded, decode_ms = pipeline.decode(image)
        prepared = pipeline.prepare(model.spec, decoded, decode_ms=decode_ms)
        output, inference_ms = pipeline.infer(model, prepared)
        result = pipeline.to_result(model, prepared, output, inference_ms)
        if hasattr(pipeline, "with_mask"):  # as the batch writer: the mask it writes and counts, timed as postprocess
            result = pipeline.with_mask(result)
        for name in PIPELINE:
            stages.setdefault(name, []).append(result.timings[name])
        started = time.perf_counter()
        mask = result.mask
        encode_png(mask)
        encode_png(blend_overlay(decoded.pixels, mask, model.spec.classes))
        _lap(stages, "write", started)
    return {name: statistics.median(values) for name, values in stages.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=12000)
    parser.add_argument("--height", type=int, default=9000)
    parser.add_argument("--format", choices=("png", "jpg"), default="png")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "surface_defects.onnx")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv[:1])  # noqa: F841 (QImage and the worker's QObject want one)
    with tempfile.TemporaryDirectory() as tmp:
        image = big_image(Path(tmp), args.width, args.height, args.format)
        rows = {"viewer (worker)": viewer_path(args.model, image, args.runs),
                "CLI (mask + overlay PNG)": cli_path(args.model, image, args.runs)}
    print(f"{args.width}×{args.height} RGB {args.format.upper()}, {args.model.name}, CPU; "
          f"medians of {args.runs} runs, wall ms")
    names = [*PIPELINE, "view", "legend", "overlay", "write"]
    print("| path | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for label, m in rows.items():
        print(f"| {label} | " + " | ".join(f"{m[n]:.0f}" if n in m else "–" for n in names) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
