"""Where a station's verdicts go: the record every sink takes and the Sink interface.

A sink is given one StationVerdict per judged frame, in order. It must not raise for a transient
failure (a broker down, a full disk): it buffers or drops, counts, and says so in ``problem`` (one
line; the station shows it as an alarm) while the station goes on. ``publish`` says whether the sink
has the verdict (written, or in a buffer of its own that survives a restart): a verdict a sink could
not keep is offered to it again later (app.runs.station.run), and the frame is journaled only once every
sink has it.

A sink that also tells the line about its source (MQTT, OPC UA) is a ``StallSink``: its ``stall`` is given a
``StallAlarm`` when the station starts (not stalled) and each time the source starts or stops stalling (no frame
for longer than the station's `stall_after_s`, or a camera's own stall that ended it); it takes it at once (a
lock, a flag), never waiting for the network, never raising.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Protocol, runtime_checkable

__all__ = ["VERDICT_VALUES", "Sink", "StallAlarm", "StallSink", "StationVerdict", "iso_utc"]

# "ERROR": the frame could not be judged (its reason says why).
VERDICT_VALUES = ("OK", "REVIEW", "NG", "ERROR")


@dataclass(frozen=True)
class StationVerdict:
    """One frame's verdict as a station reports it."""

    station: str  # the station's name (topic part, log field)
    frame_id: str  # Frame.id (a file's path relative to the watched root, a camera frame's counter; a private
    # file's keyed pseudonym: app.runs.station.privacy)
    time: float  # epoch seconds the verdict was made
    verdict: str  # "OK" | "REVIEW" | "NG" | "ERROR" (the frame could not be judged: reason says why)
    score: float | None  # the image score, when the model has one
    reason: str  # the rule that fired / the error line ("" for OK)
    latency_ms: float  # from Frame.timestamp (complete/captured) to the verdict
    # an instance model's objects per class (every class of the model, 0 included, in its order); None for
    # another model and for an ERROR
    counts: tuple[tuple[str, int], ...] | None = None

    def as_dict(self) -> dict[str, object]:
        """The verdict's fields by name (JSON-ready: str, float, None, or `counts` as {class: count})."""
        fields = asdict(self)
        fields["counts"] = None if self.counts is None else dict(self.counts)
        return fields


def iso_utc(epoch_s: float) -> str:
    """`epoch_s` as ISO-8601 UTC to the millisecond (`2026-12-01T16:24:48.123Z`): a verdict's time as every sink
    writes it (the log's `time`, the MQTT payload's)."""
    stamp = datetime.fromtimestamp(epoch_s, tz=timezone.utc).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class Sink(Protocol):
    """A destination for verdicts (log file, MQTT broker, output folder)."""

    name: str  # "log", "mqtt", "folder" (in messages)

    def publish(self, verdict: StationVerdict) -> bool:
        """Take one verdict; True once the sink has it, False when it could not keep it (a full disk: offered
        again later). Must not raise for a transient failure."""
        ...

    def close(self) -> None:
        """Flush what is pending and release resources; waits a bounded time."""
        ...

    @property
    def problem(self) -> str | None:
        """One line while the sink is failing (the station shows an alarm), else None."""
        ...

    @property
    def lost(self) -> int:
        """Verdicts this sink could not keep and will not keep (`watch`'s summary adds them up); 0 where none can
        be lost."""
        ...


@dataclass(frozen=True)
class StallAlarm:
    """Whether a station's source is stalled now (the viewer's red SOURCE STALLED bar, for the line)."""

    station: str  # the station's name
    stalled: bool  # True: no frame for longer than `limit_s`; False: frames come (or the station just started)
    since: float  # epoch seconds of the last frame (or of the station's start, before the first)
    limit_s: float | None  # the station's stall_after_s (None: a camera's own limit ended it)
    time: float  # epoch seconds it was said


@runtime_checkable
class StallSink(Protocol):
    """A sink that also carries the station's stall alarm (see the module's docstring)."""

    def stall(self, alarm: StallAlarm) -> None:
        """Take the alarm's new state; never waits for the network, never raises."""
        ...
