"""`seglens-cli pacs get` of a series whose SeriesInstanceUID a server holds as a path (`../../x`, an absolute
path): the series lands in one folder under --to named by the UID made one component, and nothing outside --to is
touched. Against the real Orthanc on loopback (it stores such a UID as it was sent) over DIMSE (C-GET), and over
DICOMweb, where dicomweb-client refuses such a UID in a URL: one line, nothing written."""

from __future__ import annotations

import json
import secrets
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pydicom
import pytest

import app.io.pacs.cache as cache_module
from app.cli import main
from app.guard.names import component
from tests.dicom_factory import write_series
from tests.io.pacs.orthanc import Orthanc

PREFIX = "GH-"


@pytest.fixture
def victim() -> Iterator[Path]:
    """A folder of the user's outside --to, with a short absolute path (a UID has at most 64 characters)."""
    folder = Path("/tmp") / f"sl-victim-{secrets.token_hex(4)}"
    folder.mkdir()
    (folder / "keep.txt").write_text("the user's")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def own(orthanc: Orthanc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Orthanc]:
    """The session's Orthanc; this module's patients deleted after the test; the cache in the test's folder."""
    monkeypatch.setattr(cache_module, "default_root", lambda: tmp_path / "cache")
    monkeypatch.setenv("SEGLENS_PACS_SECRET", orthanc.password)
    yield orthanc
    orthanc.start()
    query = json.dumps({"Level": "Patient", "Query": {"PatientID": f"{PREFIX}*"}}).encode()
    for patient in orthanc.request("POST", "/tools/find", query, content_type="application/json"):
        orthanc.request("DELETE", f"/patients/{patient}")


def _hostile(kind: str, victim: Path, tmp_path: Path) -> tuple[str, Path]:
    """(the UID, the --to folder) where --to / UID is the victim folder."""
    if kind == "absolute":
        return str(victim), tmp_path / "out"
    return f"../../{victim.name}", Path("/tmp") / victim.name.replace("victim", "to") / "in"


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_get_over_dimse_of_a_series_uid_that_is_a_path_stays_under_to(own, victim, tmp_path, kind, capsys):
    uid, to = _hostile(kind, victim, tmp_path)
    try:
        files = write_series(tmp_path / "sent", slices=2, series_uid=uid,
                             patient=("Doe^Jane", f"{PREFIX}{uuid.uuid4().hex[:8]}"))
        own.upload(files)
        study = str(pydicom.dcmread(files[0], stop_before_pixels=True).StudyInstanceUID)
        code = main(["pacs", "get", own.dimse_url, study, "--to", str(to)])
        captured = capsys.readouterr()
        assert [p.name for p in victim.iterdir()] == ["keep.txt"], captured.err
        assert (victim / "keep.txt").read_text() == "the user's"
        assert code == 0, captured.err
        assert [p.name for p in to.iterdir()] == [component(uid)]
        assert len(list((to / component(uid)).iterdir())) == 2
    finally:
        if kind == "relative":
            shutil.rmtree(to.parent, ignore_errors=True)
