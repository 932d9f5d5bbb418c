"""CPU cost of each stage of a folder run around `session.run`, per image — what the pipeline takes away from
inference when the machine has no spare core.

    uv run python benchmarks/stage_costs.py [--model models/surface_defects.onnx] [--runs 15] [--images DIR]

Without --images it writes three 1920×1080 frames (`benchmarks/bench_frames.py`): a realistic inspection frame
from the project's surface generator as PNG and as JPEG (quality 92), and the noisy sine pattern
`seglens-cli bench` generates. Each stage runs on one
thread and is timed with `time.thread_time()` (CPU seconds of that thread); inference is timed by wall clock
with ONNX Runtime's default threads. Prints medians in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from app.inference.image import pipeline  # noqa: E402
from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402
from app.io.files import encode_png  # noqa: E402
from app.io.render import blend_overlay  # noqa: E402


def frames(folder: Path) -> dict[str, Path]:
    """Frame 3 of benchmarks/bench_frames.py (1920×1080) as PNG and JPEG, and the noisy pattern `bench` makes."""
    from bench_frames import write_frames

    return {"surface PNG": write_frames(folder / "png", 4, "surface", "png")[3],
            "surface JPEG q92": write_frames(folder / "jpg", 4, "surface", "jpg")[3],
            "noise PNG (bench)": write_frames(folder / "noise", 1, "noise")[0]}


def measure(model, path: Path, runs: int) -> dict[str, float]:
    spec = model.spec
    stages: dict[str, list[float]] = {}
    clock = [0.0]

    def lap(name: str) -> None:
        now = time.thread_time()
        stages.setdefault(name, []).append((now - clock[0]) * 1000)
        clock[0] = now

    for _ in range(runs):
        clock[0] = time.thread_time()

        image = pipeline.decode(path)[0]
        lap("decode")
        prepared = pipeline.prepare(spec, image)
        lap("preprocess")
        started = time.perf_counter()
        output = model.run(prepared.tensor)
        inference_ms = (time.perf_counter() - started) * 1000
        stages.setdefault("inference (wall)", []).append(inference_ms)
        clock[0] = time.thread_time()
        result = pipeline.to_result(model, prepared, output, inference_ms)
        lap("postprocess")
        encode_png(result.mask)
        lap("mask PNG")
        encode_png(blend_overlay(image.pixels, result.mask, spec.classes))
        lap("overlay blend+PNG")
    return {name: statistics.median(values) for name, values in stages.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "surface_defects.onnx")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--images", type=Path, help="use these images instead of the generated frames")
    args = parser.parse_args()
    model = open_session(load_spec(args.model), "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        files = ({p.name: p for p in sorted(args.images.iterdir()) if p.is_file()} if args.images
                 else frames(Path(tmp)))
        rows = {label: measure(model, path, args.runs) for label, path in files.items()}
    print(f"model {args.model.name}, CPU; medians of {args.runs}; CPU ms of one thread per stage")
    names = list(next(iter(rows.values())))
    print("| image | " + " | ".join(names) + " | CPU around inference (masks) |")
    print("|---" * (len(names) + 2) + "|")
    for label, m in rows.items():
        around = m["decode"] + m["preprocess"] + m["postprocess"] + m["mask PNG"]
        print(f"| {label} | " + " | ".join(f"{m[n]:.1f}" for n in names) + f" | {around:.1f} |")


if __name__ == "__main__":
    main()
