"""Soak: thousands of inferences through the pipeline (and the viewer path), sampling the process's RSS.

    uv run python benchmarks/soak.py [--count 2000] [--model models/nuclei.onnx] [--viewer 300]

After warm-up (the first 10% of the runs) RSS must not grow by more than 5%: no leaks from sessions, buffers,
or Qt images. Prints the samples and the growth; exit code 1 if it grew more than 5%.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.inference.runtime.telemetry import process_rss_mb
from app.io.discover import InputFile
from app.runs.bench.pipeline import synthetic_images
from app.runs.folder.batch import run_inputs
from app.runs.folder.plan import Callbacks, RunPlan


def pipeline_soak(model_path: Path, count: int, folder: Path) -> list[tuple[int, float]]:
    model = open_session(load_spec(model_path), "cpu")
    images = synthetic_images(folder, (512, 512), count=16)
    inputs = [InputFile(images[k % 16].path, Path(f"{k:05d}.png")) for k in range(count)]
    samples: list[tuple[int, float]] = []

    def progress(outcome, summary) -> None:
        done = summary.ok + summary.failed
        if done % max(1, count // 20) == 0:
            samples.append((done, process_rss_mb() or 0.0))

    run_inputs(model, RunPlan(spec=model.spec, inputs=tuple(inputs), out=folder / "out", save=("mask", "overlay")),
               progress=Callbacks(outcome=progress))
    return samples


def viewer_soak(model_path: Path, count: int, folder: Path) -> list[tuple[int, float]]:
    """Step through images in the real window `count` times (results, QImages, overlays, cache)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    window = MainWindow(settings=QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat),
                        model_path=model_path, device="cpu")
    window.show()
    shown = {"n": 0, "ready": False}
    window.model_changed.connect(lambda _s: shown.update(ready=True))
    window.overlay_shown.connect(lambda _p: shown.update(n=shown["n"] + 1))
    window.open_model()
    while not shown["ready"]:
        app.processEvents()
    images = folder / "viewer"
    images.mkdir()
    synthetic_images(images, (512, 512), count=40)  # more than the cache holds: every step is a new result
    window.add_paths([images])
    samples = []
    for step in range(count):
        target = shown["n"] + 1
        window.files.setCurrentRow((step + 1) % window.files.count())
        while shown["n"] < target:
            app.processEvents()
        if step % max(1, count // 20) == 0:
            samples.append((step, process_rss_mb() or 0.0))
    window.close()
    return samples


def growth(samples: list[tuple[int, float]]) -> float:
    after_warmup = [rss for n, rss in samples if n >= samples[-1][0] * 0.1]
    return (after_warmup[-1] - after_warmup[0]) / after_warmup[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--viewer", type=int, default=300, help="steps through the viewer (0 = skip)")
    parser.add_argument("--model", type=Path, default=Path("models/nuclei.onnx"))
    args = parser.parse_args()
    verdicts = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("pipeline", pipeline_soak, args.count)]
        if args.viewer:
            runs.append(("viewer", viewer_soak, args.viewer))
        for name, soak, count in runs:
            folder = Path(tmp) / name
            folder.mkdir()
            samples = soak(args.model, count, folder)
            grew = growth(samples)
            verdicts.append(grew <= 0.05)
            print(f"{name}: {count} inferences, RSS MB at " +
                  ", ".join(f"{n}:{rss:.0f}" for n, rss in samples))
            print(f"{name}: RSS after warm-up {samples[1][1]:.0f} MB → end {samples[-1][1]:.0f} MB, "
                  f"growth {grew:+.1%} ({'OK' if grew <= 0.05 else 'OVER 5%'})")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
