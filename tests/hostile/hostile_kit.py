"""The hostile-input kit (issue 36): makers for each class of hostile input, loopback servers that misbehave, and a
runner that calls a boundary in a forked child bounded in time and memory, so a boundary that hangs or reads
`/dev/zero` fails its test instead of blocking the suite or filling the machine.

Files: a symlink out of a root, a FIFO, `/dev/zero`, a socket, a sparse 3 GiB file, a folder, non-UTF-8 bytes.
YAML: an alias bomb, nesting 10,000 deep. Names: traversal (`../../x`, an absolute path, NUL). Servers: endless,
trickling (its body or its headers), redirecting to another origin, lying about its Content-Length.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SPARSE_BYTES = 3 << 30
MEMORY_HEADROOM = 1536 << 20  # a child may allocate this much above what it started with

# --- files ----------------------------------------------------------------------------------------------------


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def make_dev_zero(path: Path) -> Path:
    """`path` a symlink to /dev/zero: a read that trusts the name never ends."""
    path.symlink_to("/dev/zero")
    return path


def make_socket(path: Path) -> Path:
    """A listening Unix socket bound at `path` (kept open until the test's process ends)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    _KEEP.append(server)
    return path


_KEEP: list[socket.socket] = []


def make_sparse(path: Path, size: int = SPARSE_BYTES) -> Path:
    """A sparse file that claims `size` bytes and costs nothing on disk."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def make_folder(path: Path) -> Path:
    path.mkdir()
    return path


def make_non_utf8(path: Path) -> Path:
    path.write_bytes(b"name: caf\xe9\nclasses: [\xff\xfe]\n")
    return path


def make_symlink_out(path: Path) -> Path:
    """`path` a symlink to a file outside its folder (a secret another user could have planted a link to)."""
    outside = path.parent.parent / f"outside-{path.parent.name}"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.txt"
    secret.write_text("a file outside the root\n")
    path.symlink_to(secret)
    return path


ALIAS_BOMB = ("a: &a [x, x, x, x, x, x, x, x, x]\n"
              + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                        for p, c in zip("abcdefgh", "bcdefghi", strict=True)))
DEEP_NESTING = "a: " + "[" * 10_000 + "]" * 10_000 + "\n"


def make_alias_bomb(path: Path) -> Path:
    path.write_text(ALIAS_BOMB)
    return path


def make_deep_nesting(path: Path) -> Path:
    path.write_text(DEEP_NESTING)
    return path


FILE_MAKERS: dict[str, Callable[[Path], Path]] = {
    "fifo": make_fifo, "dev_zero": make_dev_zero, "socket": make_socket, "sparse_3gib": make_sparse,
    "folder": make_folder,
}
TEXT_MAKERS: dict[str, Callable[[Path], Path]] = {"non_utf8": make_non_utf8}
YAML_MAKERS: dict[str, Callable[[Path], Path]] = {"alias_bomb": make_alias_bomb, "deep_nesting": make_deep_nesting}
ROOTED_MAKERS: dict[str, Callable[[Path], Path]] = {"symlink_out": make_symlink_out}
TRAVERSAL_NAMES = ("../../etc/passwd", "/etc/passwd", "..", ".", "a/../../b", "a\x00b", "", "C:\\Windows",
                   "..\\..\\x")

# --- servers --------------------------------------------------------------------------------------------------


@dataclass
class Server:
    """A loopback HTTP server of one hostile behaviour; `url` ends with `path_hint` (e.g. `/model.yaml`)."""

    url: str
    origin: str
    hits: list[str]


def _handler(behaviour: str, hits: list[str], other: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            hits.append(f"{self.command} {self.path} auth={self.headers.get('Authorization') is not None}")
            with contextlib.suppress(OSError):
                getattr(self, f"_{behaviour}")()

        do_GET = do_POST = do_PUT = do_HEAD = _serve

        def _head(self, length: int | None = None, kind: str = "application/yaml") -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            if length is not None:
                self.send_header("Content-Length", str(length))
            self.end_headers()

        def _endless(self) -> None:  # a body that never ends, as fast as the client reads it
            self._head(kind="application/dicom+json")
            line = b"[" + b'{"a": 1},' * 4000
            for _ in range(200_000):
                self.wfile.write(line)

        def _trickle(self) -> None:  # one byte a second: every per-read timeout is satisfied
            self._head(length=10_000)
            for _ in range(10_000):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.5)

        def _trickle_headers(self) -> None:  # one header's value a byte at a time: no per-read timeout fires
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(10_000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.5)

        def _redirect(self) -> None:  # to another origin, keeping the path
            self.send_response(307)
            self.send_header("Location", other + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _lying_length(self) -> None:  # declares 50 GB, sends a little, then waits
            self._head(length=50_000_000_000)
            self.wfile.write(b"name: x\n")
            self.wfile.flush()
            time.sleep(60)

    return Handler


SERVER_BEHAVIOURS = ("endless", "trickle", "trickle_headers", "redirect", "lying_length")


@contextlib.contextmanager
def hostile_server(behaviour: str, path: str = "/") -> Iterator[Server]:
    """A loopback server of `behaviour` (one of SERVER_BEHAVIOURS), its URL ending with `path`. A redirect points
    at a second loopback server on another port (another origin), which records what reached it."""
    with _plain_server("ok") as other:
        hits: list[str] = []
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour, hits, other.origin))
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, name=f"hostile-{behaviour}", daemon=True)
        thread.start()
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            yield Server(url=origin + path, origin=origin, hits=hits if behaviour != "redirect" else other.hits)
        finally:
            server.shutdown()
            server.server_close()


@contextlib.contextmanager
def _plain_server(_: str) -> Iterator[Server]:
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            hits.append(f"GET {self.path} auth={self.headers.get('Authorization') is not None}")
            self.send_response(200)
            self.send_header("Content-Length", "8")
            self.end_headers()
            self.wfile.write(b"name: x\n")

        do_POST = do_PUT = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield Server(url=origin + "/", origin=origin, hits=hits)
    finally:
        server.shutdown()
        server.server_close()


# --- the bounded runner ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a boundary did with a hostile input: "raised" (with the exception's class names, most derived
    first, and message), "returned" (with the value's repr), "timeout" or "crashed" (the child died)."""

    kind: str
    classes: tuple[str, ...] = ()
    message: str = ""
    seconds: float = 0.0

    def describe(self) -> str:
        if self.kind == "raised":
            return f"raised {self.classes[0]}: {self.message[:300]!r}"
        return f"{self.kind} {self.message[:300]!r}".strip()


def _vm_size() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def run_bounded(call: Callable[[], object], *, seconds: float) -> Outcome:
    """`call()` in a forked child with `seconds` to finish and MEMORY_HEADROOM more address space than it starts
    with; what it did. The child is killed when time is up."""
    read_end, write_end = os.pipe()
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads: the child only runs `call`
        pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        _child(call, write_end)
    os.close(write_end)
    try:
        data = _read_until(read_end, started + seconds)
    finally:
        os.close(read_end)
    elapsed = time.monotonic() - started
    if data is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return Outcome("timeout", message=f"still running after {seconds:g} s", seconds=elapsed)
    os.waitpid(pid, 0)
    if not data:
        return Outcome("crashed", message="the child died without an answer (memory?)", seconds=elapsed)
    answer = json.loads(data)
    return Outcome(answer["kind"], tuple(answer.get("classes", ())), answer.get("message", ""), elapsed)


def _child(call: Callable[[], object], fd: int) -> None:
    try:
        limit = _vm_size() + MEMORY_HEADROOM
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            value = call()
            answer = {"kind": "returned", "message": repr(value)[:2000]}
        except BaseException as exc:
            classes = [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__]
            answer = {"kind": "raised", "classes": classes, "message": str(exc)[:4000],
                      "trace": traceback.format_exc()[-2000:]}
        os.write(fd, json.dumps(answer).encode())
    finally:
        os._exit(0)


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes before it closes the pipe; None when the deadline comes first."""
    got = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return bytes(got)
            got += chunk
