"""A real PACS on loopback for the tests: Orthanc (Debian's `orthanc` + `orthanc-dicomweb`), own config, own ports.

`Orthanc.launch(folder)` writes a configuration (random free HTTP and DICOM ports, the DICOMweb plugin, basic auth
with a known user and password, a known AE table: SEGLENS at 127.0.0.1 on the port of the tests' Storage SCP,
storage in `folder`) and starts `Orthanc config.json`; `.stop()` kills it (the "server went away" of a test),
`.start()` brings it back on the same ports and storage. Outside CI a machine without Orthanc skips; in CI (`CI`
set, as .ci/run does) it fails, so the PACS tests cannot silently stop running.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from waiting import until

INSTALL = "apt-get install orthanc orthanc-dicomweb"
PLUGIN_DIRS = (Path("/usr/share/orthanc/plugins"), Path("/usr/lib/orthanc"))  # where Debian puts the plugin


def require() -> str:
    """The Orthanc executable; skips (fails in CI) where it, or its DICOMweb plugin, is not installed."""
    found = shutil.which("Orthanc") or next((p for p in ("/usr/sbin/Orthanc",) if os.access(p, os.X_OK)), None)
    if found and dicomweb_plugin():
        return found
    message = f"Orthanc with its DICOMweb plugin is not installed: {INSTALL}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must test against a real PACS)")
    pytest.skip(message)


def dicomweb_plugin() -> Path | None:
    """The DICOMweb plugin's shared library (`dpkg -L orthanc-dicomweb` lists it)."""
    for folder in PLUGIN_DIRS:
        for candidate in sorted(folder.glob("libOrthancDicomWeb.so*")) if folder.is_dir() else []:
            return candidate
    return None


def free_port() -> int:
    """A TCP port free on loopback now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class TlsFiles:
    """A test CA and a server certificate it signed (for 127.0.0.1 and localhost), PEM files."""

    ca: Path
    certificate: Path
    key: Path


def make_tls(folder: Path, *, ca_name: str = "SegLens test CA") -> TlsFiles:
    """A fresh CA and server certificate (cryptography, which keyring's Linux backend already brings)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def build(subject: str, issuer: x509.Name | None, signer: Any, public: Any, *, ca: bool) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(public)
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = build(ca_name, None, ca_key, ca_key.public_key(), ca=True)
    cert = build("127.0.0.1", ca_cert.subject, ca_key, key.public_key(), ca=False)
    files = TlsFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                            serialization.NoEncryption()))
    return files


@dataclass
class Orthanc:
    """One running Orthanc; see the module docstring."""

    folder: Path
    executable: str
    http_port: int = field(default_factory=free_port)
    dicom_port: int = field(default_factory=free_port)
    scp_port: int = field(default_factory=free_port)  # our Storage SCP's port, for C-MOVE (in the AE table)
    aet: str = "ORTHANC"
    calling_aet: str = "SEGLENS"  # the AE table's name for us
    user: str = "seglens"
    password: str = "pacs-test-secret"
    process: subprocess.Popen[bytes] | None = None
    # DCMTK (Orthanc's DICOM layer) leaves Nagle's algorithm on unless TCP_NODELAY=1 is in its environment: each
    # C-GET sub-operation then waits ~50 ms for a delayed ACK (docs/PERFORMANCE.md). On, as a tuned PACS runs.
    nodelay: bool = True
    tls: TlsFiles | None = None  # DICOM TLS on the DICOM port (tests of certificates)

    @classmethod
    def launch(cls, folder: Path, *, tls: TlsFiles | None = None) -> Orthanc:
        """Write the configuration into `folder` and start the server (ready when this returns)."""
        server = cls(folder=folder, executable=require(), tls=tls)
        server.write_config()
        server.start()
        return server

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def dicomweb_url(self) -> str:
        return f"{self.http_url}/dicom-web"

    @property
    def dimse_url(self) -> str:
        """The server as a SegLens node URL (C-GET)."""
        return f"dimse://{self.aet}@127.0.0.1:{self.dicom_port}?calling={self.calling_aet}"

    @property
    def config_file(self) -> Path:
        return self.folder / "config.json"

    def write_config(self) -> None:
        storage = self.folder / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "Name": "SegLensTests",
            "StorageDirectory": str(storage),
            "IndexDirectory": str(storage),
            "HttpPort": self.http_port,
            "HttpServerEnabled": True,
            "RemoteAccessAllowed": False,  # loopback only
            "AuthenticationEnabled": True,
            "RegisteredUsers": {self.user: self.password},
            "DicomServerEnabled": True,
            "DicomAet": self.aet,
            "DicomPort": self.dicom_port,
            "DicomCheckCalledAet": True,  # a wrong called AE title is refused at the association
            "DicomCheckModalityHost": True,
            "DicomAlwaysAllowEcho": True,
            "DicomAlwaysAllowStore": True,
            "DicomModalities": {"seglens": [self.calling_aet, "127.0.0.1", self.scp_port]},
            "DicomModalitiesInDatabase": False,
            "DicomScuTimeout": 10,
            "DicomScpTimeout": 30,
            "UnknownSopClassAccepted": False,
            "OverwriteInstances": True,
            "SaveJobs": False,
            "StableAge": 1,
            "Plugins": [str(dicomweb_plugin())],
            "DicomWeb": {"Enable": True, "Root": "/dicom-web/", "EnableWado": True, "Ssl": False},
        }
        if self.tls is not None:
            config.update({"DicomTlsEnabled": True, "DicomTlsCertificate": str(self.tls.certificate),
                           "DicomTlsPrivateKey": str(self.tls.key), "DicomTlsTrustedCertificates": str(self.tls.ca),
                           "DicomTlsRemoteCertificateRequired": False})
        self.config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")

    def start(self, *, wait_s: float = 30.0) -> None:
        """Start the server (again) on the same ports and storage; returns once it answers over HTTP."""
        if self.running:
            return
        log = (self.folder / "orthanc.log").open("ab")
        env = {**os.environ, "TCP_NODELAY": "1" if self.nodelay else "0"}
        self.process = subprocess.Popen([self.executable, str(self.config_file)], cwd=self.folder,
                                        stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        try:
            until(self._answering, what=f"Orthanc answering (see {self.folder}/orthanc.log)", within_s=wait_s,
                  every_s=0.1)
        except pytest.fail.Exception:
            self.stop()
            raise

    def _answering(self) -> bool:
        """Orthanc answers over HTTP and listens for DICOM; a RuntimeError if it exited."""
        assert self.process is not None
        if self.process.poll() is not None:
            code = self.process.returncode
            raise RuntimeError(f"Orthanc exited at start ({code}): see {self.folder}/orthanc.log")
        try:
            self.request("GET", "/system")
        except (OSError, urllib.error.URLError):
            return False
        return self._dicom_listening()

    def _dicom_listening(self) -> bool:
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex(("127.0.0.1", self.dicom_port)) == 0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, *, graceful: bool = False) -> None:
        """Stop the server: killed at once (a server going away mid-transfer), or `graceful` (SIGTERM) at the end."""
        if self.process is None:
            return
        if self.process.poll() is None:
            if graceful:
                self.process.terminate()
                try:
                    self.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.process.kill()
            else:
                self.process.kill()
            self.process.wait(timeout=15)
        self.process = None

    def request(self, method: str, path: str, body: bytes | None = None, *,
                content_type: str = "application/dicom", auth: tuple[str, str] | None = None) -> Any:
        """One REST call with basic auth (the fixture's user unless `auth`); the decoded JSON answer."""
        user, password = auth or (self.user, self.password)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers = {"Authorization": f"Basic {token}"}
        if body is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.http_url + path, data=body, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=30) as answer:
            data = answer.read()
        return json.loads(data) if data else None

    def upload(self, paths: Iterable[Path]) -> list[str]:
        """Store DICOM files through the REST API; the Orthanc IDs of the instances."""
        return [self.request("POST", "/instances", Path(p).read_bytes())["ID"] for p in paths]

    def clear(self) -> None:
        """Delete every patient (and so every study, series, instance) the server holds."""
        for patient in self.request("GET", "/patients"):
            self.request("DELETE", f"/patients/{patient}")

    def series_instances(self, series_uid: str) -> list[bytes]:
        """The stored files of one series (by SeriesInstanceUID), as the server keeps them."""
        found = self.request("POST", "/tools/lookup", series_uid.encode(), content_type="text/plain")
        ids = [item["ID"] for item in found if item["Type"] == "Series"]
        if not ids:
            return []
        instances = self.request("GET", f"/series/{ids[0]}/instances")
        return [self._raw(f"/instances/{item['ID']}/file") for item in instances]

    def _raw(self, path: str) -> bytes:
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        req = urllib.request.Request(self.http_url + path, headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(req, timeout=30) as answer:
            return bytes(answer.read())
