"""Deciding live, measured (not asserted): a threshold-slider step → the repainted overlay on screen, and a switch to
the probability layer → the heatmap on screen, for a 1920×1080 image, in the real window (offscreen).

    QT_QPA_PLATFORM=offscreen uv run python benchmarks/decide_bench.py [--steps 21]

Each step moves the slider by 0.01 (alternately up and down), which makes the worker relabel from the kept scores
(no model run: counted), draw the display mask, judge the verdict, and the window turn the mask into its overlay
image. "worker" is the part on the inference thread; "on screen" is from the slider's move to the overlay shown.
Models: the bundled nuclei (binary, fixed 256×256 input: its scores are up-sampled to the image) and
surface_defects (4 classes at 540×960, softmax: the minimum-confidence slider). Prints medians in ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.timing import wait_signal  # noqa: E402


def _images(folder: Path) -> dict[str, Path]:
    from PIL import Image

    surface = REPO / "resources/samples/surface/surface_04_mixed.jpg"
    nuclei = np.asarray(Image.open(REPO / "resources/samples/nuclei/nuclei_01.png").convert("L"))
    tiled = np.tile(nuclei, (1080 // nuclei.shape[0] + 1, 1920 // nuclei.shape[1] + 1))[:1080, :1920]
    Image.fromarray(tiled).save(folder / "nuclei_1080p.png")
    return {"nuclei": folder / "nuclei_1080p.png", "surface_defects": surface}


def measure(model: Path, image: Path, steps: int, settings: Path) -> dict[str, float]:
    from PySide6.QtCore import QSettings

    from app.inference.image import pipeline
    from app.inference.runtime.session import LocalSession
    from app.ui.main_window import MainWindow
    from app.ui.workers import worker as worker_module

    runs, worker_ms = [], []
    originals = LocalSession.run, worker_module.decided, pipeline.relabel

    def counted(self, tensor):
        runs.append(1)
        return originals[0](self, tensor)

    def timed(function):  # the worker's parts of a retune (on its thread): relabel, then layer + verdict
        def call(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                worker_ms.append((time.perf_counter() - started) * 1000)
        return call

    LocalSession.run, worker_module.decided, pipeline.relabel = counted, timed(originals[1]), timed(originals[2])
    try:
        window = MainWindow(settings=QSettings(str(settings), QSettings.Format.IniFormat), model_path=model,
                            device="cpu")
        window.persist_settings = False
        window.show()
        window.open_model()
        wait_signal(window.model_changed)
        window.add_paths([image])
        wait_signal(window.overlay_shown)
        model_runs = len(runs)
        decision, shown = window.panel.decision, []
        threshold_worker = []
        for step in range(steps):
            worker_ms.clear()
            started = time.perf_counter()
            decision.nudge(10 if step % 2 == 0 else -10)
            wait_signal(window.tuner.retuned_shown)
            shown.append((time.perf_counter() - started) * 1000)
            threshold_worker.append(sum(worker_ms))
        heat, heat_worker = [], []
        for _ in range(max(3, steps // 3)):
            worker_ms.clear()
            for layer in ("probability", "mask"):
                started = time.perf_counter()
                decision.set_layer(layer)
                wait_signal(window.tuner.retuned_shown)
                if layer == "probability":
                    heat.append((time.perf_counter() - started) * 1000)
                    heat_worker.append(sum(worker_ms))
                worker_ms.clear()
        assert len(runs) == model_runs, "a retune ran the model"
        view = window.state.shown
        scores = view.result.scores
        window.close()
    finally:
        LocalSession.run, worker_module.decided, pipeline.relabel = originals
    return {"threshold on screen": statistics.median(shown), "threshold worker": statistics.median(threshold_worker),
            "heatmap on screen": statistics.median(heat), "heatmap worker": statistics.median(heat_worker),
            "scores kept (bytes)": float(scores.nbytes if scores is not None else 0),
            "scores shape": str(tuple(scores.shape) if scores is not None else None)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=21)
    args = parser.parse_args()
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv[:1])  # noqa: F841 - kept alive for the windows
    with tempfile.TemporaryDirectory() as tmp:
        images = _images(Path(tmp))
        print(f"{'model':<16} {'threshold→screen':>17} {'(worker)':>9} {'heatmap→screen':>15} {'(worker)':>9}  "
              "scores kept")
        for name, image in images.items():
            figures = measure(REPO / "models" / f"{name}.onnx", image, args.steps, Path(tmp) / f"{name}.ini")
            print(f"{name:<16} {figures['threshold on screen']:>17.1f} {figures['threshold worker']:>9.1f} "
                  f"{figures['heatmap on screen']:>15.1f} {figures['heatmap worker']:>9.1f}  "
                  f"{figures['scores shape']} float16 = {figures['scores kept (bytes)'] / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
