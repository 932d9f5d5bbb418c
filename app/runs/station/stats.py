"""A station's live numbers: frames, counts per verdict, fps and latency over a bounded window, drops and stalls.

Everything is kept in fixed-size windows (the last `window` verdicts), so a station that runs for a shift holds the
same memory at its end as after a minute. `Meter` is fed by the station's thread and read (`snapshot`) from any
thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from app.runs.station.sinks import VERDICT_VALUES, StationVerdict


@dataclass(frozen=True)
class StationStats:
    """A snapshot of a station (see the module's docstring). `fps`: verdicts per second over the window;
    `latency_p50_ms` / `_p95_ms`: frame complete → verdict, over the window (None before the first);
    `dropped`: frames the source discarded (newest wins); `since_frame_s`: seconds since the last frame (or the
    start); `stalled`: that is over the station's stall limit; `last_stall_s`: the length of the last gap over it
    that has ended; `stalls`: the gaps over it since the start, the one going on included (and the last gap of a
    source that ended stalled), `longest_stall_s` the longest of them; `sink_problems`: one line per failing sink;
    `lost`: verdicts a sink failed on by raising; `ended`: why the station ended (the source's line, or
    "stopped"), None while it runs."""

    frames: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICT_VALUES, 0))
    fps: float = 0.0
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    dropped: int = 0
    since_frame_s: float = 0.0
    stalled: bool = False
    last_stall_s: float | None = None
    stalls: int = 0
    longest_stall_s: float | None = None
    sink_problems: tuple[str, ...] = ()
    lost: int = 0
    last: StationVerdict | None = None
    ended: str | None = None

    def summary(self) -> str:
        """`12 frames: 9 OK, 2 REVIEW, 1 NG, 0 ERROR; 4.1 frames/s; latency p50 35 ms, p95 61 ms; 0 dropped`, and
        `; 2 stalls, longest 42 s` once the source has stalled."""
        counts = ", ".join(f"{self.counts.get(name, 0)} {name}" for name in VERDICT_VALUES)
        latency = ("latency -" if self.latency_p50_ms is None or self.latency_p95_ms is None else
                   f"latency p50 {self.latency_p50_ms:.0f} ms, p95 {self.latency_p95_ms:.0f} ms")
        noun = "frame" if self.frames == 1 else "frames"
        stalls = "" if not self.stalls else (f"; {self.stalls} stall{'s' if self.stalls != 1 else ''}, longest "
                                             f"{self.longest_stall_s or 0:.0f} s")
        return f"{self.frames} {noun}: {counts}; {self.fps:.1f} frames/s; {latency}; {self.dropped} dropped{stalls}"


class Meter:
    """Collects verdicts into StationStats (thread-safe; bounded by `window`)."""

    def __init__(self, *, window: int = 500, stall_after_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`clock`: seconds that only go forward (time.monotonic; a test's own)."""
        self._clock = clock
        self._lock = threading.Lock()
        self._times: deque[float] = deque(maxlen=window)  # monotonic verdict times
        self._latencies: deque[float] = deque(maxlen=window)
        self._counts = dict.fromkeys(VERDICT_VALUES, 0)
        self._frames = self._lost = 0
        self._last: StationVerdict | None = None
        self._last_at = self._clock()
        self._last_stall: float | None = None
        self._stalls, self._longest_stall = 0, 0.0  # the gaps over the limit that have ended
        self._ended_at: float | None = None  # the station's end: the clock stops there
        self._ended_stalled = False  # the source ended because it stalled (a camera's own limit)
        self.stall_after_s = stall_after_s

    def add(self, verdict: StationVerdict) -> None:
        """Count one verdict."""
        now = self._clock()
        with self._lock:
            gap = now - self._last_at
            if self.stall_after_s is not None and gap > self.stall_after_s:
                self._last_stall = gap
                self._stalls, self._longest_stall = self._stalls + 1, max(self._longest_stall, gap)
            self._last_at = now
            self._frames += 1
            self._counts[verdict.verdict] = self._counts.get(verdict.verdict, 0) + 1
            self._times.append(now)
            self._latencies.append(verdict.latency_ms)
            self._last = verdict

    def lost(self, count: int = 1) -> None:
        """A sink failed on a verdict by raising."""
        with self._lock:
            self._lost += count

    def end(self, *, stalled: bool = False) -> None:
        """The station has ended (`stalled`: because its source stalled): the time since the last frame stops."""
        with self._lock:
            self._ended_at = self._clock()
            self._ended_stalled = stalled

    def last_frame_at(self) -> float:
        """Epoch seconds of the last frame (or of the start, before the first)."""
        with self._lock:
            return time.time() - (self._clock() - self._last_at)

    def snapshot(self, *, dropped: int, sink_problems: tuple[str, ...], ended: str | None = None) -> StationStats:
        """The numbers now."""
        with self._lock:
            now = self._clock() if self._ended_at is None else self._ended_at
            latencies = np.asarray(self._latencies, dtype=np.float64)
            p50, p95 = (np.percentile(latencies, [50, 95]).tolist() if latencies.size else (None, None))
            since = now - self._last_at
            over = self.stall_after_s is not None and since > self.stall_after_s
            open_stall = over or self._ended_stalled  # the gap going on (or the one the source ended in)
            longest = max(self._longest_stall, since if open_stall else 0.0)
            return StationStats(
                frames=self._frames, counts=dict(self._counts), fps=self._fps(), latency_p50_ms=p50,
                latency_p95_ms=p95, dropped=dropped, since_frame_s=since, stalled=over and ended is None,
                last_stall_s=self._last_stall, stalls=self._stalls + open_stall,
                longest_stall_s=longest if longest else None, sink_problems=sink_problems, lost=self._lost,
                last=self._last, ended=ended)

    def _fps(self) -> float:
        if len(self._times) < 2:
            return 0.0
        span = self._times[-1] - self._times[0]
        return (len(self._times) - 1) / span if span > 0 else 0.0
