"""Screenshots of the Smart tool for docs/viewer.md and for looking at it: points and a box with the
previewed proposal, the accepted proposal, and a slice a propagation reached on the CT sample.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/smart_screenshots.py [OUT_DIR] [--size 1280x720]
    DISPLAY=:99 QT_QPA_PLATFORM=xcb .venv/bin/python tools/smart_screenshots.py /tmp/shots --size 1600x960

Writes smart_proposal.png, smart_accepted.png and smart_propagated.png (window grabs) in OUT_DIR (default docs).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from PySide6.QtCore import QPointF, QSettings, Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.ui.main_window import MainWindow  # noqa: E402

SAMPLES = REPO / "resources" / "samples"


def wait(app: QApplication, done, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while not done() and time.time() < deadline:
        app.processEvents()
        time.sleep(0.005)
    if not done():
        raise SystemExit("timed out")


def settle(app: QApplication, seconds: float = 0.3) -> None:
    end = time.time() + seconds
    while time.time() < end:
        app.processEvents()


def window_on(app: QApplication, settings: Path, model: str, inputs: Path, size: tuple[int, int]) -> MainWindow:
    window = MainWindow(settings=QSettings(str(settings), QSettings.Format.IniFormat),
                        model_path=REPO / "models" / model, device="cpu")
    window.persist_settings = False
    window.resize(*size)
    window.show()
    shown: list[object] = []
    window.overlay_shown.connect(shown.append)
    window.open_model()
    window.add_paths([inputs])
    wait(app, lambda: bool(shown))
    return window


def smart_ready(app: QApplication, window: MainWindow):
    QTest.keyClick(window, Qt.Key.Key_S)
    smart = window.editor.smart
    wait(app, lambda: smart.model_ready is not None)
    return smart


def click(app, window, smart, x: float, y: float, button=Qt.MouseButton.LeftButton) -> None:
    got: list[object] = []
    smart.proposal_shown.connect(lambda *a: got.append(a))
    QTest.mouseClick(window.viewer.viewport(), button, Qt.KeyboardModifier.NoModifier,
                     window.viewer.mapFromScene(QPointF(x + 0.5, y + 0.5)))
    wait(app, lambda: bool(got))
    smart.proposal_shown.disconnect()
    settle(app)


def drag(app, window, smart, a: tuple[float, float], b: tuple[float, float]) -> None:
    viewer, got = window.viewer, []
    smart.proposal_shown.connect(lambda *args: got.append(args))
    at = [viewer.mapFromScene(QPointF(x + 0.5, y + 0.5)) for x, y in (a, ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2), b)]
    QTest.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at[0])
    QTest.mouseMove(viewer.viewport(), at[1])
    QTest.mouseMove(viewer.viewport(), at[2])
    QTest.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at[2])
    wait(app, lambda: bool(got))
    smart.proposal_shown.disconnect()
    settle(app)


def nuclei(app: QApplication, tmp: Path, out: Path, size: tuple[int, int]) -> None:
    window = window_on(app, tmp / "n.ini", "nuclei.onnx", SAMPLES / "nuclei" / "nuclei_01.png", size)
    smart = smart_ready(app, window)
    window.viewer.zoom_by(3.0 / window.viewer.zoom())  # 300 %, on the nucleus: the markers and the edge readable
    window.viewer.centerOn(183.5, 95.5)
    settle(app)
    # the bright nucleus at (183, 95), which the nuclei model covers only in part: a box round it, a click inside
    # and a negative click outside
    drag(app, window, smart, (170, 82), (197, 109))
    click(app, window, smart, 183, 95)
    click(app, window, smart, 168, 111, Qt.MouseButton.RightButton)
    window.grab().save(str(out / "smart_proposal.png"))
    QTest.keyClick(window, Qt.Key.Key_Return)
    settle(app)
    window.grab().save(str(out / "smart_accepted.png"))
    window.editor.stop()
    window.close()


def ct(app: QApplication, tmp: Path, out: Path, size: tuple[int, int]) -> None:
    window = window_on(app, tmp / "c.ini", "ct_demo.onnx", SAMPLES / "ct", size)
    shown: list[object] = []
    window.overlay_shown.connect(shown.append)
    window.show_path(window.files.current_path(), 15)
    wait(app, lambda: bool(shown))
    smart = smart_ready(app, window)
    click(app, window, smart, 90, 120)  # the right lung (image left)
    QTest.keyClick(window, Qt.Key.Key_Return)
    settle(app)
    QTest.keyClick(window, Qt.Key.Key_PageDown, Qt.KeyboardModifier.AltModifier)
    propagation = smart.propagation
    wait(app, lambda: propagation is not None and not propagation.running, 120)
    settle(app, 1.0)
    shown.clear()
    window.show_path(window.files.current_path(), 21)
    wait(app, lambda: bool(shown))
    retuned: list[object] = []
    window.tuner.retuned_shown.connect(retuned.append)
    window.panel.decision.set_layer("difference")  # what slice 22's propagated correction added to the model
    wait(app, lambda: bool(retuned))
    settle(app, 0.5)
    window.grab().save(str(out / "smart_propagated.png"))
    window.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "docs")
    parser.add_argument("--size", default="1280x720")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    app = QApplication(sys.argv[:1])
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")  # the corrections go to a scratch review folder
        nuclei(app, Path(tmp), args.out, size)
        ct(app, Path(tmp), args.out, size)
    print(f"screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
