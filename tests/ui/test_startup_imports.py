"""What the GUI thread imports before the window shows and before the model is ready stays light (docs/PERFORMANCE.md,
"Start-up after issue 24"): numpy alone is ~60–90 ms, and the inference stack imported on the GUI thread while the
worker imports the same modules holds the GIL and the import locks the worker waits for.

Each check runs in a fresh interpreter: this process has long imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# pushed out of the window's start-up; numpy, Pillow and YAML load on the worker with the model
HEAVY = ("numpy", "cv2", "onnxruntime", "PIL", "yaml", "pydicom", "nibabel", "highdicom", "ray", "dicognito",
         "app.inference.pipeline", "app.runs.review", "app.runs.outputs",
         "app.runs.report", "app.runs.deidentify")


def _loaded_in_fresh_process(code: str, tmp_path: Path) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2],
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen", "SEGLENS_LOG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_viewer_shows_its_window_before_any_heavy_module(tmp_path: Path) -> None:
    """`seglens` as launched, up to the window's show(): logging set up, the icon, settings, every widget built."""
    code = f"""
from app.ui import app as viewer
from app.ui.main_window import MainWindow
def shown(window):
    print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), flush=True)
    import os
    os._exit(0)  # at once: the window's threads are running
MainWindow.show = shown
viewer.main(["--settings", {str(tmp_path / "s.ini")!r}])
"""
    assert _loaded_in_fresh_process(code, tmp_path) == []


def test_listing_a_folder_before_the_model_is_ready_imports_nothing_heavy(tmp_path: Path) -> None:
    """The samples listed and the first one selected while the model loads (as at start-up): the review panel's
    empty state needs no review module (it imported app.runs.review, and with it OpenCV, Pillow and the whole
    inference stack, on the GUI thread)."""
    code = f"""
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
application = QApplication(sys.argv[:1])
from app.paths import default_model, default_samples
from app.ui.main_window import MainWindow
window = MainWindow(settings=QSettings({str(tmp_path / "s.ini")!r}, QSettings.Format.IniFormat),
                    model_path=default_model(), device="cpu")
window.show()
window.add_paths([default_samples()])
assert window.files.current_path(), "the first sample is selected"
window.close()
"""
    assert _loaded_in_fresh_process(code, tmp_path) == []
