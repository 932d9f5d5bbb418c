"""`seglens-cli serve` as a subprocess on free loopback ports, for the tests that call it over the wire.

A subprocess because kserve (the server) and tritonclient.grpc (the tests' and SegLens's client) cannot share a
process: both register the inference protocol's protobuf names. `start_serve` waits on v2/health/ready (bounded),
`Served.stop()` ends it (SIGINT, then a kill) and gives its exit code; the `served` fixture is one nuclei server
with a token for a whole test module.

    from tests import serve_fixtures
    served = serve_fixtures.served  # the fixture, in the test module
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from waiting import until

REPO = Path(__file__).resolve().parent.parent
TOKEN = "t0k3n-for-tests"
READY_WITHIN_S = 120.0  # kserve's import alone is ~1.5 s on an idle machine; 2 shared cores can be far slower


def free_ports(count: int = 2) -> list[int]:
    """`count` distinct ports nothing listens on right now (the OS's picks, released)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Served:
    """A running `seglens-cli serve`: its URLs, token and output files."""

    process: subprocess.Popen[bytes]
    port: int
    grpc_port: int
    token: str | None
    folder: Path
    tls_ca: Path | None = None
    returncode: int | None = field(default=None)

    @property
    def scheme(self) -> str:
        return "https" if self.tls_ca else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def grpc_url(self) -> str:
        return f"{'grpcs' if self.tls_ca else 'grpc'}://{self.grpc_address}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def stdout(self) -> str:
        return (self.folder / "stdout.txt").read_text("utf-8", "replace")

    def stderr(self) -> str:
        return (self.folder / "stderr.txt").read_text("utf-8", "replace")

    def stop(self, sig: int = signal.SIGINT, *, within_s: float = 30.0) -> int:
        """Send `sig`, wait (bounded), kill if it lingers; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(within_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.returncode = self.process.returncode
        return self.returncode


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", "serve", *args]


def serve_env(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SEGLENS_SERVE_TOKEN"}
    if token is not None:
        env["SEGLENS_SERVE_TOKEN"] = token
    return env


def start_serve(folder: Path, *models: str, token: str | None = TOKEN, args: tuple[str, ...] = (),
                tls_ca: Path | None = None, ready_within_s: float = READY_WITHIN_S) -> Served:
    """Start `seglens-cli serve MODELS… --device cpu` on two free ports and wait until v2/health/ready answers."""
    folder.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_ports(2)
    command = serve_command(*(models or ("nuclei",)), "--port", str(port), "--grpc-port", str(grpc_port),
                            "--device", "cpu", *args)
    with open(folder / "stdout.txt", "wb") as out, open(folder / "stderr.txt", "wb") as err:
        process = subprocess.Popen(command, cwd=REPO, env=serve_env(token), stdout=out, stderr=err)
    served = Served(process, port, grpc_port, token, folder, tls_ca)
    try:
        wait_ready(served, ready_within_s)
    except BaseException:
        served.stop(signal.SIGKILL)
        raise
    return served


def wait_ready(served: Served, within_s: float) -> None:
    """Wait until v2/health/ready answers 200 and the startup line is out (serve prints it once its REST server
    says it started, which can come a moment after the first ready answer); fail with the server's stderr if it
    exits."""
    context = ssl.create_default_context(cafile=str(served.tls_ca)) if served.tls_ca else None
    try:
        until(lambda: _ready(served, context), what="serve ready (v2/health/ready and its startup line)",
              within_s=within_s, every_s=0.1)
    except pytest.fail.Exception as late:
        pytest.fail(f"{late.msg}; its stderr: {served.stderr()[-2000:]}")


def _ready(served: Served, context: ssl.SSLContext | None) -> bool:
    """One look: ready and the startup line printed; a failure if serve exited."""
    if served.process.poll() is not None:
        pytest.fail(f"serve exited with {served.process.returncode}")
    if "serving " in served.stdout():
        return _answers_ready(served, context)
    return False


def _answers_ready(served: Served, context: ssl.SSLContext | None) -> bool:
    request = urllib.request.Request(f"{served.url}/v2/health/ready", headers=served.headers)
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `seglens-cli serve nuclei` (CPU, token TOKEN, REST and gRPC) for the whole module, stopped at its end."""
    server = start_serve(tmp_path_factory.mktemp("served"), "nuclei")
    try:
        yield server
    finally:
        server.stop()
