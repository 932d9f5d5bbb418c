"""The records the Station view's worker sends to the window (typed, frozen: they cross a thread), and the plain
rules of what the view says: the alarms, the end line, where the model runs.

A running station (app.runs.station.run) on the station thread sends `StationOpened` once its session is warm, then
at most ~15 `StationPicture`s a second (the newest frame's picture, drawn off the GUI thread; the NG/REVIEW
thumbnails made since the last one), and `StationEnded` when it ends, stopped, by itself or by a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.spelling import counted

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from app.inference.model.session import SessionInfo
    from app.runs.station.sinks import StationVerdict
    from app.runs.station.stats import StationStats

STOPPED = "stopped"  # app.runs.station.run.STOPPED: the reader's Stop, not the source ending by itself


@dataclass(frozen=True)
class StationOpened:
    """The station's session is warm and its loop is starting. `device`: where the model really runs (`CPU`,
    `CUDA (GPU 0)`); `device_note`: why not on the GPU that was asked for ("" when it runs as asked)."""

    name: str
    model: Path  # the model file judging the frames (the viewer opens it to inspect a frame from the strip)
    own_verdict: bool  # the station file gives its own verdict limits in place of the sidecar's
    device: str
    device_note: str
    source: str  # what it reads, in words: "watch folder incoming"
    out: Path
    stall_after_s: float | None


@dataclass(frozen=True)
class StationThumb:
    """One NG or REVIEW frame for the strip: its verdict, a small RGB picture with the overlay, and the file the
    viewer opens for it (the output folder's copy, or the watched file itself; None: no file was kept)."""

    verdict: StationVerdict
    image: npt.NDArray[np.uint8]
    path: Path | None


@dataclass(frozen=True)
class StationPicture:
    """The newest judged frame: its verdict and its live picture (RGB uint8 with the overlay, scaled down to a
    screen's size; None when the frame could not be decoded), and the strip's thumbnails made since the last one."""

    verdict: StationVerdict
    image: npt.NDArray[np.uint8] | None
    thumbs: tuple[StationThumb, ...] = ()


@dataclass(frozen=True)
class StationEnded:
    """The station has ended: its last numbers (None when it never started) and the line it failed with
    (`could not start: …`, `failed: …`; None: stopped, or its source ended: `stats.ended` says which)."""

    stats: StationStats | None
    problem: str | None = None


def device_words(info: SessionInfo) -> tuple[str, str]:
    """(where the model runs, why not where it was asked to run or ""), from the session's own account."""
    # `auto` on a machine without an NVIDIA GPU: the label says so ("CPU (no NVIDIA GPU)"), nothing fell back
    note = f"{info.requested} was asked for: {info.fallback_reason}" if info.fallback_warns else ""
    return info.provider_label, note or ""


def alarm_lines(stats: StationStats, *, stall_after_s: float | None = None) -> tuple[str, ...]:
    """The red bar's lines: a source that stalled (now, or that ended because it stalled) and each failing sink."""
    lines = []
    if stats.stalled:
        limit = f" (limit {stall_after_s:g} s)" if stall_after_s is not None else ""
        lines.append(f"SOURCE STALLED: no frame for {stats.since_frame_s:.0f} s{limit}")
    elif stats.ended is not None and "stall" in stats.ended:
        lines.append(f"SOURCE STALLED: {stats.ended}")
    lines += [f"SINK FAILING: {problem}" for problem in stats.sink_problems]
    if stats.lost:
        lines.append(f"{counted(stats.lost, 'verdict')} a sink failed on")
    return tuple(lines)


def ended_line(stats: StationStats | None, problem: str | None) -> str:
    """What the view says once the station has ended: why, and its final numbers."""
    if problem is not None:
        return f"Station {problem}"  # "could not start: …", "failed: …"
    if stats is None:
        return "Station ended"
    why = "stopped" if stats.ended in (None, STOPPED) else f"ended by itself: {stats.ended}"
    return f"Station {why} — {stats.summary()}"
