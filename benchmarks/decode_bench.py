"""PNG decoders side by side on the project's frames: CPU-ms and wall-ms per image, medians (issue 16).

    uv run python benchmarks/decode_bench.py [--count 8] [--repeats 5] [--dir DIR]

Frames: 1920×1080 surface-generator frames (`benchmarks/bench_frames.py`, PNG zlib level 1) as RGB, as 8-bit gray
and as 16-bit gray; the noisy pattern `seglens-cli bench` generates; and the bundled PNG samples. Decoders (each
skipped where its package is missing): `read_image` (the app's path, whatever it is now), Pillow
(`np.asarray(Image.open)`), OpenCV (`cv2.imdecode`, IMREAD_UNCHANGED), pyspng (libspng) and imagecodecs'
`png_decode` (libpng over zlib-ng) and `spng_decode`. Decoders are interleaved file by file, so load from other
programs falls on all of them alike. Then a GIL check: 20 frames decoded by 2 threads vs serially (wall).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from app.io.images import read_image  # noqa: E402


def decoders() -> dict[str, Callable[[Path], object]]:
    import cv2
    from PIL import Image

    def pillow(path: Path):
        with Image.open(path) as img:
            return np.asarray(img)

    found: dict[str, Callable[[Path], object]] = {
        "read_image (app)": lambda p: read_image(p).pixels,
        "Pillow": pillow,
        "OpenCV": lambda p: cv2.imdecode(np.fromfile(p, np.uint8), cv2.IMREAD_UNCHANGED),
    }
    try:
        import pyspng

        found["pyspng"] = lambda p: pyspng.load(p.read_bytes())
    except ImportError:
        pass
    try:
        import imagecodecs

        found["imagecodecs png (zlib-ng)"] = lambda p: imagecodecs.png_decode(p.read_bytes())
        found["imagecodecs spng"] = lambda p: imagecodecs.spng_decode(p.read_bytes())
    except ImportError:
        pass
    return found


def frame_sets(folder: Path, count: int) -> dict[str, list[Path]]:
    from bench_frames import write_frames
    from PIL import Image

    rgb = write_frames(folder / "rgb", count, "surface", "png")
    gray, deep = [], []
    for path in rgb:
        with Image.open(path) as img:
            luma = np.asarray(img.convert("L"))
        gray.append(folder / f"gray_{path.name}")
        Image.fromarray(luma).save(gray[-1], compress_level=1)
        deep.append(folder / f"deep_{path.name}")
        Image.fromarray(luma.astype(np.uint16) * 257 + np.uint16(3)).save(deep[-1], compress_level=1)
    samples = sorted((REPO / "resources" / "samples").rglob("*.png"))
    return {"surface RGB 1080p": rgb, "surface gray 1080p": gray, "surface 16-bit gray 1080p": deep,
            "noise RGB 1080p (bench)": write_frames(folder / "noise", count, "noise"),
            f"samples ({len(samples)} PNGs)": samples}


def measure(paths: list[Path], funcs: dict[str, Callable], repeats: int) -> dict[str, tuple[float, float]]:
    cpu: dict[str, list[float]] = {name: [] for name in funcs}
    wall: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(repeats):
        for path in paths:
            for name, func in funcs.items():
                w0, c0 = time.perf_counter(), time.thread_time()
                try:
                    func(path)
                except Exception:  # a decoder that declines the file (imagecodecs' spng on 16-bit gray)
                    cpu[name].append(float("nan"))
                    continue
                cpu[name].append((time.thread_time() - c0) * 1e3)
                wall[name].append((time.perf_counter() - w0) * 1e3)
    return {name: (statistics.median(cpu[name]), statistics.median(wall[name])) if wall[name] else None
            for name in funcs}


def gil_check(paths: list[Path], funcs: dict[str, Callable]) -> dict[str, tuple[float, float]]:
    out = {}
    for name, func in funcs.items():
        t0 = time.perf_counter()
        for path in paths:
            func(path)
        serial = time.perf_counter() - t0
        with ThreadPoolExecutor(2) as pool:
            t0 = time.perf_counter()
            list(pool.map(func, paths))
            threaded = time.perf_counter() - t0
        out[name] = (serial * 1e3, threaded * 1e3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=8, help="frames per 1080p set")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="where to write the frames (default: a temporary folder)")
    args = parser.parse_args()
    funcs = decoders()
    with tempfile.TemporaryDirectory() as tmp:
        sets = frame_sets(args.dir or Path(tmp), args.count)
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        names = list(funcs)
        print("| frames | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 1) + "|")
        for label, paths in sets.items():
            result = measure(paths, funcs, args.repeats)
            cells = [f"{result[n][0]:.1f} ({result[n][1]:.1f})" if result[n] else "fails" for n in names]
            print(f"| {label} | " + " | ".join(cells) + " |")
        print("(median CPU-ms of the decoding thread per image, wall-ms in brackets)")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        rgb = (sets["surface RGB 1080p"] * 20)[:20]
        print("\n20 surface RGB frames, wall-ms: serial vs 2 threads")
        print("| decoder | serial | 2 threads | speed-up |")
        print("|---|---|---|---|")
        for name, (serial, threaded) in gil_check(rgb, funcs).items():
            print(f"| {name} | {serial:.0f} | {threaded:.0f} | {serial / threaded:.2f}× |")
        print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
