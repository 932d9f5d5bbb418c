"""A DICOMweb service of the tests' own on loopback (http.server), for what a real Orthanc will not do: a series
whose UID is a path (`../../x`), instances of another series or patient under the series asked for, a WADO-RS
answer that trickles or never ends, a QIDO-RS answer with more matches than anyone should take, a redirect of a
STOW-RS post or of a search to another port.

`served(...)` starts it in a thread of the test and yields the `WebService`; its fields say how it behaves and may
be changed by the test while it runs. It speaks just enough of PS3.18 for dicomweb-client: QIDO-RS studies and
series searches (DICOM JSON), WADO-RS series retrieve (multipart/related; type="application/dicom"), STOW-RS post.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydicom

BOUNDARY = "seglens-test-boundary"


@dataclass
class WebService:
    """What the service answers; `url` is its DICOMweb root (a `dicomweb+` node URL: `node_url`)."""

    study_uid: str = ""
    series_uid: str = ""  # the series QIDO-RS reports (the only one); may be `../../x`
    instances: list[bytes] = field(default_factory=list)  # what WADO-RS sends for any series, in order
    announced: int | None = -1  # the series' NumberOfSeriesRelatedInstances (-1: len(instances); None: not said)
    studies: int = 1  # how many study matches QIDO-RS /studies answers
    trickle_s: float = 0.0  # > 0: the WADO-RS body one byte at a time, this far apart (never ending on its own)
    trickle_search_s: float = 0.0  # the same for the QIDO-RS answers
    endless: bool = False  # the WADO-RS body repeats `instances` for ever
    redirect_to: str = ""  # a URL: every request answered 307 with this Location
    port: int = 0
    seen: list[str] = field(default_factory=list)  # "METHOD path" of each request
    posted: list[int] = field(default_factory=list)  # the bytes of each POST body received

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/dicom-web"

    @property
    def node_url(self) -> str:
        return f"dicomweb+{self.url}"

    def serve_files(self, paths: list[Path]) -> None:
        """Answer QIDO-RS and WADO-RS with the series of these files (its UIDs from the first)."""
        first = pydicom.dcmread(paths[0], stop_before_pixels=True)
        self.study_uid, self.series_uid = str(first.StudyInstanceUID), str(first.SeriesInstanceUID)
        self.instances = [p.read_bytes() for p in paths]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        web = self.server.web
        web.seen.append(f"GET {self.path}")
        if web.redirect_to:
            return self._redirect(web.redirect_to)
        path, _, query = self.path.partition("?")
        if path.rstrip("/").endswith("/studies"):
            return self._json([_study(web, n) for n in range(web.studies)], trickle_s=web.trickle_search_s)
        if path.rstrip("/").endswith("/series"):
            wanted = urllib.parse.parse_qs(query).get("SeriesInstanceUID", [web.series_uid])[0]
            return self._json([_series(web)] if wanted == web.series_uid else [], trickle_s=web.trickle_search_s)
        return self._wado(web)  # whatever the path (a client may have folded a `../` of the series UID into it)

    def do_POST(self) -> None:
        web = self.server.web
        web.seen.append(f"POST {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        web.posted.append(len(self.rfile.read(length)))
        if web.redirect_to:
            return self._redirect(web.redirect_to)
        return self._json({})

    def _redirect(self, location: str) -> None:
        self.send_response(307)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _json(self, answer: Any, *, trickle_s: float = 0.0) -> None:
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/dicom+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with suppress(OSError):
            _send(self.wfile, body, trickle_s)

    def _wado(self, web: WebService) -> None:
        self.send_response(200)
        self.send_header("Content-Type", f'multipart/related; type="application/dicom"; boundary={BOUNDARY}')
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            if web.trickle_s > 0:
                return _send(self.wfile, b"".join(_part(data) for data in web.instances), web.trickle_s)
            while True:
                for data in web.instances:
                    self.wfile.write(_part(data))
                if not web.endless:
                    break
            self.wfile.write(f"--{BOUNDARY}--\r\n".encode())
        except OSError:  # the client gave up: what the test wanted
            pass
        return None



def _send(out: Any, body: bytes, trickle_s: float) -> None:
    """`body` at once, or one byte each `trickle_s` seconds."""
    if trickle_s <= 0:
        out.write(body)
        return
    for k in range(len(body)):
        out.write(body[k:k + 1])
        out.flush()
        time.sleep(trickle_s)

def _part(data: bytes) -> bytes:
    return f"--{BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n".encode() + data + b"\r\n"


def _study(web: WebService, n: int) -> dict[str, Any]:
    uid = web.study_uid if n == 0 else f"{web.study_uid or '1.2.3'}.{n}"
    return {"0020000D": {"vr": "UI", "Value": [uid]}, "00100020": {"vr": "LO", "Value": ["PID-0042"]}}


def _series(web: WebService) -> dict[str, Any]:
    return {"0020000D": {"vr": "UI", "Value": [web.study_uid]}, "0020000E": {"vr": "UI", "Value": [web.series_uid]},
            "00080060": {"vr": "CS", "Value": ["CT"]},
            **({} if web.announced is None else
               {"00201209": {"vr": "IS", "Value": [len(web.instances) if web.announced == -1 else web.announced]}})}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    web: WebService


@contextmanager
def served(web: WebService | None = None) -> Iterator[WebService]:
    """The service running on a free loopback port until the block ends."""
    web = web or WebService()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.web = web
    web.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield web
    finally:
        server.shutdown()
        server.server_close()
