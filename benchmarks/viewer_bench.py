"""Viewer responsiveness, measured (not asserted): launch → window, launch → first overlay, the event loop's
longest stall during "Run on all", and the cost of painting a 1920×1080 overlay.

    QT_QPA_PLATFORM=offscreen uv run python benchmarks/viewer_bench.py [--launches 5] [--images 100]
    DISPLAY=:99 QT_QPA_PLATFORM=xcb uv run python benchmarks/viewer_bench.py --only launch --launches 9 \
        [--compare /tmp/before]

Launch times are measured from spawning the process (interpreter start included), side by side with a bare
PySide6 window in the same run; `--compare TREE` adds SegLens from another source tree (before/after in the same
rounds, alternating). On an X server (Xvfb: `Xvfb :99 -screen 0 1920x1080x24 &`) each window is also polled
from outside (benchmarks/x_poll.py): "window visible" is when another client first sees it mapped, "window
shown" what the process itself reports right after show(). Prints medians in milliseconds and the ratios to the
bare window of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BARE_WINDOW = """
import time, sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication(sys.argv[:1]); w = QMainWindow(); w.resize(800, 600); w.show(); app.processEvents()
print(time.time(), flush=True)
QTimer.singleShot(int(sys.argv[1]), app.quit); app.exec()  # kept open until an X poll has seen it
"""
BARE = "bare PySide6 window"


def launch_times(runs: int, settings: Path, trees: dict[str, Path]) -> dict[str, object]:
    """Each round launches the bare window, then SegLens from each tree (`--compare`: another checkout, same
    interpreter), in an order that alternates between rounds; medians of each. Under X (DISPLAY set, xcb) every
    window is also polled from outside: "visible" is the first poll that saw it mapped, what a user sees."""
    from x_poll import XPoller, available

    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
    poll = env["QT_QPA_PLATFORM"] == "xcb" and available()
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in (BARE, *trees)}
    providers = {}
    with XPoller() if poll else _NoPoller() as x:
        for tree in trees.values():  # once each, not counted: bytecode caches written, files in the page cache
            _launch_seglens(tree, settings, env, x)
        for round_ in range(runs):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            _add(samples[BARE], _launch_bare(env, x, linger_ms=10_000 if poll else 0))
            for name in order:
                times, providers[name] = _launch_seglens(trees[name], settings, env, x)
                _add(samples[name], times)
    bare_shown = statistics.median(samples[BARE]["window shown"])
    results: dict[str, object] = {"X poll": "yes" if poll else "no (set DISPLAY and QT_QPA_PLATFORM=xcb)"}
    for name, measures in samples.items():
        for measure, values in measures.items():
            results[f"{name}: {measure}"] = statistics.median(values)
        if name != BARE:
            results[f"{name}: window shown ÷ bare"] = statistics.median(measures["window shown"]) / bare_shown
            for measure in ("window visible (X poll)", "window painted (X poll)"):
                if poll and measure in measures and measure in samples[BARE]:
                    results[f"{name}: {measure.split(' (')[0]} ÷ bare"] = (
                        statistics.median(measures[measure]) / statistics.median(samples[BARE][measure]))
            results[f"{name}: provider"] = providers[name]
    return results


class _NoPoller:
    def __enter__(self):
        return None

    def __exit__(self, *_exc) -> None:
        pass


def _add(into: dict[str, list[float]], times: dict[str, float]) -> None:
    for key, value in times.items():
        into.setdefault(key, []).append(value)


def _add_seen(times: dict[str, float], seen, started: float) -> None:
    if seen is not None:
        times["window visible (X poll)"] = (seen.mapped - started) * 1000
        if seen.painted is not None:
            times["window painted (X poll)"] = (seen.painted - started) * 1000


def _launch_bare(env: dict[str, str], x, *, linger_ms: int) -> dict[str, float]:
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-c", BARE_WINDOW, str(linger_ms)], env=env, stdout=subprocess.PIPE,
                            text=True)
    times = {}
    if x is not None:
        _add_seen(times, x.wait_visible(proc.pid, timeout=60, alive=lambda: proc.poll() is None), started)
    shown = float(proc.stdout.readline().strip())
    proc.kill()  # our own child: its work is done
    proc.communicate()
    times["window shown"] = (shown - started) * 1000
    return times


def _launch_seglens(tree: Path, settings: Path, env: dict[str, str], x) -> tuple[dict[str, float], str]:
    # `-m app` from the tree's root: that tree's `app` comes first on sys.path (the current directory)
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "app", "--self-test", "--settings", str(settings)], cwd=tree,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    times = {}
    if x is not None:
        _add_seen(times, x.wait_visible(proc.pid, timeout=120, alive=lambda: proc.poll() is None), started)
    out, err = proc.communicate(timeout=300)
    lines = out.strip().splitlines()
    if not lines:
        raise SystemExit(f"{tree}: the self-test printed nothing: {err.strip()[-2000:]}")
    data = json.loads(lines[-1])
    times["window shown"] = (data["window_shown_unix"] - started) * 1000
    times["first overlay"] = (data["first_overlay_unix"] - started) * 1000
    return times, data.get("provider", "?")


class EventLoopGaps:
    """Within the block, a 5 ms timer's tick-to-tick intervals: any long one is the event loop stalling."""

    def __enter__(self):
        from PySide6.QtCore import QElapsedTimer, QTimer

        self.gaps: list[float] = []
        self._clock = QElapsedTimer()
        self._clock.start()
        self._last = self._clock.nsecsElapsed()
        self._timer = QTimer()
        self._timer.setInterval(5)
        self._timer.timeout.connect(self._tick)
        self._timer.start()
        return self

    def _tick(self) -> None:
        now = self._clock.nsecsElapsed()
        self.gaps.append((now - self._last) / 1e6)
        self._last = now

    def __exit__(self, *_exc) -> None:
        self._tick()
        self._timer.stop()


def run_all_stall(count: int, folder: Path) -> dict[str, float]:
    import numpy as np
    from PIL import Image
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.paths import default_model
    from app.ui.main_window import MainWindow

    images = folder / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 255, (480, 640, 3), np.uint8)).save(images / f"img_{i:03d}.jpg", quality=90)
    app = QApplication.instance() or QApplication([])
    window = MainWindow(settings=QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat),
                        model_path=default_model(), device="cpu")
    window.show()
    loop_done = {"ready": False, "shown": False, "finished": False}
    window.model_changed.connect(lambda _s: loop_done.update(ready=True))
    window.overlay_shown.connect(lambda _p: loop_done.update(shown=True))
    window.run_all_finished.connect(lambda *_: loop_done.update(finished=True))
    window.open_model()
    while not loop_done["ready"]:
        app.processEvents()
    # the folder is listed and its first image shown before the run starts (that stall is measured on its own)
    with EventLoopGaps() as opening:
        window.add_paths([images])
        while not loop_done["shown"]:
            app.processEvents()
    with EventLoopGaps() as running:
        started = time.perf_counter()
        window.run_all(folder / "export")
        while not loop_done["finished"]:
            app.processEvents()
        elapsed = time.perf_counter() - started
    window.close()
    gaps = running.gaps
    return {"images": count, "open folder → first overlay, longest gap ms": max(opening.gaps),
            "run on all seconds": elapsed, "longest event-loop gap ms": max(gaps),
            "p99 gap ms": float(np.percentile(gaps, 99)), "timer interval ms": 5}


def overlay_paint_cost(runs: int) -> dict[str, float]:
    import numpy as np
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.inference.model.spec import ClassInfo
    from app.ui.main_window import MainWindow
    from app.ui.widgets.overlay import OverlayImage, image_to_qimage

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(settings=QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat))
        window.resize(1600, 1000)
        window.show()
        rng = np.random.default_rng(0)
        image = rng.integers(0, 255, (1080, 1920, 3), np.uint8)
        mask = np.zeros((1080, 1920), np.uint8)
        for label in (1, 2, 3):
            for _ in range(30):
                y, x = rng.integers(0, 1000), rng.integers(0, 1840)
                mask[y:y + 80, x:x + 80] = label
        classes = [ClassInfo("background", None)] + [ClassInfo(f"c{i}", (200, 50 * i, 0)) for i in (1, 2, 3)]
        window.viewer.set_image(image_to_qimage(image), (1920, 1080))
        app.processEvents()
        new_mask, toggle = [], []
        for _ in range(runs):
            started = time.perf_counter()
            overlay = OverlayImage(mask, classes)
            window.viewer.set_overlay(overlay.image())
            window.viewer.viewport().repaint()
            new_mask.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            window.viewer.set_overlay(overlay.image(hidden={2}))
            window.viewer.viewport().repaint()
            toggle.append((time.perf_counter() - started) * 1000)
        window.close()
    return {"new 1920×1080 mask → painted ms": statistics.median(new_mask),
            "class toggle → repainted ms": statistics.median(toggle)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--paint-runs", type=int, default=20)
    parser.add_argument("--only", choices=("launch", "paint", "run-all"), help="measure one section only")
    parser.add_argument("--compare", type=Path, action="append", default=[], metavar="TREE",
                        help="also launch SegLens from this source tree (e.g. a `git worktree` of an older commit), "
                             "alternating with this one in the same rounds")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    trees = {"SegLens": REPO, **{f"SegLens@{tree.name}": tree.resolve() for tree in args.compare}}
    with tempfile.TemporaryDirectory() as tmp:
        sections = {
            "launch": (f"launch (median of {args.launches})",
                       lambda: launch_times(args.launches, Path(tmp) / "s.ini", trees)),
            "paint": (f"overlay painting (median of {args.paint_runs})", lambda: overlay_paint_cost(args.paint_runs)),
            "run-all": ("run on all", lambda: run_all_stall(args.images, Path(tmp))),
        }
        results = {title: measure() for key, (title, measure) in sections.items() if args.only in (None, key)}
    for section, values in results.items():
        print(f"## {section}")
        for key, value in values.items():
            print(f"  {key:<50} {value:.2f}" if isinstance(value, float) and value < 10 else
                  f"  {key:<50} {value:.1f}" if isinstance(value, float) else f"  {key:<50} {value}")


if __name__ == "__main__":
    main()
