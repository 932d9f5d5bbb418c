"""DicomWebClient against a real Orthanc on loopback (tests/io/pacs/orthanc.py: basic auth on), no mocks: QIDO-RS
search, WADO-RS retrieve into the cache, STOW-RS store, and each failure as one line naming the node.

TLS: Debian's Orthanc 1.10 crashes on its first HTTPS request (SslEnabled: civetweb calls an OpenSSL 1.1 function
OpenSSL 3 no longer has, a null pointer in a worker thread), so the self-signed certificate is served by a TLS
relay in front of Orthanc, as a hospital's reverse proxy would be.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pydicom
import pytest
import requests

from app.io.pacs import dicomweb
from app.io.pacs.cache import SeriesCache
from app.io.pacs.client import PacsError, StudyQuery
from app.io.pacs.connect import connect
from app.io.pacs.dicomweb import DicomWebClient, truncated
from app.io.pacs.dicomweb_json import matches, sendable, series_record, study_filters, study_record, wanted
from app.io.pacs.nodes import parse_node
from tests.dicom_factory import write_series
from tests.io.pacs.orthanc import Orthanc, free_port

PREFIX = "DW-"  # this module's patients, deleted after each test: the session's server is shared with other tests


@pytest.fixture(autouse=True)
def _own_patients_deleted(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "orthanc" not in request.fixturenames:  # the tests of pure functions need no server
        return
    orthanc_server: Orthanc = request.getfixturevalue("orthanc_server")
    orthanc_server.start()  # again, where the test stopped it
    query = json.dumps({"Level": "Patient", "Query": {"PatientID": f"{PREFIX}*"}}).encode()
    for patient in orthanc_server.request("POST", "/tools/find", query, content_type="application/json"):
        orthanc_server.request("DELETE", f"/patients/{patient}")


def patient() -> str:
    return f"{PREFIX}{uuid.uuid4().hex[:8]}"


def client(orthanc: Orthanc, *, url: str = "", password: str = "", options: str = "") -> DicomWebClient:
    text = f"dicomweb+{url or orthanc.dicomweb_url}?user={orthanc.user}{options}"
    made = connect(parse_node(text), secret=password or orthanc.password)
    assert isinstance(made, DicomWebClient)
    return made


def uploaded(orthanc: Orthanc, folder: Path, **options: object) -> tuple[str, list[Path]]:
    """A factory series stored on the server under a patient ID of its own; (patient ID, files)."""
    patient_id = patient()
    paths = write_series(folder, patient=("Doe^Jane", patient_id), **options)  # type: ignore[arg-type]
    orthanc.upload(paths)
    return patient_id, paths


def instances(folder: Path) -> dict[str, np.ndarray]:
    """SOPInstanceUID → pixels of the DICOM files in `folder`."""
    read = (pydicom.dcmread(p) for p in sorted(folder.glob("*.dcm")))
    return {str(ds.SOPInstanceUID): ds.pixel_array for ds in read}


def nothing_complete(cache: SeriesCache, series_uid: str) -> None:
    assert cache.complete(series_uid) is None
    assert not [p for p in cache.root.rglob("*.dcm")], "no instance of a failed retrieve is left behind"


def test_find_by_patient_and_date_then_retrieve_over_wado(orthanc: Orthanc, cache: SeriesCache, tmp_path: Path):
    patient_id, paths = uploaded(orthanc, tmp_path / "sent", slices=6)
    web = client(orthanc)
    web.echo()
    [study] = web.find_studies(StudyQuery(patient_id=patient_id, study_date=("20251201", "20260131")))
    assert (study.patient_id, study.patient_name, study.study_date) == (patient_id, "Doe^Jane", "20260101")
    assert (study.description, study.modalities, study.accession, study.series_count) == ("CHEST", ("CT",), "A1", 1)
    assert web.find_studies(StudyQuery(patient_id=patient_id, study_date=("20260102", ""))) == []
    assert web.find_studies(StudyQuery(patient_id=patient_id, modality="MR")) == []
    for found_by in (StudyQuery(patient_id=patient_id, accession="A1"), StudyQuery(study_uid=study.study_uid),
                     StudyQuery(patient_id=patient_id, patient_name="Doe^Jane", modality="CT")):
        assert [s.study_uid for s in web.find_studies(found_by)] == [study.study_uid]
    assert web.find_studies(StudyQuery(patient_id=patient_id, accession="A2")) == []
    # Orthanc 1.10 matches the raw query text: "Doe%5EJane" found nobody, "Doe%2A" no wildcard (failed before)
    for name in ("Doe^Jane", "doe^jane", "Doe*", "D?e^J*"):
        by_name = StudyQuery(patient_id=patient_id, patient_name=name)
        assert [s.study_uid for s in web.find_studies(by_name)] == [study.study_uid], name
    for name in ("Doe^John", "Doe Jane", "Jane*"):
        assert web.find_studies(StudyQuery(patient_id=patient_id, patient_name=name)) == [], name
    [series] = web.find_series(study.study_uid)
    assert (series.modality, series.description, series.number, series.instances) == ("CT", "Axial 2.5 mm", 3, 6)

    seen: list[tuple[int, int | None]] = []
    got = web.retrieve(study.study_uid, series.series_uid, cache, progress=lambda k, n: seen.append((k, n)))
    assert seen == [(k, 6) for k in range(7)]
    assert (got.series_uid, got.files, got.folder) == (series.series_uid, 6, cache.complete(series.series_uid))
    assert got.bytes == sum(p.stat().st_size for p in got.folder.glob("*.dcm"))
    sent, received = instances(paths[0].parent), instances(got.folder)
    assert sorted(received) == sorted(sent)
    for uid, pixels in sent.items():
        np.testing.assert_array_equal(received[uid], pixels)


def test_store_in_batches_then_found_by_qido(orthanc: Orthanc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(dicomweb, "BATCH_FILES", 2)  # five files: three STOW-RS requests
    patient_id = patient()
    paths = write_series(tmp_path / "new", slices=5, patient=("Roe^Rick", patient_id), description="stowed")
    web = client(orthanc)
    seen: list[tuple[int, int]] = []
    assert web.store(paths, progress=lambda k, n: seen.append((k, n))) == 5
    assert seen == [(2, 5), (4, 5), (5, 5)]
    [study] = web.find_studies(StudyQuery(patient_id=patient_id))
    [series] = web.find_series(study.study_uid)
    assert (series.description, series.instances) == ("stowed", 5)


def test_instances_the_server_refuses_are_one_line_and_the_rest_stored(orthanc: Orthanc, tmp_path: Path):
    patient_id = patient()
    paths = write_series(tmp_path / "mixed", slices=5, patient=("Roe^Rick", patient_id))
    for path in paths[3:]:  # Orthanc cannot index an instance without its series
        ds = pydicom.dcmread(path)
        del ds.SeriesInstanceUID
        ds.save_as(path)
    (tmp_path / "notes.txt").write_text("not DICOM")
    web = client(orthanc)
    with pytest.raises(PacsError) as refused:
        web.store([*paths, tmp_path / "notes.txt"])
    assert str(refused.value) == (
        f"pacs {web.node.name}: 3 of 6 instances refused: cannot understand (0xC000), "
        "notes.txt is not a readable DICOM file"
    )
    [study] = web.find_studies(StudyQuery(patient_id=patient_id))
    assert [s.instances for s in web.find_series(study.study_uid)] == [3]


def test_wrong_password_is_one_line(orthanc: Orthanc):
    web = client(orthanc, password="not-the-password")
    with pytest.raises(PacsError) as failed:
        web.echo()
    assert str(failed.value) == (
        f"pacs {web.node.name}: user 'seglens' and its password not accepted (HTTP 401 Unauthorized)"
    )


def test_a_failed_search_does_not_carry_the_patient_id_into_a_traceback(orthanc: Orthanc):
    """requests' message quotes the QIDO-RS URL, PatientID and all; a log's traceback of the error must not."""
    web = client(orthanc, password="not-the-password")
    with pytest.raises(PacsError) as failed:
        web.find_studies(StudyQuery(patient_id="PID-SECRET-77", patient_name="Doe^Secret"))
    told, shown = [], failed.value  # each message a traceback prints: the chain it follows
    while shown is not None:
        told.append(str(shown))
        shown = shown.__cause__ or (None if shown.__suppress_context__ else shown.__context__)
    assert len(told) == 1 and "PID-SECRET-77" not in told[0] and "Secret" not in told[0]


def test_a_token_the_server_does_not_know_is_one_line(orthanc: Orthanc):
    web = connect(parse_node(f"dicomweb+{orthanc.dicomweb_url}?auth=bearer"), secret="some-token")
    with pytest.raises(PacsError, match=r": the token not accepted \(HTTP 401 Unauthorized\)$"):
        web.find_studies(StudyQuery(patient_id="PID-0042"))


def test_no_password_anywhere_is_one_line(orthanc: Orthanc, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SEGLENS_PACS_SECRET", raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")  # a keyring that holds nothing
    node = parse_node(f"dicomweb+{orthanc.dicomweb_url}?user={orthanc.user}")
    with pytest.raises(PacsError) as failed:
        connect(node)
    assert str(failed.value) == f"pacs {node.name}: no password for basic auth (keyring or SEGLENS_PACS_SECRET)"


class _TokenDesk(http.server.BaseHTTPRequestHandler):
    """A QIDO-RS study search answered with no studies to the one bearer token it knows, 401 to anything else."""

    def do_GET(self) -> None:
        known = self.headers.get("Authorization") == "Bearer the-token"
        body = b"[]" if known else b""
        self.send_response(200 if known else 401)
        self.send_header("Content-Type", "application/dicom+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


def test_a_bearer_token_goes_in_the_authorization_header():
    # Orthanc checks only basic auth: a small HTTP server of the test's own stands for a token-checking gateway
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TokenDesk) as desk:
        threading.Thread(target=desk.serve_forever, daemon=True).start()
        try:
            url = f"dicomweb+http://127.0.0.1:{desk.server_address[1]}/dicom-web?auth=bearer"
            connect(parse_node(url), secret="the-token").echo()
            assert connect(parse_node(url), secret="the-token").find_studies(StudyQuery(patient_id="P")) == []
            with pytest.raises(PacsError, match=r": the token not accepted \(HTTP 401 Unauthorized\)$"):
                connect(parse_node(url), secret="another-token").echo()
        finally:
            desk.shutdown()


class _Broken(http.server.BaseHTTPRequestHandler):
    """/down/…: HTTP 503; /page/…: a 200 web page where DICOM JSON belongs (a service root pointing at a portal)."""

    def do_GET(self) -> None:
        down = self.path.startswith("/down/")
        body = b"" if down else b"<html><body>Welcome to the portal</body></html>"
        self.send_response(503 if down else 200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


def test_a_server_error_and_a_web_page_are_one_line_each():
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Broken) as broken:
        threading.Thread(target=broken.serve_forever, daemon=True).start()
        try:
            root = f"http://127.0.0.1:{broken.server_address[1]}"
            down = connect(parse_node(f"dicomweb+{root}/down"))
            with pytest.raises(PacsError) as failed:
                down.find_studies(StudyQuery(patient_id="P"))
            assert str(failed.value) == (
                f"pacs {down.node.name}: server error (HTTP 503 Service Unavailable) while searching for studies"
            )
            page = connect(parse_node(f"dicomweb+{root}/page"))
            with pytest.raises(PacsError) as failed:
                page.echo()
            assert str(failed.value) == (
                f"pacs {page.node.name}: not a DICOMweb answer while checking the service (not DICOM JSON): "
                f"is {root}/page the DICOMweb service root?"
            )
        finally:
            broken.shutdown()


def test_wrong_service_root_is_one_line(orthanc: Orthanc):
    web = client(orthanc, url=f"{orthanc.http_url}/dicomweb")
    with pytest.raises(PacsError) as failed:
        web.echo()
    assert str(failed.value) == (
        f"pacs {web.node.name}: not found (HTTP 404 Not Found) while checking the service: "
        f"is {orthanc.http_url}/dicomweb the DICOMweb service root?"
    )


def test_connection_refused_is_one_line(orthanc: Orthanc):
    port = free_port()  # nothing listens there
    web = client(orthanc, url=f"http://127.0.0.1:{port}/dicom-web")
    with pytest.raises(PacsError) as failed:
        web.find_studies(StudyQuery(patient_id="PID-0042"))
    assert str(failed.value) == f"pacs {web.node.name}: cannot connect to 127.0.0.1:{port} (connection refused)"


def test_a_server_that_never_answers_times_out_in_one_line(orthanc: Orthanc):
    with socket.socket() as silent:  # accepts the connection (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        web = client(orthanc, url=f"http://127.0.0.1:{port}/dicom-web", options="&timeout=0.5")
        with pytest.raises(PacsError) as failed:
            web.echo()
    # the request's deadline and the socket's read timeout are both 0.5 s: whichever fires first on a loaded
    # machine says it, each in one line
    assert str(failed.value) in (f"pacs {web.node.name}: a request to 127.0.0.1:{port} took longer than 0.5 s while "
                                 "checking the service",
                                 f"pacs {web.node.name}: no answer within 0.5 s while checking the service")


def test_server_stopped_mid_retrieve_leaves_no_series(orthanc: Orthanc, cache: SeriesCache, tmp_path: Path):
    # 64 slices of 512² (33 MB): well over what loopback's socket buffers hold once the server is gone (~16 of 40
    # such slices arrived after the kill on the machine this was written on)
    patient_id, _ = uploaded(orthanc, tmp_path / "big", slices=64, rows=512, columns=512)
    web = client(orthanc)
    [study] = web.find_studies(StudyQuery(patient_id=patient_id))
    [series] = web.find_series(study.study_uid)

    def kill_after_first(k: int, n: int | None) -> None:
        if k == 1:
            orthanc.stop()

    with pytest.raises(PacsError) as failed:
        web.retrieve(study.study_uid, series.series_uid, cache, progress=kill_after_first)
    message = str(failed.value)
    assert message.startswith(f"pacs {web.node.name}: ") and "\n" not in message
    assert " of 64 instances received" in message
    nothing_complete(cache, series.series_uid)


def test_a_series_deleted_after_it_was_found_is_one_line(orthanc: Orthanc, cache: SeriesCache, tmp_path: Path):
    patient_id, _ = uploaded(orthanc, tmp_path / "s", slices=3)
    web = client(orthanc)
    [study] = web.find_studies(StudyQuery(patient_id=patient_id))
    [series] = web.find_series(study.study_uid)

    def delete_once_counted(k: int, n: int | None) -> None:  # progress(0, n) comes after the QIDO-RS count
        if k == 0:
            found = orthanc.request("POST", "/tools/lookup", patient_id.encode(), content_type="text/plain")
            for patient in (item["ID"] for item in found if item["Type"] == "Patient"):
                orthanc.request("DELETE", f"/patients/{patient}")

    with pytest.raises(PacsError) as failed:
        web.retrieve(study.study_uid, series.series_uid, cache, progress=delete_once_counted)
    assert str(failed.value) == (
        f"pacs {web.node.name}: not found (HTTP 404 Not Found) while retrieving the series (0 of 3 instances received)"
    )
    nothing_complete(cache, series.series_uid)


def test_stop_between_instances_leaves_no_series(orthanc: Orthanc, cache: SeriesCache, tmp_path: Path):
    patient_id, _ = uploaded(orthanc, tmp_path / "s", slices=6)
    web = client(orthanc)
    [study] = web.find_studies(StudyQuery(patient_id=patient_id))
    [series] = web.find_series(study.study_uid)
    seen: list[int] = []
    with pytest.raises(PacsError) as stopped:
        web.retrieve(study.study_uid, series.series_uid, cache, progress=lambda k, n: seen.append(k),
                     should_stop=lambda: len(seen) > 2)
    assert str(stopped.value) == f"pacs {web.node.name}: retrieve stopped (2 of 6 instances received)"
    nothing_complete(cache, series.series_uid)


def test_a_series_the_server_does_not_have_is_one_line(orthanc: Orthanc, cache: SeriesCache):
    web = client(orthanc)
    with pytest.raises(PacsError, match=r"^pacs .*: series 1\.2\.3\.4 not found in study 1\.2\.3$"):
        web.retrieve("1.2.3", "1.2.3.4", cache)


# --- TLS: a self-signed certificate in front of Orthanc ---


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture
def tls_relay(orthanc: Orthanc, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """HTTPS on a port of its own, relayed to Orthanc's HTTP port; (the https service root, the certificate)."""
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_accept, args=(listener, context, orthanc.http_port), daemon=True).start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}/dicom-web", cert
    finally:
        listener.close()


def _accept(listener: socket.socket, context: ssl.SSLContext, port: int) -> None:
    while True:
        try:
            raw, _ = listener.accept()
        except OSError:  # the listener closed: the test is over
            return
        threading.Thread(target=_relay, args=(raw, context, port), daemon=True).start()


def _relay(raw: socket.socket, context: ssl.SSLContext, port: int) -> None:
    try:
        secure = context.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):  # the client refused our certificate
        raw.close()
        return
    upstream = socket.create_connection(("127.0.0.1", port))
    threading.Thread(target=_pump, args=(upstream, secure), daemon=True).start()
    _pump(secure, upstream)


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, target):
            s.close()


def test_self_signed_certificate_refused_without_its_ca_bundle(orthanc: Orthanc, tls_relay: tuple[str, Path]):
    url, _ = tls_relay
    web = client(orthanc, url=url)
    with pytest.raises(PacsError) as refused:
        web.echo()
    assert str(refused.value) == (
        f"pacs {web.node.name}: the server's certificate is not trusted "
        "(the system's CA certificates: self-signed certificate)"
    )


def test_self_signed_certificate_accepted_with_its_ca_bundle(orthanc: Orthanc, tls_relay: tuple[str, Path],
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    url, cert = tls_relay
    # requests lets REQUESTS_CA_BUNDLE replace a session's `verify`: the node's own CA bundle must win over it
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", requests.certs.where())
    patient_id, _ = uploaded(orthanc, tmp_path / "s", slices=2)
    web = client(orthanc, url=url, options=f"&ca={cert}")
    web.echo()
    assert [s.patient_id for s in web.find_studies(StudyQuery(patient_id=patient_id))] == [patient_id]


def test_a_ca_bundle_that_is_not_a_file_is_one_line(orthanc: Orthanc, tmp_path: Path):
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(PacsError, match=rf": the CA bundle {missing} is not a file$"):
        client(orthanc, url="https://127.0.0.1:1/dicom-web", options=f"&ca={missing}")


# --- the DICOM JSON read into records, without a server ---


def test_missing_attributes_are_empty_or_none():
    study = study_record({"0020000D": {"vr": "UI", "Value": ["1.2.3"]}, "00100010": {"vr": "PN"}})
    assert (study.study_uid, study.patient_name, study.modalities, study.series_count) == ("1.2.3", "", (), None)
    series = series_record({"0020000E": {"vr": "UI", "Value": ["1.2.3.4"]}, "00201209": {"vr": "IS", "Value": ["x"]}},
                           "1.2.3")
    assert (series.series_uid, series.study_uid, series.number, series.instances) == ("1.2.3.4", "1.2.3", None, None)
    both = study_record({"00080061": {"vr": "CS", "Value": ["CT\\SEG"]}})
    assert both.modalities == ("CT", "SEG")


def test_values_a_server_might_not_decode_are_widened_then_matched_here():
    assert sendable("Doe^Jane") == "Doe?Jane" and sendable("PID 42*") == "PID?42*" and sendable("A-1.x") == "A-1.x"
    assert study_filters(StudyQuery(patient_name="Doe^J*")) == {"PatientName": "Doe?J*"}
    found = study_record({"00100010": {"vr": "PN", "Value": [{"Alphabetic": "DoeXJane"}]},
                          "00100020": {"vr": "LO", "Value": ["PID 42"]}})
    assert not wanted(found, StudyQuery(patient_name="Doe^Jane"))  # the server's "Doe?Jane" matched it too
    assert wanted(found, StudyQuery(patient_name="doexjane")) and wanted(found, StudyQuery(patient_id="PID 42"))
    assert matches("D?e^*", "Doe^Jane") and not matches("D?e^*", "Dooe^Jane") and matches("a[b]", "a[b]")


def test_study_date_ranges_as_qido_keys():
    assert study_filters(StudyQuery(study_date=("20260101", "20260131"))) == {"StudyDate": "20260101-20260131"}
    assert study_filters(StudyQuery(study_date=("20260101", "20260101"))) == {"StudyDate": "20260101"}
    assert study_filters(StudyQuery(study_date=("", "20260131"))) == {"StudyDate": "-20260131"}
    assert study_filters(StudyQuery(study_date=("", ""))) == {}
    assert study_filters(StudyQuery(patient_id="P1", modality="CT")) == {"PatientID": "P1", "ModalitiesInStudy": "CT"}


def test_an_instance_cut_short_is_told_from_a_whole_one(tmp_path: Path):
    """The last part of a multipart answer a dying server cut off reaches us as a dataset of its own."""
    whole = pydicom.dcmread(write_series(tmp_path, slices=1)[0])
    assert not truncated(whole)
    whole.PixelData = whole.PixelData[: len(whole.PixelData) // 2]
    assert truncated(whole)
