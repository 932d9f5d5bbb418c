"""DICOMweb against a hostile service of the tests' own on loopback (tests/io/pacs/dicomweb_server.py): a series UID
that is a path, instances of another series or patient under the series asked for, a series that trickles or never ends,
a search with more matches than anyone should take, a redirect of a store or of a search to another port, a
retrieve killed by SIGTERM; and what a retrieve leaves in the cache (private modes)."""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pydicom
import pytest
from waiting import until

import app.io.pacs.cache as cache_module
from app.cli import main
from app.guard.names import component
from app.io.pacs import dicomweb
from app.io.pacs.cache import SeriesCache, series_key
from app.io.pacs.client import PacsError, StudyQuery
from app.io.pacs.connect import connect
from app.io.pacs.dicomweb import DicomWebClient
from app.io.pacs.nodes import parse_node
from tests.dicom_factory import write_series
from tests.io.pacs.dicomweb_server import WebService, served

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def web() -> Iterator[WebService]:
    with served() as service:
        yield service


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's cache in the test's folder (never the user's)."""
    root = tmp_path / "cache"
    monkeypatch.setattr(cache_module, "default_root", lambda: root)
    return root


def client_of(service: WebService, options: str = "") -> DicomWebClient:
    made = connect(parse_node(service.node_url + options), secret=None)
    assert isinstance(made, DicomWebClient)
    return made


def finished_within(seconds: float, job: Callable[[], object]) -> BaseException | None:
    """Run `job` on a thread; what it raised (None: nothing). Fails when it has not ended within `seconds`."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            job()
            raised.append(None)
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return raised[0]


# --- names: a series UID that is a path -------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", ["../../victim", "{victim}"])
def test_get_of_a_series_uid_that_is_a_path_is_one_line_and_touches_nothing(web, cache_root, tmp_path, hostile, capsys):
    """dicomweb-client puts no such UID in a URL: refused before a request, in its own words (DIMSE, which takes
    any UID, lands it under --to: test_get_hostile.py)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("the user's")
    uid = hostile.format(victim=victim)
    web.serve_files(write_series(tmp_path / "sent", slices=2, series_uid=uid))
    to = tmp_path / "out" / "in"
    assert main(["pacs", "get", web.node_url, web.study_uid, "--to", str(to)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (f"error: pacs {web.node_url}: {uid[:80]!r} is not a DICOM UID (digits and dots, at most "
                            "64): not retrieved\n")
    assert [p.name for p in victim.iterdir()] == ["keep.txt"] and not to.exists()
    assert not list(cache_root.rglob("*.dcm"))


# --- what arrives is checked against what was asked for ----------------------------------------------------------


def test_instances_of_another_series_or_patient_are_dropped_and_the_series_is_not_complete(web, tmp_path, caplog):
    asked = write_series(tmp_path / "asked", slices=3)
    header = pydicom.dcmread(asked[0], stop_before_pixels=True)
    other_patient = write_series(tmp_path / "other", slices=1, patient=("Roe^Rick", "PID-OTHER"),
                                 study_uid=str(header.StudyInstanceUID))
    other_study = write_series(tmp_path / "study", slices=1, series_uid=str(header.SeriesInstanceUID))
    web.serve_files(asked)
    web.instances = [asked[0].read_bytes(), other_patient[0].read_bytes(), asked[1].read_bytes(),
                     other_study[0].read_bytes()]
    web.announced = 4
    cache = SeriesCache(tmp_path / "cache")
    caplog.set_level(logging.WARNING)
    with pytest.raises(PacsError) as failed:
        client_of(web).retrieve(web.study_uid, web.series_uid, cache)
    assert str(failed.value) == (f"pacs {web.node_url}: partial retrieve: 2 of 4 instances received (2 not of the "
                                 "series asked for, dropped)")
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [f"pacs {web.node_url}: an instance dropped from the series retrieved: of another series (its "
                    "SeriesInstanceUID differs)",
                    f"pacs {web.node_url}: an instance dropped from the series retrieved: of another study (its "
                    "StudyInstanceUID differs)"]
    assert not [line for line in said if "Roe" in line or "PID-OTHER" in line]
    assert cache.complete(web.series_uid) is None and not list(cache.root.rglob("*.dcm"))


def test_an_instance_sent_twice_is_not_counted_twice(web, tmp_path):
    asked = write_series(tmp_path / "asked", slices=3)
    web.serve_files(asked)
    web.instances = [asked[0].read_bytes(), asked[0].read_bytes(), asked[1].read_bytes()]
    cache = SeriesCache(tmp_path / "cache")
    with pytest.raises(PacsError) as failed:
        client_of(web).retrieve(web.study_uid, web.series_uid, cache)
    assert str(failed.value) == (f"pacs {web.node_url}: partial retrieve: 2 of 3 instances received (1 not of the "
                                 "series asked for, dropped)")
    assert cache.complete(web.series_uid) is None


def test_a_negative_instance_count_is_no_count(web, tmp_path):
    web.serve_files(write_series(tmp_path / "s", slices=3))
    web.announced = -3
    got = client_of(web).retrieve(web.study_uid, web.series_uid, SeriesCache(tmp_path / "cache"))
    assert got.files == 3


# --- a series or a search that never ends -------------------------------------------------------------------------


def test_a_series_that_trickles_ends_at_its_deadline_in_one_line(web, tmp_path, monkeypatch):
    monkeypatch.setattr(dicomweb, "TRANSFER_DEADLINE_S", 1.5, raising=False)
    web.serve_files(write_series(tmp_path / "s", slices=2))
    web.trickle_s = 0.002  # a byte each 2 ms: each read well inside the per-read timeout, the series ~10 s
    cache = SeriesCache(tmp_path / "cache")
    started = time.monotonic()
    failed = finished_within(8, lambda: client_of(web).retrieve(web.study_uid, web.series_uid, cache))
    assert isinstance(failed, PacsError) and time.monotonic() - started < 6
    assert str(failed) == (f"pacs {web.node_url}: a request to 127.0.0.1:{web.port} took longer than 1.5 s while "
                           "retrieving the series (0 of 2 instances received)")
    assert cache.complete(web.series_uid) is None and not list(cache.root.rglob("*.dcm"))


def test_a_series_that_never_ends_stops_past_the_count_its_search_announced(web, tmp_path):
    web.serve_files(write_series(tmp_path / "s", slices=2))
    web.endless = True
    cache = SeriesCache(tmp_path / "cache")
    failed = finished_within(15, lambda: client_of(web).retrieve(web.study_uid, web.series_uid, cache))
    assert str(failed) == (f"pacs {web.node_url}: the server sent more instances than its search announced (2); "
                           "nothing kept")
    assert cache.complete(web.series_uid) is None


def test_a_series_that_never_ends_uncounted_stops_at_the_size_cap(web, tmp_path, monkeypatch):
    monkeypatch.setattr(dicomweb, "TRANSFER_MAX_BYTES", 200_000, raising=False)
    web.serve_files(write_series(tmp_path / "s", slices=2))
    web.endless, web.announced = True, None  # the search does not say how many
    cache = SeriesCache(tmp_path / "cache")
    failed = finished_within(15, lambda: client_of(web).retrieve(web.study_uid, web.series_uid, cache))
    assert str(failed).startswith(f"pacs {web.node_url}: 127.0.0.1:{web.port}: the answer is larger than 200000 "
                                  "bytes while retrieving the series (")
    assert cache.complete(web.series_uid) is None


def test_a_search_that_trickles_ends_at_the_nodes_timeout(web):
    web.studies, web.trickle_search_s = 50, 0.002  # a byte each 2 ms: each read in time, the answer ~10 s
    failed = finished_within(8, lambda: client_of(web, "?timeout=1").find_studies(StudyQuery(patient_id="P*")))
    assert str(failed) == (f"pacs {web.node_url}?timeout=1: a request to 127.0.0.1:{web.port} took longer than 1 s "
                           "while searching for studies")


def test_a_search_with_too_many_matches_is_cut_in_one_line(web, monkeypatch, caplog):
    monkeypatch.setattr(dicomweb, "MAX_MATCHES", 10, raising=False)
    web.study_uid, web.studies = "1.2.3", 30
    caplog.set_level(logging.WARNING)
    found = client_of(web).find_studies(StudyQuery(patient_id="PID-0042"))
    assert len(found) == 10
    assert [r.getMessage() for r in caplog.records] == [
        f"pacs {web.node_url}: more than 10 studies match; the first 10 kept (narrow the search)"]
    assert any("limit=11" in seen for seen in web.seen)  # the server was asked for no more


# --- redirects --------------------------------------------------------------------------------------------------


def test_a_store_redirected_to_another_port_is_refused_and_nothing_reaches_it(tmp_path, monkeypatch):
    files = write_series(tmp_path / "s", slices=2)
    monkeypatch.setenv("SEGLENS_PACS_SECRET", "the-password")
    with served() as elsewhere, served() as web:
        web.redirect_to = f"{elsewhere.url}/studies"
        made = connect(parse_node(f"{web.node_url}?user=u"), secret="the-password")
        with pytest.raises(PacsError) as failed:
            made.store(files)
        assert str(failed.value) == (
            f"pacs {web.node_url}?user=u: 127.0.0.1:{web.port}: redirected to {elsewhere.url}/studies, another host "
            "or scheme: not followed (the request's credentials and data would go along); give the final URL while "
            "storing instances")
        with pytest.raises(PacsError, match=r": redirected to .* while checking the service$"):
            made.echo()
        assert elsewhere.seen == [] and elsewhere.posted == []


# --- what a retrieve leaves in the cache --------------------------------------------------------------------------


def test_a_retrieved_series_is_private_in_the_cache(web, tmp_path):
    web.serve_files(write_series(tmp_path / "s", slices=3))
    cache = SeriesCache(tmp_path / "cache")
    got = client_of(web).retrieve(web.study_uid, web.series_uid, cache)
    assert got.files == 3
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (cache.root, got.folder, *got.folder.iterdir())}
    assert modes == {name: 0o700 if name in (cache.root.name, got.folder.name) else 0o600 for name in modes}


# --- a retrieve killed mid-series ---------------------------------------------------------------------------------


def _get(web: WebService, to: Path, xdg: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg)}
    return subprocess.Popen([sys.executable, "-m", "app.cli", "pacs", "get", web.node_url, web.study_uid,
                             "--to", str(to)], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
def test_a_get_killed_by_sigterm_leaves_no_half_series_and_the_next_one_completes(web, tmp_path):
    web.serve_files(write_series(tmp_path / "s", slices=3, rows=24, columns=24))
    web.trickle_s = 0.0005  # ~2 s an instance
    to, xdg = tmp_path / "out", tmp_path / "xdg"
    cache = xdg / "SegLens" / "pacs"
    process = _get(web, to, xdg)
    try:
        until(lambda: list(cache.rglob("*.dcm")) or process.poll() is not None, what="one instance in the cache",
              within_s=60)  # one instance in: mid-series
        assert list(cache.rglob("*.dcm")), process.communicate(timeout=5)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, err
    assert not to.exists() or list(to.iterdir()) == []
    assert SeriesCache(cache).complete(web.series_uid) is None and not list(cache.rglob("*.dcm"))

    web.trickle_s = 0
    again = _get(web, to, xdg)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert [p.name for p in to.iterdir()] == [component(web.series_uid)]
    key = series_key(web.series_uid)
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == [key]
    assert not [p for p in cache.rglob("*.dcm") if key not in p.parts]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_get_killed_outright_leaves_a_partial_folder_the_next_one_removes(web, tmp_path):
    web.serve_files(write_series(tmp_path / "s", slices=3, rows=24, columns=24))
    web.trickle_s = 0.0005
    to, xdg = tmp_path / "out", tmp_path / "xdg"
    cache = xdg / "SegLens" / "pacs"
    process = _get(web, to, xdg)
    try:
        until(lambda: list(cache.rglob("*.dcm")), what="one instance in the cache", within_s=60)
        process.kill()
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert SeriesCache(cache).complete(web.series_uid) is None
    web.trickle_s = 0
    again = _get(web, to, xdg)
    assert again.communicate(timeout=120) and again.returncode == 0
    key = series_key(web.series_uid)
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == [key]
    assert not [p for p in cache.rglob("*.dcm") if key not in p.parts]
