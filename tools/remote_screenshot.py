"""Screenshots of the viewer's remote device (issue 30): the bundled nuclei model served by the Open Inference
Protocol mock (tests/remote_mocks.py, on loopback, a bearer token), opened through Model ▸ Device ▸ Remote server…,
on a bundled sample.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/remote_screenshot.py [OUT_DIR] [--size 1280x720]

Writes remote_device.png (the window) and remote_dialog.png (the dialog after Test connection) in OUT_DIR
(default docs).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402
from remote_mocks import MockServer  # noqa: E402

from app.ui import actions  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402

NUCLEI = REPO / "models" / "nuclei.onnx"
SAMPLE = REPO / "resources" / "samples" / "nuclei" / "nuclei_02_dense.png"
TOKEN = "demo-token"


def wait(app: QApplication, done, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while not done() and time.time() < deadline:
        app.processEvents()
        time.sleep(0.01)
    if not done():
        raise SystemExit("timed out")


def settle(app: QApplication) -> None:
    for _ in range(30):
        app.processEvents()
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "docs")
    parser.add_argument("--size", default="1280x720")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    app = QApplication.instance() or QApplication([])
    import keyring
    from keyring.backends.null import Keyring

    keyring.set_keyring(Keyring())  # never the user's keyring
    with tempfile.TemporaryDirectory() as tmp, MockServer(NUCLEI, name="nuclei", token=TOKEN, device="CPU") as server:
        window = MainWindow(settings=QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat),
                            model_path=NUCLEI, device="cpu")
        window.persist_settings = False
        window.resize(width, height)
        window.show()
        window.open_model()
        wait(app, lambda: window.state.model is not None)
        window.add_paths([SAMPLE])
        wait(app, lambda: window.state.on_screen is not None)
        dialog = actions.remote_controller(window).open_dialog()
        dialog.url.setText(server.grpc_url)
        dialog.model.setText("nuclei")
        dialog.auth.setCurrentIndex(dialog.auth.findData("bearer"))
        dialog.token.setText(TOKEN)
        dialog.remember.setChecked(True)
        dialog.test_button.click()
        wait(app, lambda: dialog.answer.text().startswith(("ready", "remote")))
        settle(app)
        args.out.mkdir(parents=True, exist_ok=True)
        dialog.grab().save(str(args.out / "remote_dialog.png"))
        dialog.ok_button.click()
        wait(app, lambda: window.state.model is not None and window.state.model.info.remote is not None)
        wait(app, lambda: "network+queue" in window.status.latency.text())
        settle(app)
        window.grab().save(str(args.out / "remote_device.png"))
        print(f"{args.out}: window {window.width()}x{window.height()}, dialog {dialog.width()}x{dialog.height()}: "
              f"{window.status.provider.text()} | {window.status.latency.text()}")
        window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
