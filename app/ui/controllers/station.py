"""Station ▸ Start station… / Stop: a station (app.runs.station.run) run from a station file in the viewer, and its
Station view (app.ui.widgets.station_view) as a page of the window's central area beside the normal viewer.

Made on first use (by actions.py): nothing of it exists before the reader asks for a station. Each start makes a
StationWorker on its own QThread (the station's loop blocks it for the shift; app.ui.workers.station_worker); the
window's inference worker is not touched, so the viewer goes on working on its own pictures meanwhile. The live
numbers are asked of the station 4 times a second (thread-safe), so a stall shows while no frame comes. A thumbnail
clicked opens the strip's frames in the normal viewer, that one shown, with the station's model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QTimer, Signal

if TYPE_CHECKING:
    from PySide6.QtCore import QThread
    from PySide6.QtWidgets import QLabel, QMainWindow, QStackedWidget

    from app.runs.station.file import StationFile
    from app.runs.station.stats import StationStats
    from app.ui.state.station_messages import StationEnded, StationOpened, StationPicture
    from app.ui.widgets.station_view import StationView
    from app.ui.workers.station_worker import StationWorker

log = logging.getLogger(__name__)

STATUS_MS = 15_000
TICK_MS = 250  # the live numbers (and a stall) 4 times a second


class StationController(QObject):
    run_requested = Signal(object)  # StationFile, to the station worker
    opened = Signal(object)  # StationOpened: the station runs
    ended = Signal(object)  # StationEnded: it has ended (its thread joined)

    def __init__(self, *, host: QMainWindow, status, recent, open_paths: Callable[[list[str | Path]], None],
                 select_path: Callable[[str], None], model_path: Callable[[], Path | None],
                 open_model: Callable[[Path], None], parent: QObject | None = None) -> None:
        """`host`: the window (its central area gets the Station view as a page; its close ends the station);
        `recent`: the recent station files (app.ui.recent.RecentList); `open_paths`, `select_path`: open files in
        the viewer and show one; `model_path`, `open_model`: the viewer's model, and open another."""
        super().__init__(parent)
        self._host, self._status, self.recent = host, status, recent
        self._open_paths, self._select_path = open_paths, select_path
        self._model_path, self._open_model = model_path, open_model
        self._pages: QStackedWidget | None = None
        self._view: StationView | None = None
        self.worker: StationWorker | None = None
        self.station_thread: QThread | None = None
        self._opened: StationOpened | None = None
        self._badge: QLabel | None = None  # the status bar's word of the station while the viewer is shown
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)
        host.installEventFilter(self)

    @property
    def running(self) -> bool:
        return self.station_thread is not None

    @property
    def current(self) -> StationOpened | None:
        """The station that runs (or ran last) once its session is open; None while it opens."""
        return self._opened

    @property
    def view(self) -> StationView:
        """The Station view (made, and put in the window's central area, on first use)."""
        if self._view is None:
            from PySide6.QtWidgets import QStackedWidget

            from app.ui.widgets.station_view import StationView

            self._view = view = StationView()
            view.stop_clicked.connect(self.stop)
            view.images_clicked.connect(self.show_images)
            view.thumb_opened.connect(self.open_frame)
            self._pages = pages = QStackedWidget()
            images = self._host.takeCentralWidget()  # the viewer's splitter, kept whole as page 0
            assert images is not None  # the window made it before any controller
            pages.addWidget(images)
            pages.addWidget(view)
            self._host.setCentralWidget(pages)
        return self._view

    # -- Station ▸ … -----------------------------------------------------------------------------------------

    def start(self, path: str | Path) -> bool:
        """Start the station of the file at `path`; False (and one line why) when it cannot."""
        if self.running:
            self._say("A station is running: stop it first (Station ▸ Stop station)", error=True)
            return False
        from app.errors import SegLensError
        from app.runs.station.file import read_station_file

        try:
            station_file = read_station_file(Path(path))
        except SegLensError as exc:
            self._say(str(exc), error=True)
            return False
        self.recent.add(path)
        self._run(station_file)
        return True

    def stop(self) -> None:
        """End the running station after the frame being judged (its thread ends once the sinks are closed)."""
        if self.worker is None:
            self._status.showMessage("No station is running", STATUS_MS)
            return
        self.worker.stop()
        self._status.showMessage("Stopping the station…", STATUS_MS)

    def show_station(self) -> None:
        self._show(1)

    def show_images(self) -> None:
        self._show(0)

    def toggle(self) -> None:
        """Between the Station view and the normal viewer."""
        if self._view is None:
            self._status.showMessage("No station yet: Station ▸ Start station… opens a station file", STATUS_MS)
            return
        self._show(0 if self.showing_station else 1)

    @property
    def showing_station(self) -> bool:
        return self._pages is not None and self._pages.currentIndex() == 1

    def open_frame(self, path: Path | None) -> None:
        """Open the strip's frames in the normal viewer, `path` shown, with the station's model."""
        if path is None:
            self._say("No file was kept for that frame: add `folder: {}` to the station's sinks to keep NG and "
                      "REVIEW copies")
            return
        if not path.is_file():
            self._say(f"{path.name} is no longer in the output folder (removed by the folder sink's retention, or "
                      "it could not be written: see the alarm)", error=True)
            return
        opened = self._opened
        if opened is not None and self._model_path() != opened.model:
            self._open_model(opened.model)
        listed = [p for p in self.view.strip.paths() if p.is_file()]
        self._open_paths([*listed] if path in listed else [path, *listed])
        self._select_path(str(path))
        self.show_images()
        if opened is not None and opened.own_verdict:
            self._status.showMessage(f"{path.name}: judged here by the sidecar's limits, not the station's",
                                     STATUS_MS)

    # -- the worker's answers ----------------------------------------------------------------------------------

    def _run(self, station_file: StationFile) -> None:
        from app.ui.workers.station_worker import StationWorker
        from app.ui.workers.threads import start_worker_thread

        self._opened = None
        self.worker = worker = StationWorker()
        self.run_requested.connect(worker.run)
        # bound methods only for what comes back: a lambda would run on the station's thread
        worker.opened.connect(self._on_opened)
        worker.picture.connect(self._on_picture)
        worker.ended.connect(self._on_ended)
        self.station_thread = start_worker_thread(worker, name="station", parent=self)
        self.view.show_starting(station_file.name)
        self.show_station()
        self._status.showMessage(f"Starting station {station_file.name}…", STATUS_MS)
        self.run_requested.emit(station_file)
        self.run_requested.disconnect(worker.run)  # queued already: a later start goes to its own worker

    def _on_opened(self, opened: StationOpened) -> None:
        self._opened = opened
        self.view.show_opened(opened)
        self._timer.start()
        note = f" ({opened.device_note})" if opened.device_note else ""
        self._status.showMessage(f"Station {opened.name} running on {opened.device}{note}", STATUS_MS)
        self.opened.emit(opened)

    def _on_picture(self, picture: StationPicture) -> None:
        self.view.show_picture(picture)
        self._tick()

    def _tick(self) -> None:
        from app.ui.state.station_messages import alarm_lines

        stats = None if self.worker is None else self.worker.stats()
        if stats is not None:
            limit = None if self._opened is None else self._opened.stall_after_s
            alarms = alarm_lines(stats, stall_after_s=limit)
            self.view.show_stats(stats, alarms)
            self._show_badge(stats, alarms)

    def _on_ended(self, ended: StationEnded) -> None:
        from app.ui.state.station_messages import alarm_lines, ended_line

        self._timer.stop()
        self._join()
        limit = None if self._opened is None else self._opened.stall_after_s
        if ended.stats is not None:
            alarms = alarm_lines(ended.stats, stall_after_s=limit)
            self.view.show_stats(ended.stats, alarms)
            self._show_badge(ended.stats, alarms, ended=True)
        line = ended_line(ended.stats, ended.problem)
        self.view.set_ended(line)
        self._say(line, error=ended.problem is not None)
        self.ended.emit(ended)

    def _join(self) -> None:
        """The run has returned: its thread ends now (and goes, with its worker: a shift's starts do not pile up)."""
        from app.ui.workers.threads import stop_thread

        thread, self.station_thread, self.worker = self.station_thread, None, None
        if thread is not None:
            stop_thread(thread, timeout_ms=10_000)
            thread.deleteLater()

    # -- helpers -----------------------------------------------------------------------------------------------

    def _show(self, page: int) -> None:
        if page == 1:
            self.view  # noqa: B018 - made (and put in the central area) on first use
        if self._pages is not None:
            self._pages.setCurrentIndex(page)
        if self._badge is not None:
            self._badge.setVisible(page == 0)

    def _show_badge(self, stats: StationStats, alarms: tuple[str, ...], *, ended: bool = False) -> None:
        """While the viewer is shown, the status bar keeps the station in sight: its counts, red on an alarm."""
        if self._badge is None:
            from app.ui.widgets.fit import FitLabel

            # a long station name is elided in its middle: the state and counts stay, the window keeps its width
            self._badge = FitLabel(hint_width=420, elide="ElideMiddle")
            self._status.addPermanentWidget(self._badge)
            self._badge.setVisible(not self.showing_station)
        name = "" if self._opened is None else f" {self._opened.name}"
        shown = [state for state in ("NG", "REVIEW", "OK", "ERROR") if state != "ERROR" or stats.counts.get(state)]
        counts = " · ".join(f"{stats.counts.get(state, 0)} {state}" for state in shown)
        state = "ended" if ended else "ALARM" if alarms else "running"
        self._badge.setText(f" Station{name} {state}: {counts}  (F9) ")
        self._badge.setToolTip("\n".join(alarms) or "Station ▸ Station view / images (F9)")
        self._badge.setStyleSheet("background: #d70015; color: white; font-weight: bold;" if alarms else "")

    def _say(self, line: str, *, error: bool = False) -> None:
        """One line in the status bar; a failure also in a message box (not modal: a line must go on)."""
        self._status.showMessage(line, 0 if error else STATUS_MS)
        if not error:
            return
        from PySide6.QtWidgets import QMessageBox

        from app.ui.widgets.lazy_qt import Qt

        box = QMessageBox(QMessageBox.Icon.Warning, "Station", line, parent=self._host)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    def eventFilter(self, watched, event) -> bool:
        if watched is self._host and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """The window closes: stop the station and join its thread (the sinks flush, bounded)."""
        self._timer.stop()
        if self.worker is not None:
            self.worker.stop()
        self._join()
