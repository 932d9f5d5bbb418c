"""Fixtures of the PACS tests: a real Orthanc on loopback for the whole session (tests/io/pacs/orthanc.py), and
each test's own SeriesCache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.io.pacs.cache import SeriesCache
from tests.io.pacs.orthanc import Orthanc


@pytest.fixture(scope="session")
def orthanc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Orthanc]:
    """The session's Orthanc (skips, or fails in CI, where Orthanc is not installed)."""
    server = Orthanc.launch(tmp_path_factory.mktemp("orthanc"))
    try:
        yield server
    finally:
        server.stop(graceful=True)


@pytest.fixture
def orthanc(orthanc_server: Orthanc) -> Orthanc:
    """The session's Orthanc, running (started again where an earlier test stopped it)."""
    orthanc_server.start()
    return orthanc_server


@pytest.fixture
def cache(tmp_path: Path) -> SeriesCache:
    """A SeriesCache of the test's own (never the user's cache folder)."""
    return SeriesCache(tmp_path / "cache")
