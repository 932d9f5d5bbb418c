"""DIMSE against a real Orthanc on loopback (tests/io/pacs/orthanc.py): echo, find, C-GET and C-MOVE into the cache,
C-STORE, and each failure as one line with nothing in the cache that looks complete. No mocks."""

from __future__ import annotations

import io
import logging
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pydicom
import pytest

from app.io.pacs.cache import SeriesCache
from app.io.pacs.client import PacsError, StudyQuery
from app.io.pacs.connect import connect
from app.io.pacs.dimse import DimseClient
from app.io.pacs.nodes import PacsNode, parse_node
from tests.io.pacs.orthanc import Orthanc, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/dicom_factory.py
import dicom_factory

REPO = Path(__file__).resolve().parents[3]
CT_SAMPLE = sorted((REPO / "resources" / "samples" / "ct").glob("IM*"))


@pytest.fixture
def series(orthanc: Orthanc, tmp_path: Path) -> tuple[str, str, list[Path]]:
    """A factory series of 12 slices on the server under a patient ID of its own: (study UID, series UID, files)."""
    patient = f"PID-{tmp_path.name[-12:]}"
    paths = dicom_factory.write_series(tmp_path / "upload", slices=12, patient=("Doe^Jane", patient))
    orthanc.upload(paths)
    ds = pydicom.dcmread(paths[0])
    return str(ds.StudyInstanceUID), str(ds.SeriesInstanceUID), paths


def node_of(orthanc: Orthanc, **changes: object) -> PacsNode:
    return replace(parse_node(orthanc.dimse_url), timeout_s=10.0, **changes)  # type: ignore[arg-type]


def _datasets_equal(received: Path, uploaded: Path) -> None:
    got, sent = pydicom.dcmread(received), pydicom.dcmread(uploaded)
    assert got.SOPInstanceUID == sent.SOPInstanceUID
    assert got.file_meta.TransferSyntaxUID == sent.file_meta.TransferSyntaxUID
    assert got == sent  # every element of the dataset (the file meta aside: the server writes its own)
    assert (got.pixel_array == sent.pixel_array).all()


def _by_sop(folder: Path) -> dict[str, Path]:
    return {str(pydicom.dcmread(p, stop_before_pixels=True).SOPInstanceUID): p for p in folder.glob("*.dcm")}


def test_echo(orthanc: Orthanc) -> None:
    connect(node_of(orthanc)).echo()


def test_find_by_patient_id_then_its_series(orthanc: Orthanc, series: tuple[str, str, list[Path]]) -> None:
    study_uid, series_uid, paths = series
    patient = str(pydicom.dcmread(paths[0]).PatientID)
    client = connect(node_of(orthanc))
    studies = client.find_studies(StudyQuery(patient_id=patient))
    assert [(s.study_uid, s.patient_id, s.patient_name, s.study_date, s.description, s.modalities, s.accession)
            for s in studies] == [(study_uid, patient, "Doe^Jane", "20260101", "CHEST", ("CT",), "A1")]
    assert studies[0].series_count == 1
    found = client.find_series(study_uid)
    assert [(s.series_uid, s.modality, s.description, s.number, s.instances) for s in found] == [
        (series_uid, "CT", "Axial 2.5 mm", 3, 12)]
    assert client.find_studies(StudyQuery(patient_id=patient, study_date=("20250101", "20251231"))) == []
    assert [s.study_uid for s in client.find_studies(StudyQuery(patient_id=patient, modality="CT"))] == [study_uid]


def test_c_get_into_the_cache(orthanc: Orthanc, series: tuple[str, str, list[Path]], cache: SeriesCache) -> None:
    study_uid, series_uid, paths = series
    seen: list[tuple[int, int | None]] = []
    got = connect(node_of(orthanc)).retrieve(study_uid, series_uid, cache, progress=lambda n, t: seen.append((n, t)))
    assert got.folder == cache.complete(series_uid) and got.files == 12
    assert got.bytes == sum(p.stat().st_size for p in got.folder.glob("*.dcm"))
    received = _by_sop(got.folder)
    for path in paths:
        _datasets_equal(received[str(pydicom.dcmread(path).SOPInstanceUID)], path)
    assert sorted(seen) == [(n, 12) for n in range(1, 13)]


def test_the_bundled_ct_sample_over_c_get_and_c_move(orthanc: Orthanc, tmp_path: Path) -> None:
    """The sample (RLE Lossless) arrives in its own transfer syntax, pixels equal, by C-GET and by C-MOVE."""
    orthanc.upload(CT_SAMPLE)
    first = pydicom.dcmread(CT_SAMPLE[0])
    study_uid, series_uid = str(first.StudyInstanceUID), str(first.SeriesInstanceUID)
    for store_port in (0, orthanc.scp_port):
        cache = SeriesCache(tmp_path / f"cache{store_port}")
        got = connect(node_of(orthanc, store_port=store_port)).retrieve(study_uid, series_uid, cache)
        assert got.files == len(CT_SAMPLE) == 32
        received = _by_sop(got.folder)
        for path in CT_SAMPLE[::8]:
            _datasets_equal(received[str(pydicom.dcmread(path).SOPInstanceUID)], path)


def test_c_move_to_our_storage_scp(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                   cache: SeriesCache) -> None:
    study_uid, series_uid, paths = series
    got = connect(node_of(orthanc, store_port=orthanc.scp_port)).retrieve(study_uid, series_uid, cache)
    assert got.files == 12 and sorted(_by_sop(got.folder)) == sorted(
        str(pydicom.dcmread(p).SOPInstanceUID) for p in paths)


def test_c_move_to_a_destination_the_server_does_not_know(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                                          cache: SeriesCache) -> None:
    study_uid, series_uid, _ = series
    node = node_of(orthanc, store_port=free_port(), calling_ae="STRANGER")
    with pytest.raises(PacsError) as err:
        connect(node).retrieve(study_uid, series_uid, cache)
    assert str(err.value).startswith(f"pacs {node.name}: ")
    assert "STRANGER" in str(err.value) and "\n" not in str(err.value)
    assert cache.complete(series_uid) is None


def test_c_store_then_find_it(orthanc: Orthanc, tmp_path: Path) -> None:
    paths = dicom_factory.write_series(tmp_path / "send", slices=3, patient=("Roe^Rick", "PID-STORE-1"))
    done: list[tuple[int, int]] = []
    client = connect(node_of(orthanc))
    assert client.store(paths, progress=lambda n, t: done.append((n, t))) == 3
    assert done == [(1, 3), (2, 3), (3, 3)]
    studies = client.find_studies(StudyQuery(patient_id="PID-STORE-1"))
    assert len(studies) == 1
    assert [s.instances for s in client.find_series(studies[0].study_uid)] == [3]
    stored = orthanc.series_instances(str(pydicom.dcmread(paths[0]).SeriesInstanceUID))
    by_sop = {str(ds.SOPInstanceUID): ds for ds in (pydicom.dcmread(io.BytesIO(data)) for data in stored)}
    for path in paths:
        sent = pydicom.dcmread(path)
        assert by_sop[str(sent.SOPInstanceUID)] == sent  # every element as sent


def test_c_store_an_rle_sample_in_its_own_syntax_and_storescu_agrees(orthanc: Orthanc) -> None:
    """The RLE CT sample goes in its own transfer syntax; dcmtk's findscu (an independent client) then finds it."""
    client = connect(node_of(orthanc))
    assert client.store(CT_SAMPLE[:2]) == 2
    findscu = subprocess.run(["findscu", "-S", "-aet", "SEGLENS", "-aec", orthanc.aet, "-k", "QueryRetrieveLevel=STUDY",
                              "-k", "PatientID=OW-40712", "-k", "StudyInstanceUID", "127.0.0.1",
                              str(orthanc.dicom_port)], capture_output=True, text=True, timeout=60)
    if findscu.returncode == 127:
        pytest.skip("dcmtk is not installed")
    assert str(pydicom.dcmread(CT_SAMPLE[0]).StudyInstanceUID) in findscu.stdout + findscu.stderr


def test_c_store_of_a_file_that_is_not_dicom(orthanc: Orthanc, tmp_path: Path) -> None:
    bad = tmp_path / "notes.dcm"
    bad.write_text("not DICOM")
    with pytest.raises(PacsError, match=rf"^{bad}: not a DICOM file that can be sent \(InvalidDicomError\)$"):
        connect(node_of(orthanc)).store([bad])


def test_wrong_called_ae_title(orthanc: Orthanc) -> None:
    node = node_of(orthanc, called_ae="NOTORTHANC")
    with pytest.raises(PacsError) as err:
        connect(node).echo()
    assert str(err.value) == (f"pacs {node.name}: association rejected: called AE title not recognised "
                              "('NOTORTHANC' is not the server's AE title)")


def test_a_calling_ae_title_the_server_does_not_know(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                                     cache: SeriesCache) -> None:
    node = node_of(orthanc, calling_ae="NOBODY")
    expected = (f"pacs {node.name}: C-FIND: the server ended the association without an answer (it went away, or "
                "its AE table does not know our calling AE title 'NOBODY')")
    with pytest.raises(PacsError) as err:
        connect(node).find_studies(StudyQuery())
    assert str(err.value) == expected
    with pytest.raises(PacsError) as err:
        connect(node).retrieve(*series[:2], cache)
    assert str(err.value) == expected
    assert cache.complete(series[1]) is None


def test_a_closed_port(orthanc: Orthanc) -> None:
    node = node_of(orthanc, port=free_port())
    with pytest.raises(PacsError) as err:
        connect(node).echo()
    assert str(err.value) == (f"pacs {node.name}: connection to 127.0.0.1:{node.port} refused (is the server "
                              "running on that port?)")


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as silent:  # accepts the TCP connection (the backlog), never speaks DICOM
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        node = parse_node(f"dimse://SILENT@127.0.0.1:{silent.getsockname()[1]}?timeout=0.5")
        with pytest.raises(PacsError) as err:
            connect(node).echo()
    assert str(err.value) == f"pacs {node.name}: no answer to the association request within 0.5 s"


def test_the_server_stopped_mid_retrieve(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                         cache: SeriesCache) -> None:
    study_uid, series_uid, _ = series

    def progress(received: int, total: int | None) -> None:
        if received == 3:
            orthanc.stop()

    node = node_of(orthanc)
    with pytest.raises(PacsError) as err:
        connect(node).retrieve(study_uid, series_uid, cache, progress=progress)
    message = str(err.value)
    assert message.startswith(f"pacs {node.name}: C-GET: the server went away mid-retrieve after ")
    assert message.endswith(" of 12 instances; nothing kept") and "\n" not in message
    assert cache.complete(series_uid) is None and cache.series() == []
    assert not [p.name for p in cache.root.iterdir() if ".partial-" in p.name]  # no receiving folder left


def test_a_stop_asked_mid_retrieve(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                   cache: SeriesCache) -> None:
    study_uid, series_uid, _ = series
    received: list[int] = []
    node = node_of(orthanc)
    with pytest.raises(PacsError, match=r"retrieve stopped after \d+ of 12 instances; nothing kept$"):
        connect(node).retrieve(study_uid, series_uid, cache, progress=lambda n, t: received.append(n),
                               should_stop=lambda: len(received) >= 4)
    assert cache.complete(series_uid) is None


def test_an_instance_deleted_on_the_server_mid_retrieve(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                                        cache: SeriesCache) -> None:
    """A failed sub-operation (the instance went from the server after the C-GET began): one line, nothing kept."""
    study_uid, series_uid, _ = series
    ids = orthanc.request("GET", f"/series/{_orthanc_series(orthanc, series_uid)}/instances")

    def progress(received: int, total: int | None) -> None:
        if received == 1:
            for item in ids[-3:]:
                orthanc.request("DELETE", f"/instances/{item['ID']}")

    node = node_of(orthanc)
    with pytest.raises(PacsError) as err:
        connect(node).retrieve(study_uid, series_uid, cache, progress=progress)
    assert str(err.value).startswith(f"pacs {node.name}: ")
    assert "nothing kept" in str(err.value) and "\n" not in str(err.value)
    assert cache.complete(series_uid) is None


class _ListedBeforeADeletion(DimseClient):
    """The real client, with an instance deleted on the server between its C-FIND and its C-GET (the race of a
    PACS whose series changes while it is being retrieved)."""

    def __init__(self, node: PacsNode, orthanc: Orthanc) -> None:
        super().__init__(node)
        self.orthanc = orthanc

    def find_instances(self, study_uid: str, series_uid: str) -> dict[str, str]:
        listed = super().find_instances(study_uid, series_uid)
        first = self.orthanc.request("GET", f"/series/{_orthanc_series(self.orthanc, series_uid)}/instances")[0]
        self.orthanc.request("DELETE", f"/instances/{first['ID']}")
        return listed


def test_fewer_instances_than_the_c_find_said(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                              cache: SeriesCache) -> None:
    study_uid, series_uid, _ = series
    node = node_of(orthanc)
    with pytest.raises(PacsError) as err:
        _ListedBeforeADeletion(node, orthanc).retrieve(study_uid, series_uid, cache)
    assert str(err.value) == (f"pacs {node.name}: partial retrieve: 11 of 12 instances received (fewer than "
                              "C-FIND listed); nothing kept")
    assert cache.complete(series_uid) is None and cache.series() == []


def test_a_series_the_server_does_not_have(orthanc: Orthanc, cache: SeriesCache) -> None:
    node = node_of(orthanc)
    with pytest.raises(PacsError) as err:
        connect(node).retrieve("1.2.3", "1.2.3.4", cache)
    assert str(err.value) == f"pacs {node.name}: the series is not on the server (C-FIND found no instances)"


def _orthanc_series(orthanc: Orthanc, series_uid: str) -> str:
    found = orthanc.request("POST", "/tools/lookup", series_uid.encode(), content_type="text/plain")
    return str(next(item["ID"] for item in found if item["Type"] == "Series"))


def test_no_patient_field_reaches_the_log(orthanc: Orthanc, series: tuple[str, str, list[Path]],
                                          cache: SeriesCache, caplog: pytest.LogCaptureFixture) -> None:
    """pynetdicom dumps each C-FIND identifier at DEBUG: its logger stays at WARNING, ours name no patient."""
    study_uid, series_uid, paths = series
    patient = str(pydicom.dcmread(paths[0]).PatientID)
    with caplog.at_level(logging.DEBUG):
        client = connect(node_of(orthanc))
        assert client.find_studies(StudyQuery(patient_id=patient))
        client.retrieve(study_uid, series_uid, cache)
        with pytest.raises(PacsError):
            connect(node_of(orthanc, called_ae="WRONG")).find_studies(StudyQuery(patient_id=patient))
    assert caplog.records  # something was logged (our DEBUG line at least)
    assert patient not in caplog.text and "Doe^Jane" not in caplog.text
