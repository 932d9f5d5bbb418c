"""DIMSE over TLS against a real Orthanc with DICOM TLS on (a test CA and server certificate): verified with the
node's CA bundle, and an untrusted certificate refused in one line, never ignored."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.io.pacs.cache import SeriesCache
from app.io.pacs.client import PacsError, StudyQuery
from app.io.pacs.connect import connect
from app.io.pacs.nodes import parse_node
from tests.io.pacs.orthanc import Orthanc, TlsFiles, make_tls


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Orthanc, TlsFiles]]:
    folder = tmp_path_factory.mktemp("orthanc-tls")
    files = make_tls(folder / "pki")
    server = Orthanc.launch(folder, tls=files)
    try:
        yield server, files
    finally:
        server.stop(graceful=True)


def test_echo_find_get_over_tls_with_the_ca_bundle(tls_server: tuple[Orthanc, TlsFiles], tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import dicom_factory

    server, files = tls_server
    paths = dicom_factory.write_series(tmp_path / "s", slices=3, patient=("Tls^Test", "PID-TLS"))
    server.upload(paths)
    node = parse_node(f"dimse://{server.aet}@127.0.0.1:{server.dicom_port}?calling=SEGLENS&ca={files.ca}")
    assert node.tls
    client = connect(node)
    client.echo()
    studies = client.find_studies(StudyQuery(patient_id="PID-TLS"))
    series = client.find_series(studies[0].study_uid)
    got = client.retrieve(studies[0].study_uid, series[0].series_uid, SeriesCache(tmp_path / "cache"))
    assert got.files == 3


def test_an_untrusted_certificate_is_one_line(tls_server: tuple[Orthanc, TlsFiles], tmp_path: Path) -> None:
    server, _ = tls_server
    other = make_tls(tmp_path / "other", ca_name="Another CA")  # a CA that did not sign the server's certificate
    node = parse_node(f"dimse://{server.aet}@127.0.0.1:{server.dicom_port}?ca={other.ca}")
    with pytest.raises(PacsError) as err:
        connect(node).echo()
    # OpenSSL's reason (here "self-signed certificate in certificate chain": DCMTK sends its CA along)
    assert re.fullmatch(rf"pacs {re.escape(node.name)}: TLS certificate of 127\.0\.0\.1:{server.dicom_port} not "
                        r"trusted \([a-z -]*certificate[a-z -]*\)", str(err.value)), str(err.value)


def test_plain_dimse_to_a_tls_port_is_one_line(tls_server: tuple[Orthanc, TlsFiles]) -> None:
    server, _ = tls_server
    node = parse_node(f"dimse://{server.aet}@127.0.0.1:{server.dicom_port}?timeout=5")
    with pytest.raises(PacsError) as err:
        connect(node).echo()
    assert str(err.value).startswith(f"pacs {node.name}: ") and "\n" not in str(err.value)
