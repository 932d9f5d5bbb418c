"""What the gates cost on the hot path: a raw read or decode against the same through app.guard, side by side.

    uv run python benchmarks/gates_bench.py [--repeats 25]

Every image the viewer, a folder run or a station decodes is now opened by app.guard.untrusted (regular-only,
size checked, reads capped by a Python-level raw reader) and every model output is checked by app.guard.answers
(dtype, shape, finiteness). ORT's threads fill both cores, so each CPU-ms added around inference is taken from it.
Pairs are interleaved repeat by repeat (load from other programs falls on both alike); medians in ms and the
ratio gate / raw.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app.guard.answers import Declared, check_answer, non_finite  # noqa: E402
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted, read_untrusted  # noqa: E402


def _files(folder: Path) -> dict[str, Path]:
    from PIL import Image

    rng = np.random.default_rng(0)
    noise = rng.integers(0, 255, (1080, 1920, 3), dtype=np.uint8)
    smooth = np.repeat(np.repeat(noise[::8, ::8], 8, axis=0), 8, axis=1)[:1080, :1920]
    paths = {"png 1920×1080 RGB": folder / "frame.png", "tiff 2048² RGB (raw)": folder / "big.tif"}
    Image.fromarray(smooth).save(paths["png 1920×1080 RGB"], compress_level=1)
    Image.fromarray(rng.integers(0, 255, (2048, 2048, 3), dtype=np.uint8)).save(paths["tiff 2048² RGB (raw)"])
    return paths


def _pairs(paths: dict[str, Path]) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    from PIL import Image

    def raw_read(path: Path) -> Callable[[], object]:
        return lambda: path.read_bytes()

    def gate_read(path: Path) -> Callable[[], object]:
        return lambda: read_untrusted(path, limit=INPUT_FILE_LIMIT)

    def raw_decode(path: Path) -> Callable[[], object]:
        def run() -> object:
            with Image.open(path) as img:
                return np.asarray(img)
        return run

    def gate_decode(path: Path) -> Callable[[], object]:
        def run() -> object:
            with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle, Image.open(handle) as img:
                return np.asarray(img)
        return run

    pairs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
    for name, path in paths.items():
        pairs[f"read {name}"] = (raw_read(path), gate_read(path))
        pairs[f"decode {name}"] = (raw_decode(path), gate_decode(path))
    logits = np.random.default_rng(1).standard_normal((1, 4, 1024, 1024)).astype(np.float32)
    declared = Declared("logits", ("float32",), (None, 4, None, None))
    # raw: the finiteness check every output had before the gate (min and max); the gate adds dtype, shape, size
    pairs["check 1×4×1024² float32 logits"] = (lambda: non_finite(logits),
                                                lambda: check_answer("model.onnx", declared, logits))
    return pairs


def _time(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        pairs = _pairs(_files(Path(tmp)))
        out = io.StringIO()
        out.write("| what | raw (ms) | through the gate (ms) | gate / raw |\n|---|---:|---:|---:|\n")
        for name, (raw, gate) in pairs.items():
            raw(), gate()  # warm the page cache and the imports
            times: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.repeats):
                times[0].append(_time(raw))
                times[1].append(_time(gate))
            a, b = statistics.median(times[0]), statistics.median(times[1])
            out.write(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.2f} |\n")
    print(out.getvalue(), end="")


if __name__ == "__main__":
    main()
