"""Big images in the viewer, measured (not asserted): one pan or zoom frame at 1:1 on a SIDE×SIDE image — the
viewport repainted with the full-resolution tiles (app/ui/widgets/detail.py) — in the real window (offscreen).

    QT_QPA_PLATFORM=offscreen uv run python benchmarks/bigimage_bench.py [--side 20000] [--frames 40]

The image is gray, a sample of the nuclei demo tiled to SIDE×SIDE (written once as PNG into a temporary folder),
run through the nuclei model (its mask up-sampled to full size), opened at 1:1 and panned by 192 px a frame (new
tiles come into view every few frames, as when dragging), then zoomed in and out around 1:1. Target: a pan/zoom
frame ≤ 30 ms. SEGLENS_MAX_MEGAPIXELS is raised for the run (20000² = 400 MP; the default guard is 250 MP).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.timing import wait_signal  # noqa: E402


def big_image(folder: Path, side: int) -> Path:
    import cv2
    from PIL import Image

    sample = np.asarray(Image.open(REPO / "resources/samples/nuclei/nuclei_01.png").convert("L"))
    reps = -(-side // sample.shape[0]), -(-side // sample.shape[1])
    path = folder / f"big_{side}.png"
    cv2.imwrite(str(path), np.tile(sample, reps)[:side, :side], [cv2.IMWRITE_PNG_COMPRESSION, 1])
    return path


def frames(viewer, count: int) -> tuple[list[float], list[float]]:
    pan, zoom = [], []
    bar = viewer.horizontalScrollBar()
    for _ in range(count):
        started = time.perf_counter()
        bar.setValue(bar.value() + 192)
        viewer.viewport().repaint()
        pan.append((time.perf_counter() - started) * 1000)
    for i in range(count):
        started = time.perf_counter()
        viewer.zoom_by(1.25 if i % 2 == 0 else 0.8)
        viewer.viewport().repaint()
        zoom.append((time.perf_counter() - started) * 1000)
    return pan, zoom


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=20000)
    parser.add_argument("--frames", type=int, default=40)
    args = parser.parse_args()
    os.environ["SEGLENS_MAX_MEGAPIXELS"] = str(args.side * args.side / 1e6 + 1)
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as tmp:
        path = big_image(Path(tmp), args.side)
        window = MainWindow(settings=QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat),
                            model_path=REPO / "models/nuclei.onnx", device="cpu")
        window.persist_settings = False
        window.resize(1600, 950)
        window.show()
        window.open_model()
        wait_signal(window.model_changed)
        started = time.perf_counter()
        window.add_paths([path])
        wait_signal(window.overlay_shown, 300_000)
        opened = time.perf_counter() - started
        viewer = window.viewer
        viewer.actual_size()
        viewer.centerOn(args.side / 3, args.side / 3)
        viewer.viewport().repaint()
        pan, zoom = frames(viewer, args.frames)
        tiles = viewer.detail.painted_tiles
        window.close()
    p95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))]  # noqa: E731
    print(f"{args.side}×{args.side} gray, nuclei mask: opened (decode + model + overview) in {opened:.1f} s; "
          f"at 1:1 in a 1600×950 window ({tiles} tiles on screen)")
    print(f"  pan frame  median {statistics.median(pan):.1f} ms, p95 {p95(pan):.1f} ms ({args.frames} frames)")
    print(f"  zoom frame median {statistics.median(zoom):.1f} ms, p95 {p95(zoom):.1f} ms ({args.frames} frames)")
    del app
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
