"""Screenshots of the Station view (issue 29): a station running on the bundled anomaly model over a watch folder,
the banner on an NG with the strip filled, and a stalled source's alarm.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/station_screenshots.py [OUT_DIR] [--size 1280x720]

Writes station_running.png, station_ng.png and station_stalled.png (window grabs) in OUT_DIR (default docs).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.ui import actions  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402

SAMPLES = REPO / "resources" / "samples" / "anomaly"
BAND = {"fail_if": [{"score_above": 0.88}], "review_if": [{"score_above": 0.56}]}
ORDER = ("anomaly_clean_01_metal.png", "anomaly_05_pits.png", "anomaly_clean_02_plastic.png",
         "anomaly_06_stain.png", "anomaly_04_scratch.png", "anomaly_07_mixed.png", "anomaly_08_plastic_mixed.png",
         "anomaly_clean_03_metal.png")  # the running shot ends on a part that passed


def wait(app: QApplication, done, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while not done() and time.time() < deadline:
        app.processEvents()
        time.sleep(0.01)
    if not done():
        raise SystemExit("timed out")


def station_file(folder: Path, *, stall_after_s: float | None = None) -> Path:
    (folder / "in").mkdir(parents=True, exist_ok=True)
    values = {"name": "line-3", "model": str(REPO / "models" / "surface_anomaly.onnx"), "device": "auto",
              "verdict": BAND, "source": {"watch": "in", "settle_s": 0.2}, "out": "out",
              "sinks": {"log": {}, "folder": {}}}
    if stall_after_s is not None:
        values["stall_after_s"] = stall_after_s
    path = folder / "STATION.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


def drop(folder: Path, name: str, as_name: str) -> None:
    partial = folder / f".{as_name}.part"
    shutil.copyfile(SAMPLES / name, partial)
    partial.rename(folder / as_name)


def shoot(app: QApplication, window: MainWindow, path: Path) -> None:
    end = time.time() + 0.6
    while time.time() < end:
        app.processEvents()
    window.grab().save(str(path))
    print(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(REPO / "docs"))
    parser.add_argument("--size", default="1280x720")
    args = parser.parse_args(argv)
    size = tuple(int(v) for v in args.size.split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory(prefix="seglens-station-shots-") as temp:
        root = Path(temp)
        window = MainWindow(settings=QSettings(str(root / "s.ini"), QSettings.Format.IniFormat), device="cpu")
        window.persist_settings = False
        window.resize(*size)
        window.show()
        window.open_model(REPO / "models" / "surface_anomaly.onnx")  # as `seglens` opens one: the viewer's own
        wait(app, lambda: window.summary is not None)
        controller = actions.station_controller(window)
        running = station_file(root / "a")
        controller.start(running)
        wait(app, lambda: controller.current is not None)
        strip = controller.view.strip
        for index, name in enumerate(ORDER[:-1]):
            drop(root / "a" / "in", name, f"part_{index + 1:04d}.png")
            wait(app, lambda i=index: controller.view.frame.text().startswith(f"part_{i + 1:04d}"))
        drop(root / "a" / "in", ORDER[-1], "part_0008.png")
        wait(app, lambda: controller.view.frame.text().startswith("part_0008"))
        shoot(app, window, out / "station_running.png")
        drop(root / "a" / "in", "anomaly_05_pits.png", "part_0009.png")
        wait(app, lambda: controller.view.frame.text().startswith("part_0009") and strip.count() >= 5)
        shoot(app, window, out / "station_ng.png")
        controller.stop()
        wait(app, lambda: not controller.running)
        stalled = station_file(root / "b", stall_after_s=2)
        controller.start(stalled)
        wait(app, lambda: controller.current is not None)
        drop(root / "b" / "in", "anomaly_clean_02_plastic.png", "part_0001.png")
        wait(app, lambda: "STALLED" in controller.view.alarm.text())
        time.sleep(2)
        shoot(app, window, out / "station_stalled.png")
        window.close()


if __name__ == "__main__":
    main()
