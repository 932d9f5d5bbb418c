"""What a DIMSE retrieve receives (app.io.pacs.dimse_retrieve), checked before it is kept: each dataset a C-GET
or C-MOVE brings must carry the StudyInstanceUID, SeriesInstanceUID and SOPInstanceUID asked for; one of another
study, series or instance is dropped with one warning line of UIDs (never a patient field) and the series is then
incomplete. More stores than an honest server sends for the series (dimse_common.answer_cap) are refused.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.io.pacs.cache import write_instance
from app.io.pacs.dimse_common import answer_cap

if TYPE_CHECKING:
    from pynetdicom.events import Event

log = logging.getLogger(__name__)

DICOM_UID = re.compile(r"[0-9]+(\.[0-9]+)*", re.ASCII)  # PS3.5 9.1 (and at most 64 characters)
ASKED = (("StudyInstanceUID", "study"), ("SeriesInstanceUID", "series"), ("SOPInstanceUID", "instance"))


class Receiver:
    """The EVT_C_STORE handler: checks each dataset against what was asked (its study, series and instance), writes
    each expected one into the cache's receiving folder as it came (no re-encoding, private: cache.write_instance),
    counts it, reports progress; drops one of another study, series or instance (said once in the log); refuses
    everything once stopped or past the cap on answers. Runs on pynetdicom's threads."""

    def __init__(self, folder: Path, expected: dict[str, str], *, asked: tuple[str, str], node: str, what: str,
                 progress: Callable[[int, int | None], None] | None, should_stop: Callable[[], bool] | None) -> None:
        self.folder, self.expected, self.asked = folder, expected, asked
        self.node, self.what = node, what
        self.progress, self.should_stop = progress, should_stop
        self.received: set[str] = set()
        self.dropped: list[tuple[str, str, str]] = []  # (keyword, what it was, what was asked)
        self.write_error: OSError | None = None
        self.stopped = False
        self.stores = 0
        self.cap = answer_cap(len(expected))
        self._lock = threading.Lock()

    @property
    def flooded(self) -> bool:
        """More C-STORE requests came than an honest server sends for the series."""
        return self.stores > self.cap

    def __call__(self, event: Event) -> int:
        with self._lock:
            self.stores += 1
        if self.flooded or self.stopped or (self.should_stop is not None and self.should_stop()):
            self.stopped = self.stopped or not self.flooded
            return 0xA700  # Refused: out of resources (the server moves on; the retrieve is abandoned)
        sop = str(getattr(event.request, "AffectedSOPInstanceUID", ""))  # a C-STORE request: always there
        if sop not in self.expected:
            return 0x0000  # not of this series (another retrieve's straggler): not kept
        mismatch = self._mismatch(event, sop)
        if mismatch is not None:
            return mismatch
        if sop in self.received:
            return 0x0000  # sent twice: kept once
        try:
            write_instance(self.folder, sop, event.encoded_dataset())
        except FileExistsError:
            return 0x0000  # the same instance on two associations at once: kept once
        except OSError as e:
            self.write_error = e
            return 0xA700
        with self._lock:
            self.received.add(sop)
            count = len(self.received)
        if self.progress is not None:
            self.progress(count, len(self.expected))
        return 0x0000

    def _mismatch(self, event: Event, sop: str) -> int | None:
        """None when the dataset's own UIDs are the study, series and instance asked; else the C-STORE failure
        status, the dataset dropped and said in one line (UIDs only)."""
        try:
            ds = event.dataset
            own = [uid_text(ds.get(keyword, "")) for keyword, _ in ASKED]
        except Exception:  # a dataset pydicom cannot decode is not the instance asked either
            own = ["(undecodable)"] * len(ASKED)
        for (keyword, _), got, want in zip(ASKED, own, (*self.asked, sop), strict=True):
            if got != want:
                log.warning("pacs %s: %s: dropped instance %s: %s %s, not %s", self.node, self.what, uid_text(sop),
                            keyword, got, want)
                with self._lock:
                    self.dropped.append((keyword, got, want))
                return 0xA900  # Error: the dataset does not match what it was sent as
        return None


def uid_text(value: object) -> str:
    """A UID as a message shows it: printable, at most 64 characters (a UID's own limit)."""
    text = "".join(ch for ch in str(value) if ch.isprintable()).strip()
    return text if len(text) <= 64 else text[:61] + "..."
