"""Window tests get their windows from `make_main_window`: it closes every window it made, joins its threads, and
fails the test when a QThread the window owns is still running afterwards (a leaked thread would otherwise only
show up as a crash at interpreter exit, or not at all), or when a top-level widget made during the test outlives the
windows (napari's check: a dialog nobody parented or deleted stays alive, hidden, until the process ends)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, QSettings, QThread
from PySide6.QtWidgets import QApplication

from app.ui.main_window import MainWindow
from app.ui.workers.threads import stop_thread

TIMEOUT = 20_000  # ms: model loads and first results on a slow CI machine


@pytest.fixture
def make_main_window(qtbot, tmp_path):
    """`make_main_window(model_path, device="cpu", settings="settings.ini", load=True)` → a shown MainWindow; with
    `load` (and a model), the model is loaded on the worker thread before it returns."""
    made: list[MainWindow] = []
    before = set(QApplication.topLevelWidgets())

    def make(model_path=None, *, device: str = "cpu", settings: str = "settings.ini", load: bool = True):
        window = MainWindow(settings=QSettings(str(tmp_path / settings), QSettings.Format.IniFormat),
                            model_path=model_path, device=device)
        made.append(window)
        window.show()
        if load and model_path is not None:
            with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
                window.open_model()
        return window

    yield make
    running = []
    for window in made:
        threads = window.findChildren(QThread)  # the worker pattern: every thread is owned by the window
        if not threads:
            pytest.fail("the window owns no QThread: its workers run on threads this check cannot see")
        window.close()
        leaked = [thread for thread in threads if thread.isRunning()]
        running += [thread.objectName() or repr(thread) for thread in leaked]
        for thread in leaked:  # stopped here so that one leak does not break the tests after it
            stop_thread(thread, timeout_ms=10_000, give_up_ms=60_000)
    if running:
        pytest.fail(f"QThreads still running after the window closed: {', '.join(running)}")
    leaked_widgets = _leaked_top_level_widgets(before, made)
    if leaked_widgets:
        pytest.fail(f"top-level widgets left after the window closed: {', '.join(leaked_widgets)}")


def _leaked_top_level_widgets(before: set, made: list) -> list[str]:
    """Class names of the top-level widgets made during the test that are still alive once the windows are closed
    and deleted and Qt's deferred deletions have run (each is deleted here so that the next test starts clean)."""
    for window in made:
        window.deleteLater()  # the windows themselves: their children (parented dialogs) go with them
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    QCoreApplication.processEvents()
    leaked = [widget for widget in QApplication.topLevelWidgets() if widget not in before]
    names = sorted(type(widget).__name__ for widget in leaked)
    for widget in leaked:
        widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return names
