"""PACS connections: named nodes (nodes), DIMSE (dimse) and DICOMweb (dicomweb) clients behind one Protocol
(client), and the bounded local cache retrieved series land in (cache). Networking libraries load lazily."""

from __future__ import annotations

from app.io.pacs.client import (
    PacsClient,
    PacsError,
    Retrieved,
    SeriesRecord,
    StudyQuery,
    StudyRecord,
)
from app.io.pacs.connect import connect

__all__ = ["PacsClient", "PacsError", "Retrieved", "SeriesRecord", "StudyQuery", "StudyRecord", "connect"]
