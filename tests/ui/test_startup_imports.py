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
         "app.inference.image.pipeline", "app.runs.review.log", "app.runs.outputs.images",
         "app.runs.outputs.report", "app.runs.privacy.deidentify")
# what the first paint does not need ("Start-up after issue 25"): seglens builds it after that paint
LATE = ("app.ui.workers.worker", "app.ui.workers.worker_batch", "app.ui.workers.worker_volumes",
        "app.ui.workers.windowing", "app.runs.folder.plan", "app.ui.widgets.decision", "app.ui.widgets.charts",
        "app.ui.widgets.edit_panel", "app.ui.widgets.review_panel", "app.ui.widgets.three_plane",
        *(f"app.ui.controllers.{name}" for name in ("comparer", "editor", "loader", "pictures", "references",
                                                     "reporter", "reviewer", "run_all", "tuner", "volume3d",
                                                     "volume_view")))


def _run_fresh(args: list[str], tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2],
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen", "SEGLENS_LOG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _loaded_in_fresh_process(code: str, tmp_path: Path, modules: tuple[str, ...] = HEAVY) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))\n"
    return json.loads(_run_fresh(["-c", probe], tmp_path))


LOADED = f"sorted(m for m in {HEAVY + LATE!r} if m in sys.modules)"


def _launched_up_to_show(tmp_path: Path, shows: str = LOADED) -> str:
    """`seglens` as launched, up to the window's show(): logging set up, the icon, settings, the window built; then
    prints `shows` (what is loaded, by default) as JSON."""
    return f"""
from app.ui import app as viewer
from app.ui.main_window import MainWindow
def shown(window):
    print(json.dumps({shows}), flush=True)
    import os
    os._exit(0)  # at once
MainWindow.show = shown
viewer.main(["--settings", {str(tmp_path / "s.ini")!r}])
"""


def test_the_viewer_shows_its_window_before_any_heavy_module(tmp_path: Path) -> None:
    assert [m for m in _loaded_in_fresh_process(_launched_up_to_show(tmp_path), tmp_path) if m in HEAVY] == []


def test_the_viewer_shows_its_window_before_the_parts_its_first_paint_does_not_need(tmp_path: Path) -> None:
    """The groups hidden at start, the controllers, the worker and the three-plane view: built after the first
    paint (MainWindow.finish), so their modules are not imported before show() either."""
    assert _loaded_in_fresh_process(_launched_up_to_show(tmp_path), tmp_path) == []


def test_the_viewer_shows_its_window_before_making_the_qt_namespace_or_qstyle(tmp_path: Path) -> None:
    """PySide6 makes a Python type with all its enums on a Qt class's first use: the `Qt` namespace (~93 enum types,
    ~10 ms), QStyle (~4 ms) and QKeySequence (the menus' shortcuts, ~0.5 ms), which a bare window never makes, wait
    for the first paint (app/ui/widgets/lazy_qt.py; the toolbar's standard icons come with MainWindow.finish)."""
    made = ("[n for n in ('Qt', 'QStyle', 'QKeySequence')"
            " if any(n in vars(sys.modules[f'PySide6.{m}']) for m in ('QtCore', 'QtGui', 'QtWidgets'))]")
    assert json.loads(_run_fresh(["-c", f"import json, sys\n{_launched_up_to_show(tmp_path, made)}"], tmp_path)) == []


def test_the_viewer_shows_its_window_before_naming_or_opening_its_log_file(tmp_path: Path) -> None:
    """platformdirs (it imports tempfile, random and shutil) names the log folder after the first paint, and the
    file is opened then (app.logs.hold_records): nothing of it before show()."""
    state = tmp_path / "state"
    made = "['platformdirs' in sys.modules, __import__('os').path.exists(" + repr(str(state)) + ")]"
    done = subprocess.run([sys.executable, "-c", f"import json, sys\n{_launched_up_to_show(tmp_path, made)}"],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
                          env={**{k: v for k, v in os.environ.items() if k != "SEGLENS_LOG_DIR"},
                               "QT_QPA_PLATFORM": "offscreen", "XDG_STATE_HOME": str(state)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [False, False]


def test_what_is_logged_before_the_first_paint_reaches_the_log_file_in_order(tmp_path: Path) -> None:
    """The records held until the file opens are written into it, first: the window's start-up line among them."""
    outcome = json.loads(_run_fresh(["-m", "app", "--self-test", "--settings", str(tmp_path / "s.ini")], tmp_path))
    assert outcome["ok"] is True, outcome
    lines = (tmp_path / "seglens.log").read_text(encoding="utf-8").splitlines()
    shown = [i for i, line in enumerate(lines) if "app.ui: window shown after" in line]
    model = [i for i, line in enumerate(lines) if "app.ui.workers.worker: model surface_defects.onnx on" in line]
    assert len(shown) == 1 and len(model) == 1, lines
    assert shown[0] < model[0], lines  # held before the first paint, written before what came after it


def test_an_uncaught_exception_before_the_first_paint_opens_the_log_file_and_writes_what_was_held(
        tmp_path: Path, monkeypatch, capfd) -> None:
    import logging

    from PySide6.QtCore import qInstallMessageHandler

    from app import logs
    from app.ui import app as ui_app

    monkeypatch.setenv("SEGLENS_LOG_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    root = logging.getLogger()
    before = list(root.handlers)
    held = logs.hold_records(logging.INFO)
    try:
        logging.getLogger("app.ui").info("held line")
        assert not (tmp_path / "seglens.log").exists()  # not yet opened
        ui_app._install_error_handlers(held.open_file)
        try:
            raise RuntimeError("boom")
        except RuntimeError as exc:
            sys.excepthook(RuntimeError, exc, exc.__traceback__)
        text = (tmp_path / "seglens.log").read_text(encoding="utf-8")
        assert text.index("held line") < text.index("uncaught exception: RuntimeError")
        assert f"(log: {tmp_path / 'seglens.log'})" in capfd.readouterr().err  # sys.__stderr__
    finally:
        qInstallMessageHandler(None)
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()


def test_the_self_test_shows_the_first_overlay_through_the_parts_built_after_the_first_paint(tmp_path: Path) -> None:
    """`seglens --self-test` end to end: window, first paint, the rest of the window, the model, the first sample's
    overlay painted."""
    outcome = json.loads(_run_fresh(["-m", "app", "--self-test", "--settings", str(tmp_path / "s.ini")], tmp_path))
    assert outcome["ok"] is True, outcome
    assert outcome["overlay_painted"] is True
    assert outcome["image"].endswith("surface_01_scratches.jpg")


def test_listing_a_folder_before_the_model_is_ready_imports_nothing_heavy(tmp_path: Path) -> None:
    """The samples listed and the first one selected while the model loads (as at start-up): the review panel's
    empty state needs no review module (it imported app.runs.review.log, and with it OpenCV, Pillow and the whole
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


def _described(window) -> dict:
    """What a reader can see and reach in a window: the side panel's groups in order and which are hidden, the menus'
    actions with their shortcuts and check marks, the toolbar, the threads running."""
    from PySide6.QtCore import QThread

    def menu(actions) -> list:
        return [(a.text(), [k.toString() for k in a.shortcuts()], a.isCheckable() and a.isChecked(),
                 menu(a.menu().actions()) if a.menu() is not None else None) for a in actions]

    layout = window.panel.layout()
    panel = [(type(item.widget()).__name__, item.widget().isHidden()) if item.widget() else "stretch"
             for item in (layout.itemAt(i) for i in range(layout.count()))]
    return {"panel": panel, "menus": menu(window.menuBar().actions()),
            "toolbar": [a.text() for a in window.toolbar.actions()],
            "threads": sorted(t.objectName() for t in window.findChildren(QThread) if t.isRunning()),
            "size": (window.width(), window.height()), "opacity": window.state.overlay.opacity}


def _built(qtbot, tmp_path: Path, *, finish_later: bool) -> dict:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QWidget

    from app.ui.first_paint import after_first_paint
    from app.ui.main_window import MainWindow

    settings = QSettings(str(tmp_path / f"{finish_later}.ini"), QSettings.Format.IniFormat)
    settings.setValue("opacity", 0.7)
    window = MainWindow(settings=settings, device="cpu", finish_later=finish_later)
    window.persist_settings = False
    try:
        window.show()
        if finish_later:
            assert "EditPanel" not in [type(w).__name__ for w in window.panel.findChildren(QWidget)]
            finished: list[bool] = []
            after_first_paint(window, lambda: (window.finish(), finished.append(True)))
            qtbot.waitUntil(lambda: bool(finished), timeout=5_000)
        return _described(window)
    finally:
        window.close()
        window.deleteLater()


def test_a_window_finished_after_its_first_paint_is_the_window_built_at_once(qtbot, tmp_path: Path) -> None:
    at_once = _built(qtbot, tmp_path, finish_later=False)
    assert _built(qtbot, tmp_path, finish_later=True) == at_once
    assert at_once["threads"] == ["display", "inference"]
    assert at_once["opacity"] == 0.7
    assert [name for name, _hidden in at_once["panel"][:5]] == ["QLabel", "OverlayControls", "EditPanel",
                                                                "ReviewPanel", "DecisionControls"]


def _frames(qtbot, tmp_path: Path, *, finish_later: bool):
    """The window's pixels as its first paint left them (before finish(), for a window finished later), the same
    after finish(), and where the toolbar's buttons with an icon are (window coordinates: x, y, width, height)."""
    from PySide6.QtCore import QSettings

    from app.ui.first_paint import after_first_paint
    from app.ui.main_window import MainWindow
    from app.ui.toolbar import STANDARD_ICONS

    settings = QSettings(str(tmp_path / f"frame-{finish_later}.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings, device="cpu", finish_later=finish_later)
    window.persist_settings = False
    try:
        window.show()
        frames: list = []
        after_first_paint(window, lambda: frames.append(window.grab().toImage()))
        qtbot.waitUntil(lambda: bool(frames), timeout=5_000)
        window.finish()
        qtbot.wait(50)  # the panel's groups added by finish() laid out
        buttons = [window.toolbar.widgetForAction(a) for a in window.toolbar.actions() if a.text() in STANDARD_ICONS]
        boxes = [(b.mapTo(window, b.rect().topLeft()).x(), b.mapTo(window, b.rect().topLeft()).y(), b.width(),
                  b.height()) for b in buttons]
        return frames[0], window.grab().toImage(), boxes
    finally:
        window.close()
        window.deleteLater()


def _pixels(image):
    import numpy as np
    from PySide6.QtGui import QImage

    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())[
        :, :image.width() * 4].reshape(image.height(), image.width(), 4).copy()  # a copy: the image goes


def test_the_first_paint_of_a_window_finished_later_is_that_of_one_built_at_once_but_the_icons(qtbot,
                                                                                              tmp_path: Path) -> None:
    """Finished, every pixel is that of a window built at once; in the first frame, only the toolbar's five icons
    are still blank (app/ui/toolbar.py): the buttons, their text and everything else are in place."""
    import numpy as np

    first, finished, boxes = _frames(qtbot, tmp_path, finish_later=True)
    at_once, _same, at_once_boxes = _frames(qtbot, tmp_path, finish_later=False)
    assert finished.size() == first.size() == at_once.size()
    assert finished == at_once  # every pixel: menu titles, toolbar, the panel's visible groups, the status bar
    assert boxes == at_once_boxes and len(boxes) == 5
    changed = np.any(_pixels(first) != _pixels(at_once), axis=2)
    for x, y, width, height in boxes:
        assert changed[y:y + height, x:x + width].any()  # the icon, drawn one frame later
        changed[y:y + height, x:x + width] = False
    assert not changed.any()  # nothing else
