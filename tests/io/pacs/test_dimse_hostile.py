"""DIMSE against a hostile server (tests/io/pacs/hostile_scp.py, a real pynetdicom AE on loopback): a dataset of
another series or study under a listed SOP Instance UID is dropped and the retrieve fails in one line; a C-FIND
or a retrieve that never ends is cut by the operation's deadline or its cap on answers; our C-MOVE destination
listens on the address the node reaches us at and takes associations from the node's AE title only."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydicom.dataset import Dataset
from waiting import until

from app.io.pacs import dimse_common
from app.io.pacs.cache import SeriesCache
from app.io.pacs.client import PacsError, StudyQuery
from app.io.pacs.dimse import DimseClient
from app.io.pacs.nodes import PacsNode
from tests.io.pacs.hostile_scp import AE_TITLE, HostileScp, Series, instance, store_as
from tests.io.pacs.orthanc import free_port


@pytest.fixture
def scp() -> Iterator[HostileScp]:
    server = HostileScp()
    try:
        yield server
    finally:
        server.close()


def node_of(scp: HostileScp, *, timeout_s: float = 5.0, store_port: int = 0) -> PacsNode:
    return PacsNode(name="EVIL", kind="dimse", host="127.0.0.1", port=scp.port, called_ae=AE_TITLE,
                    calling_ae="SEGLENS", timeout_s=timeout_s, store_port=store_port)


def _with_move(scp: HostileScp, how: str) -> PacsNode:
    if how == "C-GET":
        return node_of(scp)
    port = free_port()
    scp.destination = ("127.0.0.1", port)
    return node_of(scp, store_port=port)


def _other(field: str):
    """What the server sends: the listed series with the 2nd instance's `field` UID another one's."""
    def sent(listed: Series) -> list[Dataset]:
        datasets = listed.datasets()
        setattr(datasets[1], field, "1.2.3.999." + field.__len__().__str__())
        return datasets
    return sent


@pytest.mark.parametrize("how", ["C-GET", "C-MOVE"])
@pytest.mark.parametrize(("field", "what"), [("SeriesInstanceUID", "series"), ("StudyInstanceUID", "study")])
def test_a_dataset_of_another_series_or_study_is_dropped_and_the_retrieve_fails(
        scp: HostileScp, tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str, field: str, what: str) -> None:
    listed = scp.behaviour.listed
    scp.behaviour.sent = _other(field)
    node, cache = _with_move(scp, how), SeriesCache(tmp_path / "cache")
    asked = listed.series if field == "SeriesInstanceUID" else listed.study
    wrong = "1.2.3.999." + str(len(field))
    with caplog.at_level(logging.WARNING), pytest.raises(PacsError) as err:
        DimseClient(node).retrieve(listed.study, listed.series, cache)
    assert str(err.value) == (f"pacs EVIL: {how}: 1 dataset of another {what} dropped ({field} {wrong}, not "
                              f"{asked}); the series is incomplete, nothing kept")
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped == [f"pacs EVIL: {how}: dropped instance {listed.sops[1]}: {field} {wrong}, not {asked}"]
    assert "HOSTILE-1" not in caplog.text  # no patient field in the line
    assert cache.complete(listed.series) is None and cache.series() == []


@pytest.mark.parametrize("how", ["C-GET", "C-MOVE"])
def test_the_listed_series_itself_still_arrives(scp: HostileScp, tmp_path: Path, how: str) -> None:
    listed = scp.behaviour.listed
    got = DimseClient(_with_move(scp, how)).retrieve(listed.study, listed.series, SeriesCache(tmp_path / "c"))
    assert got.files == 3


def _answers_end(scp: HostileScp) -> None:
    """The server's endless answers stop: pynetdicom let go of them (the association is gone), so none come
    after; a client that stopped reading without an abort would leave them going."""
    until(scp.behaviour.find_ended.is_set, what="the endless C-FIND answers stopped")


def test_a_c_find_with_endless_slow_pending_answers_ends_at_its_deadline(scp: HostileScp) -> None:
    scp.behaviour.endless_find = 0.02
    node = node_of(scp, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(PacsError) as err:
        DimseClient(node).find_studies(StudyQuery())
    took = time.monotonic() - started
    deadline = node.timeout_s * dimse_common.DEADLINE_FACTOR
    assert str(err.value) == (f"pacs EVIL: C-FIND took longer than {deadline:g} s (10 × the node's timeout); "
                              "association aborted")
    assert deadline <= took < deadline + 2 * node.timeout_s + 1
    _answers_end(scp)


def test_a_c_find_with_endless_pending_answers_stops_at_the_cap(scp: HostileScp,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A study search keeps the first MAX_MATCHES (as a DICOMweb search does), says so in one line and aborts;
    an image-level listing (what a retrieve must bring) past the cap is an error."""
    scp.behaviour.endless_find = 0.0
    node = node_of(scp, timeout_s=30)
    with caplog.at_level(logging.WARNING):
        found = DimseClient(node).find_studies(StudyQuery())
    assert len(found) == dimse_common.MAX_MATCHES
    cap = dimse_common.MAX_MATCHES
    assert [r.getMessage() for r in caplog.records if r.name.startswith("app.")] == [
        f"pacs EVIL: more than {cap} studies match; the first {cap} kept (narrow the search)"]
    _answers_end(scp)
    image_level = Dataset()
    image_level.QueryRetrieveLevel, image_level.SOPInstanceUID = "IMAGE", ""
    with pytest.raises(PacsError) as err:
        DimseClient(node).find(image_level, cap=50)
    assert str(err.value) == "pacs EVIL: C-FIND: more than 50 matches; association aborted"


@pytest.mark.parametrize("how", ["C-GET", "C-MOVE"])
def test_a_retrieve_that_never_ends_is_cut(scp: HostileScp, tmp_path: Path, how: str) -> None:
    scp.behaviour.endless_retrieve = True
    listed, cache = scp.behaviour.listed, SeriesCache(tmp_path / "cache")
    node = _with_move(scp, how)
    started = time.monotonic()
    with pytest.raises(PacsError) as err:
        DimseClient(node).retrieve(listed.study, listed.series, cache)
    assert time.monotonic() - started < 20
    cap = dimse_common.answer_cap(len(listed.sops))
    assert str(err.value) == (f"pacs EVIL: {how}: more than {cap} answers for 3 instances (the server kept "
                              "sending); association aborted, nothing kept")
    assert cache.complete(listed.series) is None


def _local_address() -> str | None:
    """This machine's address on its first non-loopback interface (None where it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.77", 9))  # no packet is sent: only the route is chosen
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_the_c_move_destination_takes_the_node_alone_on_loopback(scp: HostileScp, tmp_path: Path) -> None:
    """While the C-MOVE runs, another AE title storing to our destination is rejected, and the destination does
    not listen on this machine's outside address (the node is on loopback)."""
    listed = scp.behaviour.listed
    node = _with_move(scp, "C-MOVE")
    seen: dict[str, str] = {}
    outside = _local_address()

    def before(host: str, port: int) -> None:
        seen["intruder"] = store_as("INTRUDER", host, port, node.calling_ae)
        seen["node"] = store_as(AE_TITLE, host, port, node.calling_ae)
        seen["wrong called"] = store_as(AE_TITLE, host, port, "SOMEONE")
        if outside is not None:
            seen["outside"] = store_as(AE_TITLE, outside, port, node.calling_ae)

    scp.behaviour.before_move = before
    got = DimseClient(node).retrieve(listed.study, listed.series, SeriesCache(tmp_path / "cache"))
    assert got.files == 3
    assert (seen["intruder"], seen["node"], seen["wrong called"]) == ("rejected", "accepted", "rejected")
    if outside is not None:
        assert seen["outside"] == "refused"


def test_the_datasets_of_a_retrieve_are_checked_by_their_own_uids(scp: HostileScp, tmp_path: Path) -> None:
    """A dataset listed by its SOP Instance UID but whose own SOPInstanceUID is another is not kept either."""
    listed = scp.behaviour.listed

    def sent(series: Series) -> list[Dataset]:
        datasets = series.datasets()
        datasets[2] = instance(series.study, series.series, listed.sops[0])  # the first one twice, the third never
        return datasets

    scp.behaviour.sent = sent
    with pytest.raises(PacsError) as err:
        DimseClient(node_of(scp)).retrieve(listed.study, listed.series, SeriesCache(tmp_path / "cache"))
    assert str(err.value) == ("pacs EVIL: partial retrieve: 2 of 3 instances received (fewer than C-FIND listed); "
                              "nothing kept")


def test_a_listed_sop_class_that_is_not_a_uid_is_one_line(scp: HostileScp, tmp_path: Path) -> None:
    """pynetdicom raised ValueError (a traceback) proposing a context for it."""
    scp.behaviour.listed_class = "1.2." + "3" * 80
    listed = scp.behaviour.listed
    with pytest.raises(PacsError) as err:
        DimseClient(node_of(scp)).retrieve(listed.study, listed.series, SeriesCache(tmp_path / "cache"))
    assert str(err.value) == ("pacs EVIL: the server lists an instance whose SOP Class UID is not a DICOM UID "
                              f"({'1.2.' + '3' * 57}...); nothing retrieved")


def test_the_c_move_destination_address_is_the_one_the_node_reaches_us_at(tmp_path: Path) -> None:
    """Never every interface: loopback for a node on loopback, this machine's address on the route to a node
    elsewhere, or the node's store_host setting."""
    from dataclasses import replace

    from app.io.pacs.nodes import load_nodes

    base = PacsNode(name="N", kind="dimse", host="127.0.0.1", port=104, called_ae="N", store_port=11112)
    assert DimseClient(base).local_address() == "127.0.0.1"
    assert DimseClient(replace(base, host="localhost")).local_address() == "127.0.0.1"
    outside = _local_address()
    if outside is not None:
        assert DimseClient(replace(base, host=outside)).local_address() == outside
    settings = tmp_path / "settings.yaml"
    settings.write_text("pacs:\n  FAR:\n    url: dimse://FAR@192.0.2.9:104?store_port=11112\n"
                        "    store_host: 10.1.2.3\n", encoding="utf-8")
    assert DimseClient(load_nodes(settings)["FAR"]).local_address() == "10.1.2.3"
