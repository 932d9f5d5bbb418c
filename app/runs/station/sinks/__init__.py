"""Where a station's verdicts go: the record every sink takes and the Sink interface.

A sink is given one StationVerdict per judged frame, in order. It must not raise for a transient
failure (a broker down, a full disk): it buffers or drops, counts, and says so in ``problem`` (one
line; the station shows it as an alarm) while the station goes on. ``publish`` says whether the sink
has the verdict (written, or in a buffer of its own that survives a restart): a verdict a sink could
not keep is offered to it again later (app.runs.station.run), and the frame is journaled only once every
sink has it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Protocol

__all__ = ["VERDICT_VALUES", "Sink", "StationVerdict", "iso_utc"]

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

    def as_dict(self) -> dict[str, object]:
        """The verdict's fields by name (JSON-ready: str, float or None)."""
        return asdict(self)


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
