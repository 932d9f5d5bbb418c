"""Screenshot of Model ▸ Calibrate limits… (issue 29): the bundled anomaly model (a copy) calibrated on 60 clean and
100 defective synthetic surfaces (its own generator, as the calibration tests make them), the result shown.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/calibrate_screenshot.py [OUT.png] [--size 1280x720]

Writes the dialog's grab (default docs/calibrate_dialog.png).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.ui.controllers.calibrator import calibrator_of  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from tests.calibrate_fixtures import copy_demo, write_surfaces  # noqa: E402

OK_COUNT, NG_COUNT, SEED = 60, 100, 7


def wait(app: QApplication, done, seconds: float = 180) -> None:
    deadline = time.time() + seconds
    while not done() and time.time() < deadline:
        app.processEvents()
        time.sleep(0.01)
    if not done():
        raise SystemExit("timed out")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "docs" / "calibrate_dialog.png")
    parser.add_argument("--size", default="1280x720")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ok = write_surfaces(root / "clean parts", OK_COUNT, defective=False)
        ng = write_surfaces(root / "defective parts", NG_COUNT, defective=True)
        window = MainWindow(settings=QSettings(str(root / "settings.ini"), QSettings.Format.IniFormat),
                            model_path=copy_demo(root), device="cpu")
        window.persist_settings = False
        window.show()
        window.open_model()
        wait(app, lambda: window.state.model is not None)
        calibrator = calibrator_of(window)
        dialog = calibrator.open_dialog()
        assert dialog is not None
        dialog.set_folders(str(ok), str(ng))
        dialog.set_split(0.5, SEED)
        results: list[str] = []
        calibrator.finished.connect(results.append)
        dialog.resize(width, height)
        calibrator.calibrate()
        wait(app, lambda: bool(results))
        for _ in range(20):
            app.processEvents()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        dialog.grab().save(str(args.out))
        print(f"{args.out}: {dialog.width()}x{dialog.height()} ({results[0] or 'calibrated'})")
        window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
