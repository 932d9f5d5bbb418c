"""A/B, side by side in one process: folder-run throughput with the prefetch/writer threads at normal priority
vs lowered (`app.inference.batch.HELPER_NICENESS`), against the raw `session.run` limit.

    uv run python benchmarks/helper_priority.py --images DIR [--model models/surface_defects.onnx]
        [--runs 50] [--rounds 3] [--save mask] [--runtime KEY=VALUE ...]

Each round measures raw, then the pipeline at niceness 0, then at the default niceness (order alternates per
round). Prints every round and the medians of images/s and of pipeline ÷ raw.
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

from app.inference import batch  # noqa: E402
from app.inference.bench import raw_limit  # noqa: E402
from app.inference.runtime import parse_runtime_arguments  # noqa: E402
from app.inference.session import open_session  # noqa: E402
from app.inference.spec import load_spec  # noqa: E402
from app.io.discover import InputFile, discover  # noqa: E402


def piped(model, inputs: list[InputFile], runs: int, save: tuple[str, ...], niceness: int) -> float:
    cycled = [InputFile(inputs[k % len(inputs)].path, Path(f"{k:05d}_{inputs[k % len(inputs)].rel}"))
              for k in range(runs)]
    with tempfile.TemporaryDirectory(prefix="seglens-ab-") as scratch:
        started = time.perf_counter()
        batch.run_inputs(model, cycled, out_dir=Path(scratch), save=save, helper_niceness=niceness)
        return runs / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "surface_defects.onnx")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--save", default="mask", help="comma-separated: mask, overlay")
    parser.add_argument("--runtime", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    save = tuple(s for s in args.save.split(",") if s)
    model = open_session(load_spec(args.model), "cpu", runtime=parse_runtime_arguments(args.runtime))
    inputs = discover([args.images])
    rows: dict[str, list[float]] = {"raw": [], "pipeline, helpers niceness 0": [],
                                    f"pipeline, helpers niceness {batch.HELPER_NICENESS}": []}
    for r in range(args.rounds):
        raw = raw_limit(model, inputs, args.runs).images_per_s
        order = [0, batch.HELPER_NICENESS] if r % 2 == 0 else [batch.HELPER_NICENESS, 0]
        got = {n: piped(model, inputs, args.runs, save, n) for n in order}
        rows["raw"].append(raw)
        rows["pipeline, helpers niceness 0"].append(got[0])
        rows[f"pipeline, helpers niceness {batch.HELPER_NICENESS}"].append(got[batch.HELPER_NICENESS])
        print(f"round {r + 1}: raw {raw:.2f}/s, niceness 0 {got[0]:.2f}/s ({got[0] / raw:.2f}), "
              f"niceness {batch.HELPER_NICENESS} {got[batch.HELPER_NICENESS]:.2f}/s "
              f"({got[batch.HELPER_NICENESS] / raw:.2f})", flush=True)
    raw_median = statistics.median(rows["raw"])
    print(f"\n{args.model.name}, {len(inputs)} images, {args.runs} runs × {args.rounds} rounds, save={save or 'none'}"
          f"{', runtime ' + ' '.join(args.runtime) if args.runtime else ''}")
    print("| | images/s (median) | ÷ raw |\n|---|---|---|")
    for name, values in rows.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {median / raw_median:.2f} |")


if __name__ == "__main__":
    main()
