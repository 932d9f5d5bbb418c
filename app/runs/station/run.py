"""A station: source → model → sinks → journal, frame by frame, until stopped or the source ends.

Each frame from the source (app.io.sources) is decoded and run through the pipeline on the station's warmed session
(opened as `seglens-cli run` opens it), judged by the sidecar's verdict section (OK / REVIEW / NG, its band
included: app.inference.decide.verdict), and handed to every sink as a StationVerdict (app.runs.station.sinks). A frame
that cannot
be decoded or run is an ERROR verdict with its one line, and the station goes on. A sink that raises is a problem
of that sink (counted, shown in `sink_problems`), never the station's end: the other sinks still get the verdict.

Only after every sink has the verdict is the frame written to the journal (app.runs.station.journal): a crash
between the two makes the file judged again at the restart (a sink may see it twice), never marked done unheard. A
sink that could not keep it (its `publish` returned False or raised: a full disk under the output folder, a bug) is
offered it again, and only it, before the next frame is finished and every RETRY_S while the line is quiet; the
frame is journaled once every sink has it. At most MAX_OWED such frames are held (with their pictures); an older one,
and any still owed when the station stops, is left unjournaled: the next start judges it again.
The station holds the output folder's lock (app.runs.outputs.lock) while it runs: one station, or run, per folder.

Overlapped (`overlap`, the default; app.runs.station.stages): the next file is decoded on a helper thread while
this one is judged (one frame ahead at most; a camera's frames are not read ahead, the newest still wins), and,
with an output-folder sink, its pictures, then the journal's line, are written on another behind it (two frames
queued at most), in frame order. The verdict sinks (log, MQTT, OPC UA) still take each verdict on the station's
thread before the next frame is judged. `overlap=False` does it all on the station's thread, one frame at a time
(the benchmark's comparison). The helpers run at the station's own priority unless `helper_niceness` lowers them
(a folder run's helpers are niced, app.runs.folder.writer.HELPER_NICENESS: measured here, a niced helper starved by
other programs held a station back, docs/PERFORMANCE.md).

`stop()` (any thread; Ctrl+C's handler) or the `stop` Event ends the loop after the frame being judged; the sinks
are closed (each flushes, bounded) and the journal with them. Live numbers: `stats()` from any thread, and the
`progress` callback after each frame (app.runs.station.stats: bounded windows, memory flat over a shift);
`on_verdict` is given each frame's verdict and pictures (the viewer's live image), on the station's thread, after
the verdict sinks took it (overlapped, the folder's pictures of it may still be being written).

A stalled source (no frame for longer than `stall_after_s`) is told to the sinks that carry the alarm
(app.runs.station.sinks.StallSink: MQTT, OPC UA) as it starts and as it ends, not stalled once at the start, and
stalled when the source ended because it stalled (a camera's own limit); a thread beside the loop looks 5 times a
second, and gives `progress` the numbers while the source is stalled (no frame comes to do it).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import SegLensError, one_line
from app.inference.decide.verdict import image_score, verdict_of
from app.inference.image import pipeline
from app.runs.outputs.lock import OutputLock
from app.runs.station.frames import Ready, error_reason, is_file, prepare_frame
from app.runs.station.journal import StationJournal
from app.runs.station.sinks import Sink, StallAlarm, StallSink, StationVerdict
from app.runs.station.sinks.folder import FolderSink, Pictures
from app.runs.station.stages import Finisher, ReadAhead
from app.runs.station.stats import Meter, StationStats
from app.spelling import counted

if TYPE_CHECKING:

    from app.inference.model.instances import Instances
    from app.inference.model.session import ModelSession
    from app.io.sources import Frame, Source
    from app.io.sources.watch import AlreadyDone
    from app.runs.station.privacy import StationPrivacy

log = logging.getLogger(__name__)

OpenSource = Callable[["AlreadyDone | None"], "Source"]  # given the journal's `has`, the source to read
STOPPED = "stopped"
TICK_S = 0.2  # how often a stall (and a stop from another thread) is looked for
RETRY_S = 5.0  # how often a verdict a sink could not keep is offered again while no frame comes
MAX_OWED = 16  # frames held for another try, their pictures with them (memory: a decoded image and result each)


class StationRefused(SegLensError):
    """A station cannot start with this model (no verdict section, a 3D model)."""


def station_problem(model: ModelSession) -> str | None:
    """Why `model` cannot judge a station's frames, in one line, or None."""
    spec = model.spec
    if spec.is_3d:
        return f"{spec.path.name} is a 3D model (it runs on whole volumes): a station judges one image per frame"
    if spec.verdict is None:
        return (f"{spec.path.name} has no verdict section: a station needs one to say OK / REVIEW / NG "
                "(verdict: fail_if …, or seglens-cli calibrate --write)")
    return None


class Station:
    """One station (see the module's docstring). `open_source` is called once the journal is open, with the
    journal's `done` (so a file processed before a restart is not read again)."""

    def __init__(self, *, name: str, model: ModelSession, open_source: OpenSource, out: Path,
                 sinks: Sequence[Sink] = (), open_sinks: Callable[[], Sequence[Sink]] | None = None,
                 progress: Callable[[StationStats], None] | None = None,
                 on_verdict: Callable[[StationVerdict, Pictures], None] | None = None,
                 stop: threading.Event | None = None, window: int = 500, stall_after_s: float | None = None,
                 overlap: bool = True, helper_niceness: int = 0, privacy: StationPrivacy | None = None) -> None:
        refused = station_problem(model)
        if refused:
            raise StationRefused(refused)
        self.name, self.model, self.out = name, model, Path(out)
        self.sinks = tuple(sinks)
        self._open_sinks = open_sinks  # called once the output folder's lock is held: a sink's files are in it
        self._open_source, self._progress = open_source, progress
        self._on_verdict = on_verdict  # a face's look at each judged frame (the viewer's live image), after the sinks
        self._stop = stop or threading.Event()
        self._meter = Meter(window=window, stall_after_s=stall_after_s)
        self._source: Source | None = None
        self._raised: dict[str, str] = {}  # sink name → the last exception's line (a sink must not raise)
        self._ended: str | None = None
        self._overlap, self._niceness = overlap, helper_niceness
        self._privacy = privacy  # a private frame's id and error line by its pseudonym (app.runs.station.privacy)
        self._owed: deque[_Owed] = deque()  # frames a sink could not keep yet, oldest first
        self._owed_lock = threading.Lock()  # the folder sink and the owed frames: one thread at a time
        self._finished = False  # set under _owed_lock once the sinks are about to close: no more retries
        self._said_full = False  # the owed frames passed MAX_OWED (said once until they are all kept)
        self._journal_failure: BaseException | None = None  # the journal refused a line on the retry thread
        self._stall_lock = threading.Lock()  # the sinks hear the stall alarm's changes one at a time, in order
        self._said_stalled: bool | None = None  # what the sinks were last told (None: nothing yet)

    def stop(self) -> None:
        """End the loop after the frame being judged (any thread, a signal handler too)."""
        self._stop.set()
        source = self._source
        if source is not None:
            source.close()

    def stats(self) -> StationStats:
        """The live numbers (any thread)."""
        source = self._source
        return self._meter.snapshot(dropped=source.dropped if source is not None else 0,
                                    sink_problems=self.sink_problems(), ended=self._ended)

    def sink_problems(self) -> tuple[str, ...]:
        """One line per sink that is failing now, or raised on its last verdict."""
        lines = []
        for sink in self.sinks:
            problem = self._raised.get(sink.name) or sink.problem
            if problem:
                lines.append(problem if problem.startswith(f"{sink.name}:") else f"{sink.name}: {problem}")
        return tuple(lines)

    def run(self) -> StationStats:
        """Judge frames until stopped or the source ends; the final numbers (`ended` says why it ended)."""
        with OutputLock(self.out), StationJournal(self.out) as journal:
            try:
                if self._open_sinks is not None:
                    self.sinks += tuple(self._open_sinks())
                source = self._open_source(journal.has)
            except BaseException:
                self._close_sinks()  # a source that cannot start: the sinks opened so far are closed, not leaked
                raise
            self._source = source
            _forget_gone(journal, source)
            self._check_stall()  # not stalled: an alarm a broker kept from an earlier run is cleared
            watcher = threading.Thread(target=self._watch_stop, args=(source, journal), name="station-stop",
                                       daemon=True)
            watcher.start()
            try:
                self._loop(source, journal)
            finally:
                self._ended = source.ended or STOPPED
                source_stalled = source.stalled  # a camera's own limit ended it
                self._meter.end(stalled=source_stalled)
                source.close()
                if source_stalled:
                    self._check_stall(stalled=True)
                self._last_try(journal)
                self._close_sinks()
        return self.stats()

    # -- the loop ---------------------------------------------------------------------------------------------

    def _loop(self, source: Source, journal: StationJournal) -> None:
        spec = self.model.spec
        reader = finisher = None
        if self._overlap:  # decode ahead, pictures and journal behind (app.runs.station.stages)
            reader = ReadAhead(source, functools.partial(prepare_frame, spec), ahead=is_file,
                               niceness=self._niceness)
            if any(isinstance(sink, FolderSink) for sink in self.sinks):  # without pictures: the journal's line here
                finisher = Finisher(functools.partial(self._finish, journal), niceness=self._niceness)
        frames = reader if reader is not None else (prepare_frame(spec, frame) for frame in source)
        try:
            for ready in frames:
                if self._stop.is_set():
                    break  # not judged, not journaled (read ahead, perhaps): the next start takes it
                verdict, pictures = self._judge(ready)
                missing = self._publish(verdict)
                owed = _Owed(ready.frame, verdict, pictures, missing)
                if finisher is not None:
                    finisher.put(owed)
                else:
                    self._finish(journal, owed)
                self._meter.add(verdict)
                self._check_stall()  # a frame after a stall: the alarm cleared
                if self._on_verdict is not None:
                    self._on_verdict(verdict, pictures)
                if self._progress is not None:
                    self._progress(self.stats())
                if self._stop.is_set():
                    break
        finally:
            if reader is not None:
                source.close()  # a helper waiting on the source for the next frame ends
                reader.close()
            if finisher is not None:
                finisher.close()  # what it holds is written and journaled; a journal that failed raises here
            if self._journal_failure is not None:
                raise self._journal_failure  # the retry thread's: the journal refused a line

    def _judge(self, ready: Ready) -> tuple[StationVerdict, Pictures]:
        """The frame's verdict and what the folder sink writes of it; an ERROR verdict when it cannot be judged."""
        frame, pixels = ready.frame, ready.pixels
        try:
            if ready.error is not None:
                raise ready.error
            assert ready.prepared is not None  # prepare_frame gives one or the other
            output, inference_ms = pipeline.infer(self.model, ready.prepared, batch=pipeline.tile_batch(self.model))
            result = pipeline.with_mask(pipeline.to_result(self.model, ready.prepared, output, inference_ms))
            judged = verdict_of(self.model.spec, result)
            assert judged is not None  # station_problem refused a model without a verdict section
        except Exception as exc:  # one frame that cannot be judged is an ERROR, not the end
            reason = error_reason(frame, exc)
            log.debug("station: frame %s could not be judged: %s", frame.id, exc, exc_info=True)
            return self._verdict(frame, "ERROR", None, reason), Pictures(frame.path, pixels, None, frame.root)
        score = image_score(result)
        counts = None if result.instances is None else instance_counts(result.instances, self.model.spec.class_names)
        return (self._verdict(frame, judged.state, score, judged.reason, counts),
                Pictures(frame.path, pixels, result, frame.root))

    def _finish(self, journal: StationJournal, owed: _Owed) -> None:
        """The frames owed before it offered again, then the output folder's pictures, then the journal's line
        once every sink has the verdict (the journal's promise); a frame a sink could not keep is owed."""
        with self._owed_lock:
            self._retry(journal)
            missing = set(owed.missing)
            for sink in self.sinks:
                if isinstance(sink, FolderSink) and not self._deliver(
                        sink, functools.partial(sink.publish_pictures, owed.verdict, owed.pictures)):
                    missing.add(sink.name)
            if missing:
                self._owe(_Owed(owed.frame, owed.verdict, owed.pictures, frozenset(missing)))
            else:
                _journal(journal, owed)

    def _retry(self, journal: StationJournal) -> None:
        """Offer each owed frame again to the sinks that could not keep it, oldest first, journaling each that every
        sink has now; the first that a sink still refuses ends the round (the disk is still full). Holds
        _owed_lock."""
        while self._owed and not self._finished:
            owed = self._owed[0]
            missing = frozenset(sink.name for sink in self.sinks
                                if sink.name in owed.missing and not self._offer(sink, owed))
            if missing:
                self._owed[0] = _Owed(owed.frame, owed.verdict, owed.pictures, missing)
                return
            self._owed.popleft()
            _journal(journal, owed)
            log.info("station: a verdict every sink has now journaled (%d still owed)", len(self._owed))
        self._said_full = self._said_full and bool(self._owed)

    def _offer(self, sink: Sink, owed: _Owed) -> bool:
        if isinstance(sink, FolderSink):
            return self._deliver(sink, functools.partial(sink.publish_pictures, owed.verdict, owed.pictures),
                                 again=True)
        return self._deliver(sink, functools.partial(sink.publish, owed.verdict), again=True)

    def _owe(self, owed: _Owed) -> None:
        self._owed.append(owed)
        if len(self._owed) > MAX_OWED:
            self._owed.popleft()
            if not self._said_full:  # once until the owed frames are all kept again
                self._said_full = True
                log.warning("station: more than %d verdicts a sink could not keep: the oldest are left "
                            "unjournaled, judged again at the next start", MAX_OWED)

    def _last_try(self, journal: StationJournal) -> None:
        """One more offer of what is owed before the sinks close; what is still owed is left to the next start."""
        with self._owed_lock:
            try:
                self._retry(journal)
            except Exception as exc:  # the journal refused: the station ends with what the loop raised, if any
                log.debug("station: the last retry failed: %s", one_line(exc, typed=True))
            self._finished = True
            if self._owed:
                names = sorted({name for owed in self._owed for name in owed.missing})
                log.warning("station: %s not kept by %s: not journaled, judged again at the next start",
                            counted(len(self._owed), "verdict"), ", ".join(names))

    def _verdict(self, frame: Frame, state: str, score: float | None, reason: str,
                 counts: tuple[tuple[str, int], ...] | None = None) -> StationVerdict:
        now = time.time()
        frame_id = frame.id
        if self._privacy is not None:  # every id that leaves the station is made here
            frame_id, reason = self._privacy.outward(frame, state, reason)
        return StationVerdict(station=self.name, frame_id=frame_id, time=now, verdict=state, score=score,
                              reason=reason, latency_ms=max(0.0, (now - frame.timestamp) * 1000.0), counts=counts)

    def _publish(self, verdict: StationVerdict) -> frozenset[str]:
        """The verdict to every sink but the output folder's (its pictures are `_finish`'s); the names of those
        that could not keep it."""
        return frozenset(sink.name for sink in self.sinks if not isinstance(sink, FolderSink)
                         and not self._deliver(sink, functools.partial(sink.publish, verdict)))

    def _deliver(self, sink: Sink, publish: Callable[[], bool | None], *, again: bool = False) -> bool:
        """Whether `sink` has the verdict now (publish returned anything but False, and did not raise). A raise is
        counted as lost the first time (`again`: an owed verdict offered again is not counted twice)."""
        try:
            kept = publish() is not False
        except Exception as exc:  # a sink's bug must not cost the other sinks the verdict
            self._raised[sink.name] = f"{sink.name}: {one_line(exc, typed=True)}"
            if not again:
                self._meter.lost()
                log.warning("station: sink %s failed on a verdict (%s)", sink.name, type(exc).__name__)  # no path
            log.debug("station: sink %s failed: %s", sink.name, one_line(exc, typed=True))
            return False
        self._raised.pop(sink.name, None)
        return kept

    def _close_sinks(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # every sink gets closed
                self._raised[sink.name] = f"{sink.name}: cannot close ({one_line(exc, typed=True)})"
                log.warning("station: sink %s failed to close (%s)", sink.name, type(exc).__name__)
                log.debug("station: sink %s failed to close: %s", sink.name, one_line(exc, typed=True))

    def _watch_stop(self, source: Source, journal: StationJournal) -> None:
        """Closes the source when the stop Event is set by someone else (a viewer's Stop, a test); offers the owed
        frames again every RETRY_S meanwhile (a quiet line: no next frame to do it)."""
        next_try = time.monotonic() + RETRY_S
        while self._ended is None:
            if self._stop.wait(TICK_S):
                source.close()
                return
            if self._check_stall() and self._progress is not None and self._ended is None:
                self._quiet_progress()
            if self._owed and time.monotonic() >= next_try:
                self._retry_quietly(journal)
                next_try = time.monotonic() + RETRY_S

    def _check_stall(self, *, stalled: bool | None = None) -> bool:
        """Tell the StallSinks when the source's stall state changed (`stalled`: this state, not the numbers');
        whether it is stalled."""
        with self._stall_lock:
            if stalled is None and self._ended is not None:
                return bool(self._said_stalled)  # ended: what it was (a stop does not clear the alarm)
            stats = self.stats()
            now = stats.stalled if stalled is None else stalled
            if now != self._said_stalled:
                self._say_stall(now, was=bool(self._said_stalled), stats=stats, forced=stalled is not None)
                self._said_stalled = now
            return now

    def _say_stall(self, stalled: bool, *, was: bool, stats: StationStats, forced: bool) -> None:
        """The alarm's new state to the log and to every StallSink (holds _stall_lock)."""
        alarm = StallAlarm(station=self.name, stalled=stalled, since=self._meter.last_frame_at(),
                           limit_s=self._meter.stall_after_s, time=time.time())
        if stalled and not forced:  # a log without a terminal (a service) says it too
            log.warning("station: the source stalled: no frame for over %g s", self._meter.stall_after_s)
        elif was and not stalled:
            log.warning("station: frames again after a stall of %.0f s", stats.last_stall_s or 0.0)
        for sink in self.sinks:
            if isinstance(sink, StallSink):
                try:
                    sink.stall(alarm)
                except Exception as exc:  # a sink's bug: the other sinks still hear the alarm
                    log.warning("station: sink %s failed on the stall alarm (%s)", sink.name, type(exc).__name__)

    def _quiet_progress(self) -> None:
        """The numbers to `progress` from the stop watcher's thread (a stalled source sends no frame to do it)."""
        assert self._progress is not None
        try:
            self._progress(self.stats())
        except Exception as exc:  # a face's callback must not end the watcher (the stop, the retries)
            log.debug("station: progress failed: %s", one_line(exc, typed=True))

    def _retry_quietly(self, journal: StationJournal) -> None:
        with self._owed_lock:
            try:
                self._retry(journal)
            except Exception as exc:  # the journal refused a line: the station ends, as on its own thread
                self._journal_failure = exc
                self.stop()


@dataclass(frozen=True)
class _Owed:
    """A judged frame on its way to the journal: what the output folder writes of it, and the sinks that do not
    have its verdict yet (offered again until they do)."""

    frame: Frame
    verdict: StationVerdict
    pictures: Pictures
    missing: frozenset[str]


def instance_counts(instances: Instances, class_names: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """The objects per class of the model, every class named (0 for one not found), in the model's order."""
    found = instances.counts()
    return tuple((name, found.get(name, 0)) for name in dict.fromkeys(class_names))


def _journal(journal: StationJournal, owed: _Owed) -> None:
    """The frame's line, once every sink has its verdict (a file's frame: a camera's are not journaled)."""
    if owed.frame.size is not None and owed.frame.mtime_ns is not None:
        journal.record(owed.frame, owed.verdict.verdict)


def _forget_gone(journal: StationJournal, source: Source) -> None:
    """A watch folder's journal forgets the files no longer in it (app.runs.station.journal: bounded memory): a file
    the line deleted or moved away does not come back as the same work. Other sources' frames are not journaled."""
    root = source.root  # a watch folder's (app.io.sources.watch.WatchSource); None where frames are not files
    if root is not None:
        forgotten = journal.prune(functools.partial(_still_in, root))
        if forgotten:
            log.info("station journal: %s no longer in the watched folder forgotten", counted(forgotten, "file"))


def _still_in(root: Path, file_id: str) -> bool:
    return os.path.lexists(root / file_id)
