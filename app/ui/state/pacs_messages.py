"""Typed frozen records between the window and its PACS worker (File ▸ Open from PACS…, Results ▸ Send to PACS…).

Beside app.ui.state.messages (the inference and display workers' records) and by the same rules: one frozen
record per signal, the request's id inside, Qt-free and numpy-free at run time (the core's types are named for the
type checker only). A module of its own because messages.py is at the house's 400-line limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.inference.model.spec import ClassInfo
    from app.io.pacs.client import SeriesRecord, StudyQuery, StudyRecord
    from app.io.pacs.nodes import PacsNode
    from app.io.volumes import Volume


@dataclass(frozen=True)
class PacsTarget:
    """The node a request goes to, and the password or token typed in the dialog ("": the keyring's, or
    $SEGLENS_PACS_SECRET). Never logged, never kept past the dialog."""

    node: PacsNode
    secret: str = field(default="", repr=False)


@dataclass(frozen=True)
class PacsSearch:
    """Search the node's studies."""

    request_id: int
    target: PacsTarget
    query: StudyQuery


@dataclass(frozen=True)
class PacsStudies:
    """The studies a PacsSearch found."""

    request_id: int
    studies: tuple[StudyRecord, ...]


@dataclass(frozen=True)
class PacsSeriesAsk:
    """List one study's series."""

    request_id: int
    target: PacsTarget
    study_uid: str


@dataclass(frozen=True)
class PacsSeriesFound:
    """The series of a PacsSeriesAsk's study."""

    request_id: int
    study_uid: str
    series: tuple[SeriesRecord, ...]


@dataclass(frozen=True)
class PacsRetrieve:
    """Bring series into the local cache, one after the other (each complete, or not there at all)."""

    request_id: int
    target: PacsTarget
    series: tuple[SeriesRecord, ...]


@dataclass(frozen=True)
class PacsProgress:
    """A retrieve (or a send) going on: series `index` (1-based) of `total`, `received` of `expected` files
    (None: the server did not say)."""

    request_id: int
    index: int
    total: int
    received: int
    expected: int | None


@dataclass(frozen=True)
class PacsRetrieved:
    """A retrieve's end: the complete series' cache folders to open (in the order asked; a SEG's or RTSTRUCT's
    source series in its place), and, when it stopped early (Cancel, a failure), `stopped` with the one line why."""

    request_id: int
    folders: tuple[Path, ...]
    files: int = 0
    stopped: str = ""
    derived: tuple[str, ...] = ()  # a line per SEG / RTSTRUCT: the source series opened for it, or why none was
    reference: Path | None = None  # the SEGs read back, a mask per slice of their source: the reference folder


@dataclass(frozen=True)
class PacsSend:
    """Write the volume's result (`kinds`: "dicom-seg", "sc") to a temporary folder with the exports' code, store
    it to the node and find it there again. `labels` is the whole label volume [D, H, W] uint8 (the count's)."""

    request_id: int
    target: PacsTarget
    volume: Volume
    labels: np.ndarray
    classes: tuple[ClassInfo, ...]
    model_path: Path
    kinds: tuple[str, ...] = ("dicom-seg",)
    anonymize: bool = False
    opacity: float = 0.5


@dataclass(frozen=True)
class PacsSent:
    """A send's end: how many files were stored and found again by a query, and the one line that says so."""

    request_id: int
    stored: int
    verified: int
    line: str


@dataclass(frozen=True)
class PacsUnpin:
    """The series retrieve `request_id` pinned may go now (the dialog closed once they were opened)."""

    request_id: int


@dataclass(frozen=True)
class PacsClearCache:
    """Delete every series the local cache holds (they hold patient data: cleared on request)."""

    request_id: int


@dataclass(frozen=True)
class PacsCacheCleared:
    """The cache is cleared: `series` were deleted, `kept` were left because another SegLens pins them (it is
    receiving or reading them)."""

    request_id: int
    series: int
    kept: int = 0

    def line(self) -> str:
        """'Local cache cleared: 3 series deleted from this computer; 2 series in use by another SegLens were kept'."""
        kept = f"; {self.kept} series in use by another SegLens {'was' if self.kept == 1 else 'were'} kept"
        return f"Local cache cleared: {self.series} series deleted from this computer{kept if self.kept else ''}"


@dataclass(frozen=True)
class PacsFailed:
    """A request failed: one line naming the node ("pacs ORTHANC: …")."""

    request_id: int
    message: str
