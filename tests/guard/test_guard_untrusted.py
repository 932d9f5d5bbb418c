"""app.guard.untrusted: reading what someone else wrote — regular files only, never waiting, never past the
caller's limit, no symlink out of a named root (issue 36). Each hostile open runs in a thread with a time bound:
a FIFO that blocks fails the test (and is then unblocked) rather than hanging the suite."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.guard.untrusted import (
    NotRegularFile,
    OutsideRoot,
    TooLarge,
    open_untrusted,
    read_untrusted,
    untrusted_problem,
)

LIMIT = 1 << 20


def _bounded(call: Callable[[], object], *, unblock: Path | None = None) -> object:
    """`call()`'s value or exception, within 5 s (a FIFO's other end is opened to release a blocked open)."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():
        if unblock is not None:
            os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the read blocked")
    return box[0]


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "model.yaml"
    os.mkfifo(fifo)
    got = _bounded(lambda: read_untrusted(fifo, limit=LIMIT), unblock=fifo)
    assert isinstance(got, NotRegularFile) and str(got) == "not a regular file: a named pipe (FIFO)"
    assert got.filename == str(fifo)
    assert untrusted_problem(fifo) == "not a regular file: a named pipe (FIFO)"


def test_dev_zero_is_refused() -> None:
    got = _bounded(lambda: read_untrusted("/dev/zero", limit=LIMIT))
    assert isinstance(got, NotRegularFile) and "character device" in str(got)


def test_a_link_to_dev_zero_is_refused_as_the_device(tmp_path: Path) -> None:
    (tmp_path / "x.png").symlink_to("/dev/zero")
    got = _bounded(lambda: read_untrusted(tmp_path / "x.png", limit=LIMIT))
    assert isinstance(got, NotRegularFile) and "character device" in str(got)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = Path(f"/tmp/gs-{os.getpid()}-{time.monotonic_ns()}.sock")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        server.listen(1)
        got = _bounded(lambda: read_untrusted(path, limit=LIMIT))
        assert isinstance(got, NotRegularFile) and str(got) == "not a regular file: a socket"  # not ENXIO's words
        assert untrusted_problem(path) == "not a regular file: a socket"
    finally:
        server.close()
        path.unlink()


def test_a_folder_is_refused(tmp_path: Path) -> None:
    got = _bounded(lambda: read_untrusted(tmp_path, limit=LIMIT))
    assert isinstance(got, NotRegularFile) and "folder" in str(got)


def test_a_sparse_giant_is_refused_by_its_size_before_a_byte_is_read(tmp_path: Path) -> None:
    path = tmp_path / "ct.nii"
    with open(path, "wb") as handle:
        handle.truncate(3 << 30)
    started = time.monotonic()
    with pytest.raises(TooLarge) as caught:
        read_untrusted(path, limit=LIMIT)
    assert time.monotonic() - started < 1
    assert str(caught.value) == "too large (3.2 GB; the limit is 1.0 MB)"
    assert untrusted_problem(path, limit=LIMIT) == "too large (3.2 GB; the limit is 1.0 MB)"


def test_the_limit_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"x" * 100)
    assert read_untrusted(path, limit=100) == b"x" * 100
    with pytest.raises(TooLarge):
        read_untrusted(path, limit=99)


def test_growth_after_the_open_is_never_read_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    path.write_bytes(b"a" * 10)
    with open_untrusted(path, limit=50) as handle:
        with open(path, "ab") as writer:
            writer.write(b"b" * 1000)
        assert len(handle.read()) == 50
        handle.seek(0, os.SEEK_END)
        assert handle.tell() == 50


def test_growth_after_the_check_is_too_large_for_a_whole_read(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a" * 10)

    def grow_then_read() -> bytes:
        with open(path, "ab") as writer:
            writer.write(b"b" * 1000)
        return read_untrusted(path, limit=100)

    with pytest.raises(TooLarge):
        grow_then_read()


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "watched"
    root.mkdir()
    (tmp_path / "secret").write_text("secret")
    (root / "part.png").symlink_to(tmp_path / "secret")
    with pytest.raises(OutsideRoot):
        read_untrusted(root / "part.png", limit=LIMIT, root=root)
    assert "leads outside" in (untrusted_problem(root / "part.png", root=root) or "")


def test_a_symlink_inside_the_root_is_refused_as_a_link(tmp_path: Path) -> None:
    """With a root, the last component is opened O_NOFOLLOW: a link is refused even when it points inside."""
    (tmp_path / "a.png").write_bytes(b"x")
    (tmp_path / "b.png").symlink_to(tmp_path / "a.png")
    with pytest.raises(NotRegularFile, match="symbolic link"):
        read_untrusted(tmp_path / "b.png", limit=LIMIT, root=tmp_path)


def test_a_folder_link_on_the_way_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "watched"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.png").write_bytes(b"x")
    (root / "sub").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutsideRoot):
        read_untrusted(root / "sub" / "x.png", limit=LIMIT, root=root)


def test_without_a_root_a_link_the_user_named_is_followed(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"data")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert read_untrusted(tmp_path / "b", limit=LIMIT) == b"data"


def test_the_handle_is_seekable_and_named(tmp_path: Path) -> None:
    path = tmp_path / "x.dcm"
    path.write_bytes(bytes(range(200)))
    with open_untrusted(path, limit=1000) as handle:
        assert handle.name == str(path)
        handle.seek(128)
        assert handle.read(4) == bytes(range(128, 132))
        handle.seek(-8, os.SEEK_END)
        assert handle.read() == bytes(range(192, 200))


def test_missing_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_untrusted(tmp_path / "none", limit=LIMIT)
    assert untrusted_problem(tmp_path / "none") == "file not found"
    if os.geteuid() != 0:
        (tmp_path / "closed").write_bytes(b"x")
        os.chmod(tmp_path / "closed", 0)
        with pytest.raises(PermissionError):
            read_untrusted(tmp_path / "closed", limit=LIMIT)
