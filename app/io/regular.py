"""Open only regular files, and never wait doing it.

A named pipe (FIFO) in an input folder, or a labels file pointing at one, would make a plain `open()` wait for a
writer for ever; a device (`/dev/zero`, `/dev/urandom`) never ends. Every file SegLens reads because a user or a
model named it goes through `open_regular`: opened with O_NONBLOCK (a FIFO opens at once, with no writer), then
checked with fstat on the open descriptor (no race between a stat and the open), and refused unless it is a
regular file. No numpy here: discovery runs on the viewer's GUI thread.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegularFile(OSError):
    """The path names something other than a regular file; `strerror` says what (`not a regular file: a named
    pipe (FIFO)`), so callers that print `exc.strerror` say it in their one line."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file: {what}", os.fspath(path))

    def __str__(self) -> str:  # what a message quotes: the problem, not `[Errno 22] … '<path>'`
        return str(self.strerror)


def kind_of(mode: int) -> str | None:
    """What a stat mode is when it is not a regular file ("a named pipe (FIFO)"), None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` open for binary reading when it is a regular file (symlinks followed); NotRegularFile (an OSError)
    for a FIFO, device, socket or folder, and OSError as `open()` raises it otherwise. Never blocks."""
    fd = os.open(path, _FLAGS)
    try:
        what = kind_of(os.fstat(fd).st_mode)
        if what is not None:
            raise NotRegularFile(path, what)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # ordinary reads from here on (it changes nothing for a regular file)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole of a regular file (`open_regular`'s rules): for SegLens's own state files (a run record, a lock,
    a review log), which a FIFO planted under their name must not turn into a hang."""
    with open_regular(path) as handle:
        return handle.read()


def regular_problem(path: Path) -> str | None:
    """Why `path` cannot be read as a regular file without opening it ("not a regular file: a named pipe
    (FIFO)", "file not found", the OS's reason), or None when it is one. For code that hands a path (not a file
    object) to a library: nibabel, pydicom."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "file not found"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    what = kind_of(mode)
    return None if what is None else f"not a regular file: {what}"
