"""A/B, side by side in one process: folder-run throughput against the raw `session.run` limit, with the
prefetch/writer threads at normal or lowered priority (`app.runs.folder.batch.HELPER_NICENESS`).

    uv run python benchmarks/helper_priority.py --images DIR [--model models/surface_defects.onnx]
        [--runs 40] [--rounds 4] [--save mask] [--runtime KEY=VALUE ...]

Every round measures raw, then each variant in a rotated order. Prints every round and the medians of images/s
and of (variant ÷ raw of the same round).
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

from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.runtime.options import parse_runtime_arguments  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402
from app.io.discover import InputFile, discover  # noqa: E402
from app.runs.bench.pipeline import raw_limit  # noqa: E402
from app.runs.folder import batch  # noqa: E402
from app.runs.folder.plan import RunPlan  # noqa: E402

VARIANTS = {  # name: niceness of the prefetch and writer threads
    "helpers niceness 0": 0,
    f"helpers niceness {batch.HELPER_NICENESS} (default)": batch.HELPER_NICENESS,
    "helpers niceness 19": 19,
}


def piped(model, inputs: list[InputFile], runs: int, save: tuple[str, ...], niceness: int) -> float:
    cycled = [InputFile(inputs[k % len(inputs)].path, Path(f"{k:05d}_{inputs[k % len(inputs)].rel}"))
              for k in range(runs)]
    with tempfile.TemporaryDirectory(prefix="seglens-ab-") as scratch:
        started = time.perf_counter()
        plan = RunPlan(spec=model.spec, inputs=tuple(cycled), out=Path(scratch), save=tuple(save))
        batch.run_inputs(model, plan, helper_niceness=niceness)
        return runs / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "surface_defects.onnx")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--save", default="mask", help="comma-separated: mask, overlay")
    parser.add_argument("--runtime", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    save = tuple(s for s in args.save.split(",") if s)
    model = open_session(load_spec(args.model), "cpu", runtime=parse_runtime_arguments(args.runtime))
    inputs = discover([args.images])
    names = list(VARIANTS)
    speed: dict[str, list[float]] = {"raw": [], **{n: [] for n in names}}
    ratio: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        raw = raw_limit(model, inputs, args.runs).images_per_s
        speed["raw"].append(raw)
        line = [f"round {r + 1}: raw {raw:.2f}/s"]
        for name in names[r % len(names):] + names[: r % len(names)]:
            got = piped(model, inputs, args.runs, save, VARIANTS[name])
            speed[name].append(got)
            ratio[name].append(got / raw)
            line.append(f"{name} {got:.2f}/s ({got / raw:.2f})")
        print("; ".join(line), flush=True)
    print(f"\n{args.model.name}, {len(inputs)} images in {args.images.name}, {args.runs} runs × {args.rounds} rounds, "
          f"save={','.join(save) or 'none'}{', runtime ' + ' '.join(args.runtime) if args.runtime else ''}")
    print("| | images/s (median) | ÷ raw (median of rounds) |\n|---|---|---|")
    print(f"| raw session.run | {statistics.median(speed['raw']):.2f} | 1.00 |")
    for name in names:
        print(f"| pipeline, {name} | {statistics.median(speed[name]):.2f} | {statistics.median(ratio[name]):.2f} |")


if __name__ == "__main__":
    main()
