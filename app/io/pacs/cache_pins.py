"""Which series of the PACS cache a live process still needs: pins, told by the operating system's file locks.

A retrieve writing a series, or a run about to read the series it retrieved, pins the series: a file
`.pins/<key>.<token>.pin` that its process holds locked (flock; a byte-range lock on Windows) for as long as it
needs the series. The lock dies with the process — a retrieve killed by SIGKILL, a crash — so a pin whose lock can
be taken is stale and removed, and a PID that was reused never keeps a series alive. Eviction and `clear` never
touch a pinned series (in this process or another), and the partial folders of a retrieve that is gone are
recognised at once by their series having no live pin.

Taking a pin and reading the pins happen under the cache's own lock (`.lock`, held for moments: never while a
series is received), so a `clear` never sees a series unpinned in the instant its retrieve is starting.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from app.guard.names import join_under
from app.guard.shared import make_folder, open_new, open_update, remove_under
from app.guard.untrusted import SMALL_FILE_LIMIT, open_untrusted

LOCK_NAME = ".lock"
PINS = ".pins"
_SUFFIX = ".pin"


def _try_lock(fd: int) -> bool:
    """Lock `fd` exclusively without waiting; whether it was taken."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        if sys.platform == "win32":
            import msvcrt

            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def cache_lock(root: Path) -> Iterator[None]:
    """The cache's own lock for the block (waits for another process's moment under it)."""
    handle = open_update(join_under(root, LOCK_NAME), private=True)
    try:
        while not _try_lock(handle.fileno()):
            time.sleep(0.01)
        yield
    finally:
        _unlock(handle.fileno())
        handle.close()


class Pin:
    """A live mark that this process needs the series `key`; `release()` (or the block's end) lets it go."""

    def __init__(self, root: Path, name: str, handle: BinaryIO) -> None:
        self.root, self.name, self._handle = root, name, handle
        self.key = name.split(".", 1)[0]

    def __enter__(self) -> Pin:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    @property
    def held(self) -> bool:
        return not self._handle.closed

    def release(self) -> None:
        """Unlock and remove the pin (again: nothing)."""
        if self._handle.closed:
            return
        _unlock(self._handle.fileno())
        self._handle.close()
        with contextlib.suppress(OSError):
            remove_under(self.root, PINS, self.name)


def take_pin(root: Path, key: str) -> Pin:
    """A new pin of `key` (call it under `cache_lock`)."""
    folder = make_folder(join_under(root, PINS), private=True)
    name = f"{key}.{secrets.token_hex(6)}{_SUFFIX}"
    handle = open_new(join_under(folder, name), private=True)
    if not _try_lock(handle.fileno()):  # a new file nobody else has opened: cannot happen
        handle.close()
        raise OSError(f"{folder / name}: cannot lock a new pin")
    handle.write(f"{os.getpid()}\n".encode())
    handle.flush()
    return Pin(root, name, handle)


def pinned_keys(root: Path) -> set[str]:
    """The keys some live process pins; stale pins (their process gone) removed on the way. Call it under
    `cache_lock`."""
    folder = root / PINS
    live: set[str] = set()
    for name in sorted(os.listdir(folder)) if folder.is_dir() else []:
        if not name.endswith(_SUFFIX):
            continue
        key = name.split(".", 1)[0]
        if key in live or _held_elsewhere(folder, name):
            live.add(key)
        else:
            with contextlib.suppress(OSError):
                remove_under(root, PINS, name)
    return live


def _held_elsewhere(folder: Path, name: str) -> bool:
    try:
        handle = open_untrusted(join_under(folder, name), limit=SMALL_FILE_LIMIT, root=folder)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # not ours to judge (not a regular file): keep the series rather than guess
    with handle:
        if not _try_lock(handle.fileno()):
            return True
        _unlock(handle.fileno())
        return False
