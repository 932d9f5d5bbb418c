"""The Station view's worker: one station (app.runs.station.run) run from a station file, on its own QThread.

The worker pattern, with one difference: the station's loop blocks its thread for as long as it runs (a shift), so
the worker takes one `run` and is then done; the controller makes a worker and a thread per start and joins them
when `ended` has come. The session is opened inside `run`, on this thread (open_station without `model=`), never on
the GUI thread and never on the inference worker's: the viewer's own model and pictures go on meanwhile.

From the GUI thread: `stop()` (Station.stop and the stop Event: both thread-safe; a stop while the session is still
being opened ends the station as soon as it starts) and `stats()` (the live numbers, Station.stats: thread-safe).
Pictures come from a Painter (app.ui.workers.station_painter) on a third thread, at most ~15 a second.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

if TYPE_CHECKING:
    from app.runs.station.file import StationFile
    from app.runs.station.run import Station
    from app.runs.station.sinks import StationVerdict
    from app.runs.station.sinks.folder import Pictures
    from app.runs.station.stats import StationStats
    from app.ui.state.station_messages import StationOpened
    from app.ui.workers.station_painter import Painter

log = logging.getLogger(__name__)

OpenStation = Callable[..., "Station"]  # app.runs.station.setup.open_station, or a test's


class StationWorker(QObject):
    opened = Signal(object)  # StationOpened: the session is warm, the loop starts
    picture = Signal(object)  # StationPicture, at most ~max_fps a second (emitted from the painter's thread)
    ended = Signal(object)  # StationEnded: stopped, ended by itself, or could not start / failed (its line)

    def __init__(self, *, open_station: OpenStation | None = None, max_fps: float = 15.0, keep: int = 24) -> None:
        super().__init__()
        self._open_station, self._max_fps, self._keep = open_station, max_fps, keep
        self._stop = threading.Event()
        self._station: Station | None = None
        self._painter: Painter | None = None

    def stop(self) -> None:
        """Any thread: end the station after the frame being judged (or as soon as its session is open)."""
        self._stop.set()
        station = self._station
        if station is not None:
            station.stop()

    def stats(self) -> StationStats | None:
        """Any thread: the station's live numbers; None before it has started."""
        station = self._station
        return None if station is None else station.stats()

    @Slot(object)
    def run(self, station_file: StationFile) -> None:
        """Open the station (its session warmed here), run it until stopped or its source ends, then `ended`."""
        from app.runs.station.sinks.options import FolderSinkOptions
        from app.ui.state.station_messages import StationEnded

        try:
            station = self._open(station_file)
        except Exception as exc:  # a model refused, a device that cannot be opened: one line, the thread lives on
            self.ended.emit(StationEnded(None, _line("could not start", exc)))
            return
        keeps_copies = station_file.sink_options(FolderSinkOptions) is not None
        painter = self._painter_for(station, keeps_copies=keeps_copies)
        self._painter, self._station = painter, station
        self.opened.emit(opened_record(station_file, station))
        problem = None
        try:
            stats = station.run()
        except Exception as exc:  # the output folder locked by another station, a source that cannot start
            problem, stats = _line("failed", exc), station.stats()
        finally:
            painter.close()  # the last frame drawn and emitted before `ended`
            # the session is let go here, on the thread that made it (ModelSession: used from its own thread)
            self._painter = self._station = None
        self.ended.emit(StationEnded(stats, problem))

    def _open(self, station_file: StationFile) -> Station:
        opener = self._open_station
        if opener is None:
            from app.runs.station.setup import open_station

            opener = open_station
        return opener(station_file, on_verdict=self._on_verdict, stop=self._stop)

    def _painter_for(self, station: Station, *, keeps_copies: bool) -> Painter:
        from app.runs.station.sinks.folder import copy_path
        from app.ui.workers.station_painter import Painter

        out = station.out

        def copy_of(verdict: StationVerdict, pictures: Pictures) -> Path | None:
            """The output folder's copy when the folder sink keeps one, else the watched file itself (a camera's
            frame without the folder sink: None, nothing was kept)."""
            return copy_path(out, verdict, pictures) if keeps_copies else pictures.path

        return Painter(classes=station.model.spec.classes, emit=self.picture.emit, copy_of=copy_of,
                       max_fps=self._max_fps, keep=self._keep)

    def _on_verdict(self, verdict: StationVerdict, pictures: Pictures) -> None:
        """The station's thread, after the sinks took the verdict."""
        painter = self._painter
        if painter is not None:
            painter.put(verdict, pictures)


def opened_record(station_file: StationFile, station: Station) -> StationOpened:
    """What the view says of a station that starts: its name, where its model runs and why, what it reads."""
    from app.ui.state.station_messages import StationOpened, device_words

    device, note = device_words(station.model.info)
    spec = station_file.source
    target = spec.target.name if isinstance(spec.target, Path) else str(spec.target)
    source = {"watch": "watch folder", "video": "video", "camera": "camera"}.get(spec.kind, spec.kind)
    return StationOpened(name=station.name, model=station.model.spec.path,
                         own_verdict=station_file.verdict is not None, device=device, device_note=note,
                         source=f"{source} {target}", out=station.out, stall_after_s=station_file.stall_after_s)


def _line(what: str, exc: BaseException) -> str:
    """`could not start: <the failure's one line>` (a SegLensError's own, anything else typed); the traceback
    only in the log, at DEBUG (a message may hold a path)."""
    from app.errors import SegLensError, one_line

    log.warning("station %s (%s)", what, type(exc).__name__)
    log.debug("station %s", what, exc_info=True)
    return f"{what}: {one_line(exc) if isinstance(exc, SegLensError) else one_line(exc, typed=True)}"
