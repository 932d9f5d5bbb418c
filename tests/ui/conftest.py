"""Window tests get their windows from `make_main_window`: it closes every window it made, joins its threads, and
fails the test when a QThread the window owns is still running afterwards (a leaked thread would otherwise only
show up as a crash at interpreter exit, or not at all)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, QThread

from app.ui.main_window import MainWindow
from app.ui.workers.threads import stop_thread

TIMEOUT = 20_000  # ms: model loads and first results on a slow CI machine


@pytest.fixture
def make_main_window(qtbot, tmp_path):
    """`make_main_window(model_path, device="cpu", settings="settings.ini", load=True)` → a shown MainWindow; with
    `load` (and a model), the model is loaded on the worker thread before it returns."""
    made: list[MainWindow] = []

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
