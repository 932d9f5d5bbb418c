"""What every PACS client offers, whatever it speaks: the records of a search, the Protocol, and `connect`.

DIMSE (app.io.pacs.dimse, through pynetdicom) and DICOMweb (app.io.pacs.dicomweb, through dicomweb-client) both
implement `PacsClient`; callers never know which one they hold. Both libraries are imported only by `connect`, so
importing this module costs nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.io.pacs.cache import Retrieved
from app.io.pacs.errors import PacsError, pacs_error

if TYPE_CHECKING:
    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.nodes import PacsNode


@dataclass(frozen=True)
class StudyQuery:
    """A study-level search; empty fields match anything. `study_date` is an inclusive YYYYMMDD range."""

    patient_id: str = ""
    patient_name: str = ""
    study_date: tuple[str, str] | None = None
    modality: str = ""
    accession: str = ""
    study_uid: str = ""


@dataclass(frozen=True)
class StudyRecord:
    """One study a search found."""

    study_uid: str
    patient_id: str
    patient_name: str
    study_date: str
    description: str
    modalities: tuple[str, ...]
    accession: str
    series_count: int | None


@dataclass(frozen=True)
class SeriesRecord:
    """One series of a study."""

    series_uid: str
    study_uid: str
    modality: str
    description: str
    number: int | None
    instances: int | None


class PacsClient(Protocol):
    """A connection to one PACS node (DIMSE or DICOMweb)."""

    node: PacsNode

    def echo(self) -> None:
        """Check that the node answers (C-ECHO, or a QIDO-RS request); PacsError when it does not."""

    def find_studies(self, query: StudyQuery) -> list[StudyRecord]:
        """The studies matching `query`."""

    def find_series(self, study_uid: str) -> list[SeriesRecord]:
        """The series of one study."""

    def retrieve(
        self,
        study_uid: str,
        series_uid: str,
        cache: SeriesCache,
        *,
        progress: Callable[[int, int | None], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Retrieved:
        """One series into `cache` (a complete series, or a PacsError and nothing that looks complete).
        `progress(received, expected)`; `should_stop()` true cancels (PacsError)."""

    def store(self, files: Sequence[Path], *, progress: Callable[[int, int], None] | None = None) -> int:
        """Send `files` to the node; the number stored. `progress(done, total)`."""


__all__ = ["PacsClient", "PacsError", "Retrieved", "SeriesRecord", "StudyQuery", "StudyRecord", "pacs_error"]
