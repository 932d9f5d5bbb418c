"""Open the viewer on IMAGES, wait for the first overlay, save a grab of the window (and of the X screen).

    python tools/grab_window.py OUT.png SETTINGS.ini IMAGE... [--then-screen SCREEN.png]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication

from app.paths import default_model
from app.ui.main_window import MainWindow


def main() -> int:
    args = sys.argv[1:]
    screen = None
    if "--then-screen" in args:
        index = args.index("--then-screen")
        screen = args[index + 1]
        args = args[:index] + args[index + 2:]
    out, settings, images = args[0], args[1], args[2:]
    app = QApplication(sys.argv[:1])
    window = MainWindow(settings=QSettings(settings, QSettings.Format.IniFormat), model_path=default_model(),
                        device="auto")
    window.persist_settings = False
    window.resize(1600, 960)
    window.show()

    def grab(_path: str) -> None:
        def save() -> None:
            window.grab().save(out)
            if screen:
                subprocess.run(["import", "-window", "root", screen], check=False)
            window.close()
            app.quit()

        QTimer.singleShot(600, save)

    window.overlay_shown.connect(grab)
    window.open_model()
    window.add_paths(images)
    QTimer.singleShot(120_000, app.quit)
    app.exec()
    return 0 if Path(out).is_file() else 1


if __name__ == "__main__":
    sys.exit(main())
