"""What a WADO-RS retrieve receives, checked against what it asked for before anything is kept: an instance of
another study or series, one without a SOPInstanceUID or one sent twice is dropped with one line (naming no
patient and no UID of another study), more instances than the search announced end the stream, and an instance cut
short (the last part of a multipart answer a dying server cut off) is told from a whole one."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydicom import Dataset

log = logging.getLogger(__name__)

# WADO-RS asks for Explicit VR Little Endian (dicomweb-client's default): the server decompresses, every reader
# of the series can decode it, and a cut-off instance can be told by its pixel bytes.
_UNCOMPRESSED = ("1.2.840.10008.1.2", "1.2.840.10008.1.2.1", "1.2.840.10008.1.2.2")


class Arrivals:
    """What a WADO-RS retrieve asked for and what has arrived: each instance checked before it is kept."""

    def __init__(self, node: str, study_uid: str, series_uid: str, expected: int | None) -> None:
        self.node, self.study_uid, self.series_uid, self.expected = node, study_uid, series_uid, expected
        self.received = self.bytes = self.dropped = 0
        self._sops: set[str] = set()

    def counted(self) -> str:
        of = f" of {self.expected}" if self.expected is not None else ""
        dropped = f" ({self.dropped} not of the series asked for, dropped)" if self.dropped else ""
        return f"{self.received}{of} instances received{dropped}"

    def doing(self) -> str:
        return f"retrieving the series ({self.counted()})"

    def kept(self, dataset: Dataset) -> str | None:
        """The instance's SOPInstanceUID when it is one of the series asked for, not received before; else None,
        said in one line that names no patient and no UID of another study."""
        sop = _uid(dataset, "SOPInstanceUID")
        problem = self._problem(dataset, sop)
        if problem is not None:
            self.dropped += 1
            log.warning("pacs %s: an instance dropped from the series retrieved: %s", self.node, problem)
            return None
        self._sops.add(sop)
        return sop

    def _problem(self, dataset: Dataset, sop: str) -> str | None:
        if not sop:
            return "it has no SOPInstanceUID"
        if _uid(dataset, "StudyInstanceUID") != self.study_uid.strip():
            return "of another study (its StudyInstanceUID differs)"
        if _uid(dataset, "SeriesInstanceUID") != self.series_uid.strip():
            return "of another series (its SeriesInstanceUID differs)"
        return "its SOPInstanceUID was received already" if sop in self._sops else None

    def overflowing(self) -> bool:
        """More instances arrived than the search announced (a stream that does not end)."""
        return self.expected is not None and self.received + self.dropped > self.expected

    def incomplete(self) -> str | None:
        """Why the series is not complete at the end of the answer, or None."""
        if self.received == 0 and not self.dropped:
            return "no instances received for the series"
        if self.dropped or (self.expected is not None and self.received < self.expected):
            return f"partial retrieve: {self.counted()}"
        return None


def _uid(dataset: Dataset, keyword: str) -> str:
    return str(dataset.get(keyword, "") or "").strip()


def truncated(dataset: Dataset) -> bool:
    """Whether an uncompressed instance holds fewer pixel bytes than its rows, columns, samples, bits and frames
    need. dicomweb-client hands on the last part of a multipart answer cut off by a server going away as if it
    were whole; counted, it could make a series look complete."""
    meta = getattr(dataset, "file_meta", None)
    if "PixelData" not in dataset or meta is None or meta.get("TransferSyntaxUID", "") not in _UNCOMPRESSED:
        return False
    try:
        frames = int(dataset.get("NumberOfFrames", 1) or 1)
        need = int(dataset.Rows) * int(dataset.Columns) * int(dataset.get("SamplesPerPixel", 1)) * frames
        need = need * int(dataset.BitsAllocated) // 8
    except (AttributeError, TypeError, ValueError):
        return False  # the reader of the series says what is wrong with it
    return len(dataset.PixelData) < need
