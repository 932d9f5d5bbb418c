"""Reading what someone else wrote: regular files only, never waiting, never more than the caller's limit.

A file SegLens reads because a user, a model, a station folder or a server named it may be a named pipe (a plain
`open()` waits for a writer for ever), a device (`/dev/zero` never ends), a socket, a symlink out of the folder it
was found in, or a sparse file that claims 3 GiB and costs nothing to make. Every such read goes through here:

- opened with O_NONBLOCK (a FIFO opens at once, with no writer) and, where a root is named, reached from that
  root one folder at a time by descriptor with O_NOFOLLOW (app.guard.beneath: a folder swapped for a link after
  the check cannot send the read elsewhere), the last name O_NOFOLLOW too, and a file with another hard link
  refused (it may be a file outside the root);
- checked with fstat on the open descriptor (no race between a check and the open): a regular file, or
  NotRegularFile naming what it is;
- its size checked against the limit the caller names before a byte is read (TooLarge), and every later read
  capped at that limit (a file that grows after the check reads as ending there).

No numpy here: discovery runs on the viewer's GUI thread.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from typing import BinaryIO

from app.guard.beneath import CAN_WALK, open_folder_beneath
from app.guard.names import PathEscape, inside

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

# Limits callers name most often (a caller with a better bound names its own).
SMALL_FILE_LIMIT = 1 << 20  # a lock, a certificate or key, a settings file
STATE_FILE_LIMIT = 256 << 20  # SegLens's own state: a station journal, an MQTT buffer, a review log, a run record
INPUT_FILE_LIMIT = 4 << 30  # an image, DICOM or NIfTI file: its decoded size is bounded by its header first
MODEL_FILE_LIMIT = 4 << 30  # an ONNX file (protobuf caps one at 2 GiB; external data is read by onnxruntime)


class NotRegularFile(OSError):
    """The path names something other than a regular file; `strerror` says what (`not a regular file: a named
    pipe (FIFO)`), so callers that print `exc.strerror` say it in their one line."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file: {what}", os.fspath(path))

    def __str__(self) -> str:  # what a message quotes: the problem, not `[Errno 22] … '<path>'`
        return str(self.strerror)


class TooLarge(OSError):
    """The file holds more than the caller's limit; `strerror`: `too large (3.2 GB; the limit is 64 MB)`."""

    def __init__(self, path: str | os.PathLike[str], size: int, limit: int) -> None:
        super().__init__(errno.EFBIG, f"too large ({size_text(size)}; the limit is {size_text(limit)})",
                         os.fspath(path))
        self.size = size
        self.limit = limit

    def __str__(self) -> str:
        return str(self.strerror)


class OutsideRoot(OSError):
    """The path (or a symlink on its way) leads out of the folder it was found in."""

    def __init__(self, path: str | os.PathLike[str], root: str | os.PathLike[str]) -> None:
        super().__init__(errno.EACCES, f"leads outside {os.fspath(root)} (a symbolic link)", os.fspath(path))

    def __str__(self) -> str:
        return str(self.strerror)


def size_text(n_bytes: int) -> str:
    """`452 bytes`, `2.9 MB`, `1.2 GB`: a size for an error line."""
    if n_bytes < 100_000:
        return f"{n_bytes} bytes"
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.1f} MB"


def kind_of(mode: int) -> str | None:
    """What a stat mode is when it is not a regular file ("a named pipe (FIFO)"), None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_untrusted(path: str | os.PathLike[str], *, limit: int,
                   root: str | os.PathLike[str] | None = None) -> BinaryIO:
    """`path` open for binary reading (seekable), capped at `limit` bytes. With `root` (the watched or named
    folder the file was found in) a symlink as the last component is refused, and the resolved path must stay
    under `root` (OutsideRoot); without it, a symlink the user named is followed. NotRegularFile for a FIFO,
    device, socket or folder; TooLarge past `limit`; OSError as `open()` raises it otherwise. Never blocks.

    With `root` the file is also reached from `root` one folder at a time by descriptor, none followed if it is a
    link (OutsideRoot): a folder swapped for a link after the check cannot send the read elsewhere. And a file
    with another hard link is refused (NotRegularFile "a hard link"): it may be a file outside `root`."""
    if root is not None:
        try:
            inside(root, path)
        except PathEscape:
            raise OutsideRoot(path, root) from None
    try:
        fd = _open_rooted(path, root) if root is not None else os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP and root is not None:
            raise NotRegularFile(path, "a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a socket (or a device with nothing behind it) cannot be opened: say which
            what = _kind_at(path, follow=root is None)
            if what is not None:
                raise NotRegularFile(path, what) from None
        raise
    try:
        info = os.fstat(fd)
        what = kind_of(info.st_mode)
        if what is None and root is not None and info.st_nlink > 1:
            what = "a hard link"
        if what is not None:
            raise NotRegularFile(path, what)
        if info.st_size > limit:
            raise TooLarge(path, info.st_size, limit)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # ordinary reads from here on (it changes nothing for a regular file)
        raw = _Capped(io.FileIO(fd, "rb", closefd=True), limit, os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(raw)


def _open_rooted(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> int:
    """`path` opened O_NOFOLLOW in its folder's descriptor, that folder reached from `root` with no link followed
    (OutsideRoot naming the path when one is met); by path where the OS has no `dir_fd`."""
    if not CAN_WALK:
        return os.open(path, _FLAGS | _NOFOLLOW)
    try:
        folder_fd = open_folder_beneath(root, os.path.dirname(os.path.abspath(path)))
    except PathEscape:  # a folder on the way is a link now (or never was under the root)
        raise OutsideRoot(path, root) from None
    try:
        return os.open(os.path.basename(os.path.abspath(path)), _FLAGS | _NOFOLLOW, dir_fd=folder_fd)
    finally:
        os.close(folder_fd)


def read_untrusted(path: str | os.PathLike[str], *, limit: int,
                   root: str | os.PathLike[str] | None = None) -> bytes:
    """The whole file (`open_untrusted`'s rules), TooLarge when it holds more than `limit` bytes by the time it
    is read (a file that grew after the check included)."""
    with open_untrusted(path, limit=limit + 1, root=root) as handle:
        # what the file holds, not `limit + 1` at once: a read of n bytes allocates n first (a 4 GiB limit would)
        chunks = [handle.read(min(os.fstat(handle.fileno()).st_size, limit) + 1)]
        total = len(chunks[0])
        while chunks[-1] and total <= limit:  # a file that grew after fstat: read on, up to the limit
            chunks.append(handle.read(min(1 << 20, limit + 1 - total)))
            total += len(chunks[-1])
        data = chunks[0] if len(chunks) == 2 and not chunks[1] else b"".join(chunks)  # no copy for a whole read
    if len(data) > limit:
        raise TooLarge(path, len(data), limit)
    return data


def _kind_at(path: str | os.PathLike[str], *, follow: bool) -> str | None:
    try:
        return kind_of((os.stat(path) if follow else os.lstat(path)).st_mode)
    except OSError:
        return None


def untrusted_problem(path: str | os.PathLike[str], *, limit: int | None = None,
                      root: str | os.PathLike[str] | None = None) -> str | None:
    """Why `path` cannot be read under these rules, without opening it ("not a regular file: a named pipe
    (FIFO)", "file not found", "too large (…)"), or None. For code that hands a path, not a file object, to a
    library (nibabel, pydicom, onnxruntime): check here, then hand it over."""
    try:
        if root is not None:
            inside(root, path)
        mode = _lstat_rooted(path, root) if root is not None else os.stat(path)
    except PathEscape:
        return str(OutsideRoot(path, root or ""))
    except FileNotFoundError:
        return "file not found"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    what = kind_of(mode.st_mode)
    if what is None and root is not None and mode.st_nlink > 1:
        what = "a hard link"
    if what is not None:
        return f"not a regular file: {what}"
    if limit is not None and mode.st_size > limit:
        return str(TooLarge(path, mode.st_size, limit))
    return None


def _lstat_rooted(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> os.stat_result:
    """lstat of `path` in its folder's descriptor, reached from `root` with no link followed (PathEscape)."""
    if not CAN_WALK:
        return os.lstat(path)
    folder_fd = open_folder_beneath(root, os.path.dirname(os.path.abspath(path)))
    try:
        return os.stat(os.path.basename(os.path.abspath(path)), dir_fd=folder_fd, follow_symlinks=False)
    finally:
        os.close(folder_fd)


class _Capped(io.RawIOBase):
    """A raw file that reads as ending at `limit` bytes, whatever is appended to it later."""

    def __init__(self, raw: io.FileIO, limit: int, name: str) -> None:
        super().__init__()
        self._raw = raw
        self._limit = limit
        self.name = name  # what decoders quote (BufferedReader.name reads it)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        room = self._limit - self._raw.tell()
        if room <= 0:
            return 0
        view = memoryview(buffer)
        return self._raw.readinto(view[: min(len(view), room)]) or 0

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_END:
            return self._raw.seek(min(os.fstat(self._raw.fileno()).st_size, self._limit) + offset)
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        self._raw.close()
        super().close()


def is_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether `path`, every symlink resolved, is `root` or below it."""
    try:
        inside(root, path)
    except PathEscape:
        return False
    return True


__all__ = ["NotRegularFile", "OutsideRoot", "TooLarge", "is_inside", "kind_of", "open_untrusted", "read_untrusted",
           "size_text", "untrusted_problem"]
