"""Writing SegLens's own files where others can also write: never through a planted link, whole or not at all.

A station's output folder, a watched share, a PACS cache or a run's `--out` may be writable by other users or
by the process that drops files into it. Someone who can write there can plant a symlink (or a hard link, or a
FIFO) under the name SegLens is about to write — its journal, verdict log, MQTT buffer, a lock, an output — and
SegLens, often running with more rights, would append to or truncate the target. Every such write goes through
here:

- appends and new files are opened with O_NOFOLLOW (a symlink under the name is refused, never followed), and
  refused when what is there is not a regular file or has another hard link;
- files that are rewritten are written to an exclusive temporary in the same folder and renamed over the name
  (`os.replace` replaces a planted link itself, never its target), so a crash never leaves half a file;
- `private=True` creates folders 0700 and files 0600: anything that holds patient data or secrets;
- folders and files are removed only by root + components (`remove_under`), through `join_under`, never by a
  path that did not come out of it, and `rmtree` never follows a link; renamed likewise (`rename_under`);
- with `root=` (the writers) and always (the removers), every folder below the root is reached by descriptor,
  none followed if it is a link (app.guard.beneath): a folder swapped for a link after a check changes nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from app.errors import OutputError
from app.guard.beneath import CAN_WALK, LinkOnTheWay, folder_and_name, lexists_at, parent_under, rmtree_by_fd
from app.guard.names import join_under, single_component

TEMPORARY_PREFIX = ".seglens-tmp-"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


class PlantedLink(OSError):
    """Something other than SegLens's own regular file sits under the name: a symlink, a hard link to another
    file, a FIFO or a device."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        super().__init__(errno.EPERM, f"refused to write through {what} planted under the name", os.fspath(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _mode(private: bool) -> int:
    return 0o600 if private else 0o666


@contextlib.contextmanager
def _where(root: str | os.PathLike[str] | None, path: str | os.PathLike[str], *,
           create: bool = False) -> Iterator[tuple[int | None, str]]:
    """(`path`'s folder's descriptor, its last name) for `dir_fd=`: reached from `root` with no link followed on
    the way (PlantedLink naming it). Without `root`, or without `dir_fd` (Windows): (None, the path), by path."""
    target = Path(path)
    if root is None or not CAN_WALK:
        if root is not None:
            join_under(root)  # at least the by-path proof
        if create:
            target.parent.mkdir(parents=True, exist_ok=True)
        yield None, os.fspath(target)
        return
    try:
        fd, name = folder_and_name(root, target, create=create)
    except LinkOnTheWay as exc:
        raise PlantedLink(exc.link, exc.what) from None
    try:
        yield fd, name
    finally:
        os.close(fd)


def make_folder(path: str | os.PathLike[str], *, private: bool = False,
                root: str | os.PathLike[str] | None = None) -> Path:
    """`path` as a folder (parents too), created 0700 when `private`; a symlink or a file under the last name is
    refused (PlantedLink). An existing folder is kept as it is, except that a private one is made 0700 when it
    is SegLens's (owned by this user). `root`: `path` is made beneath it, no folder on the way followed if it is
    a link (PlantedLink naming it)."""
    folder = Path(path)
    with _where(root, folder, create=True) as (fd, name):
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700 if private else 0o777, dir_fd=fd)
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise PlantedLink(folder, "a symbolic link" if stat.S_ISLNK(info.st_mode) else "a file")
        if private and stat.S_IMODE(info.st_mode) & 0o077 and info.st_uid == _uid():
            _private_folder(folder, fd, name)
    return folder


def _private_folder(folder: Path, parent_fd: int | None, name: str) -> None:
    """chmod 0700 on the folder itself, opened without following a link: one swapped in after the lstat above is
    refused, never chmod-ed through."""
    if not hasattr(os, "fchmod"):  # Windows: no POSIX modes to tighten
        return
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PlantedLink(folder, "a symbolic link") from None
        raise
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _checked(fd: int, path: str | os.PathLike[str]) -> int:
    """`fd` when it is a regular file with no other hard link; PlantedLink (the descriptor closed) otherwise."""
    info = os.fstat(fd)
    what = None if stat.S_ISREG(info.st_mode) else "something that is not a regular file"
    if what is None and info.st_nlink > 1:
        what = "a hard link"
    if what is not None:
        os.close(fd)
        raise PlantedLink(path, what)
    return fd


def _open(path: str | os.PathLike[str], flags: int, private: bool, root: str | os.PathLike[str] | None = None) -> int:
    with _where(root, path) as (folder_fd, name):
        return _open_at(folder_fd, name, path, flags, private)


def _open_at(folder_fd: int | None, name: str, path: str | os.PathLike[str], flags: int, private: bool) -> int:
    try:
        fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, _mode(private), dir_fd=folder_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise PlantedLink(path, "a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a FIFO with no reader
            raise PlantedLink(path, "a named pipe") from None
        raise
    fd = _checked(fd, path)
    os.set_blocking(fd, True)
    return fd


def open_append(path: str | os.PathLike[str], *, private: bool = False,
                root: str | os.PathLike[str] | None = None) -> BinaryIO:
    """`path` open for appending (created if missing), never through a link planted under the name."""
    return os.fdopen(_open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, private, root), "ab")


def open_update(path: str | os.PathLike[str], *, private: bool = False,
                root: str | os.PathLike[str] | None = None) -> BinaryIO:
    """`path` open for reading and writing in place (created if missing; a journal that truncates its own torn
    tail), never through a planted link."""
    return os.fdopen(_open(path, os.O_RDWR | os.O_CREAT, private, root), "r+b")


def open_new(path: str | os.PathLike[str], *, private: bool = False,
             root: str | os.PathLike[str] | None = None) -> BinaryIO:
    """A new file at `path`, created exclusively (FileExistsError when anything is there, a link included)."""
    return os.fdopen(_open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, private, root), "wb")


def create_temporary(folder: Path, name: str, *, private: bool = False,
                     root: str | os.PathLike[str] | None = None) -> tuple[int, Path]:
    """A new, empty file `.seglens-tmp-<name>.<random>.tmp` in `folder`, open for writing: (fd, path).

    Created exclusively (O_CREAT | O_EXCL: it never opens an existing file and never follows a symlink planted
    under its name), with mode 0o666 (the umask decides) or 0o600 when `private`. The name is cut short: the
    temporary must fit the file-name limit wherever the final name does. `root`: as `atomic_write`'s."""
    with _where(root, Path(folder) / name) as (folder_fd, _name):
        fd, temporary = _temporary_at(folder_fd, Path(folder), name, private)
    return fd, Path(folder) / Path(temporary).name


def _temporary_at(folder_fd: int | None, folder: Path, name: str, private: bool) -> tuple[int, str]:
    """(fd, the temporary's name under `folder_fd`, or its whole path when there is no descriptor)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(100):
        temporary = f"{TEMPORARY_PREFIX}{name[:48]}.{secrets.token_hex(4)}.tmp"
        at = temporary if folder_fd is not None else os.fspath(folder / temporary)
        try:
            return os.open(at, flags, _mode(private), dir_fd=folder_fd), at
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: no free temporary name for {name}")


def open_fresh(path: Path, *, private: bool = False,
               root: str | os.PathLike[str] | None = None) -> tuple[BinaryIO, tuple[int, int]]:
    """A new, empty file at `path` open for appending, whatever was under the name before (a report's `.partial`
    left by an earlier run, or a link planted there): created exclusively under a temporary name in the same
    folder, renamed over `path` (a rename replaces a link, never follows it), reopened O_NOFOLLOW for appending
    and checked to be that same file — reopened, not kept open: Windows cannot rename an open file. (handle,
    its (st_dev, st_ino)); PlantedLink when another file took the name in between (or a link on the way from
    `root`, as `atomic_write`'s), OSError otherwise."""
    with _where(root, path) as (folder_fd, name):
        fd, tmp = _temporary_at(folder_fd, path.parent, path.name, private)
        try:
            info = os.fstat(fd)
            os.close(fd)
            os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except OSError:
            _remove_quietly(tmp, folder_fd)
            raise
        handle = os.fdopen(_open_at(folder_fd, name, path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, private), "ab")
    now = os.fstat(handle.fileno())
    if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
        handle.close()
        raise PlantedLink(path, "another file")
    return handle, (info.st_dev, info.st_ino)


def atomic_write(path: Path, data: bytes, *, private: bool = False, durable: bool = False,
                 root: str | os.PathLike[str] | None = None) -> None:
    """Write `data` to `path` via an exclusive temporary in the same folder and a rename: the file appears whole
    or not at all, and a link planted under the name is replaced, never written through. `durable`: fsync the
    file before the rename (a journal's state). OutputError naming the path on failure. `root`: the folders are
    made and reached beneath it, none followed if it is a link (OutputError naming the link)."""
    try:
        with _where(root, path, create=True) as (folder_fd, name):
            _write_at(folder_fd, name, path, data, private=private, durable=durable)
    except PlantedLink as exc:
        raise OutputError(f"{path}: cannot write ({exc})") from exc
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def _write_at(folder_fd: int | None, name: str, path: Path, data: bytes, *, private: bool, durable: bool) -> None:
    fd, tmp = _temporary_at(folder_fd, path.parent, path.name, private)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except OSError:
        _remove_quietly(tmp, folder_fd)
        raise


def _remove_quietly(path: str | os.PathLike[str], folder_fd: int | None = None) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path, dir_fd=folder_fd)


@contextlib.contextmanager
def whole_folder(out_dir: Path, *, private: bool = False) -> Iterator[Path]:
    """A folder that appears whole or not at all (a DICOM series): the block writes into a partial folder beside
    `out_dir` (yielded), which takes `out_dir`'s place once the block ends without an exception. An earlier
    `out_dir` is moved aside, not deleted first: a failed rename leaves it where it was. The partial folder is
    gone either way. Raises OSError."""
    partial = out_dir.with_name(f"{out_dir.name}.partial-{secrets.token_hex(4)}")
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(partial, 0o700 if private else 0o777)
        yield partial
        _swap_in(partial, out_dir)
    finally:
        remove_under(partial.parent, partial.name)  # gone after the swap; the leftovers of a failure otherwise


def _swap_in(partial: Path, out_dir: Path) -> None:
    old = None
    if os.path.lexists(out_dir):
        old = out_dir.with_name(f"{out_dir.name}.old-{secrets.token_hex(4)}")
        os.rename(out_dir, old)  # a link planted under the name is moved aside, never followed
    try:
        os.rename(partial, out_dir)
    except OSError:
        if old is not None:
            with contextlib.suppress(OSError):
                os.rename(old, out_dir)
        raise
    if old is not None:
        remove_under(old.parent, old.name)


def _proven(root: str | os.PathLike[str], components: tuple[str, ...], caller: str) -> Path:
    """`root/components…` once proved under `root` (a link as the last name is acted on itself, wherever it points)."""
    if not components:
        raise ValueError(f"{caller} needs at least one component under the root")
    parent = join_under(root, *components[:-1])
    target = parent / single_component(components[-1], under=parent)
    if not os.path.islink(target):
        join_under(parent, components[-1])
    return target


def remove_under(root: str | os.PathLike[str], *components: str, folders: bool = True) -> bool:
    """Remove `root/components…` — a folder with everything in it, or a file, or a link (the link itself) — after
    `join_under` proved the parent stays under `root`. Whether something was removed; OSError other than a
    missing path is left to the caller only for a folder that could not be removed whole. `folders=False`: the
    name is SegLens's file (a lock, a state file), so a folder found under it is someone else's and is kept
    (IsADirectoryError), never emptied."""
    target = _proven(root, components, "remove_under")
    with parent_under(root, components) as found:
        if found is None:
            return False
        folder_fd, name = found
        try:
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(info.st_mode) and not folders:
            raise IsADirectoryError(errno.EISDIR, "a folder is under the name, not SegLens's file: kept", str(target))
        if stat.S_ISDIR(info.st_mode):
            # never follows a link inside, nor (by the folder's descriptor) one swapped in on the way after the proof
            _rmtree_at(folder_fd, name)
            return not lexists_at(folder_fd, name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=folder_fd)
        return True


def _rmtree_at(folder_fd: int | None, name: str) -> None:
    """rmtree of `name` under `folder_fd`, errors ignored; no link followed, the top one included."""
    if sys.version_info >= (3, 11):  # fd-based inside where the OS allows
        return shutil.rmtree(name, ignore_errors=True, dir_fd=folder_fd)
    return rmtree_by_fd(folder_fd, name) if folder_fd is not None else shutil.rmtree(name, ignore_errors=True)


def remove_empty_under(root: str | os.PathLike[str], *components: str) -> bool:
    """Remove the folder `root/components…` only when it is empty (one rmdir: a file another run writes into it
    meanwhile keeps it), after `join_under` proved it stays under `root`. A link, a file or nothing under the
    name is left as it is. Whether the folder was removed."""
    _proven(root, components, "remove_empty_under")
    with parent_under(root, components) as found:
        if found is None:
            return False
        folder_fd, name = found
        try:
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(info.st_mode):  # a link planted under the name, or a file: not an empty folder of ours
            return False
        try:
            os.rmdir(name, dir_fd=folder_fd)
        except OSError:  # not empty (or not ours to remove)
            return False
        return True


def rename_under(root: str | os.PathLike[str], old: str, new: str, *,
                 under: str | os.PathLike[str] | None = None) -> None:
    """Rename `root/old` to `root/new`, replacing what is at `new` (a log's rotation, a copy moved aside): both
    single components in the folder `root`, which `join_under` proves. A link planted under either name is
    renamed or replaced itself, never followed. `under`: `root` is a folder below it, reached from it by
    descriptor (PlantedLink for a folder on the way that is a link). OSError as os.replace raises it."""
    folder = join_under(root)
    for name in (old, new):
        single_component(name, under=folder)
    with _where(under, folder / old) as (fd, at):
        os.replace(at, new if fd is not None else folder / new, src_dir_fd=fd, dst_dir_fd=fd)


def sync_folder(folder: str | os.PathLike[str]) -> None:
    """fsync a folder, so that a file created or renamed in it is there after a crash (POSIX; Windows has no
    folder fsync). Opened O_DIRECTORY | O_NOFOLLOW: a link planted under the name is not synced through. Best
    effort: a folder that cannot be opened is left as it is."""
    if os.name == "nt":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale_temporaries(folder: Path, *, older_than: float | None = None) -> int:
    """Delete the temporaries a killed run left in `folder` and its sub-folders: SegLens's own only
    (`.seglens-tmp-*.tmp` regular files, not a user's `.notes.tmp`), and only those last written before
    `older_than` (a time.time() value: this run's start; default now), so that a run started at the same time in
    the same folder keeps the files it is writing. Symlinks are neither followed nor removed."""
    cutoff = time.time() if older_than is None else older_than
    removed = 0
    walk = os.fwalk(folder) if CAN_WALK else ((root, dirs, names, None) for root, dirs, names in os.walk(folder))
    for root, _dirs, names, fd in walk:  # neither follows a symlinked folder; fwalk pins each one by descriptor
        for name in names:
            if name.startswith(TEMPORARY_PREFIX) and name.endswith(".tmp"):
                removed += _remove_if_stale(name if fd is not None else os.path.join(root, name), cutoff, fd)
    return removed


def _remove_if_stale(path: str, cutoff: float, folder_fd: int | None) -> int:
    with contextlib.suppress(OSError):
        info = os.stat(path, dir_fd=folder_fd, follow_symlinks=False)
        if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
            os.unlink(path, dir_fd=folder_fd)
            return 1
    return 0
