"""Reaching a name beneath a root by folder descriptors: no folder on the way followed if it is a link.

A check by path (`names.join_under`, `names.inside`: realpath) holds only while the tree does not change. In a
shared folder someone can swap a folder on the way for a symlink after the check, and a write, a removal or a
read by path would then land where the link points. Here each folder is opened relative to the one before it
with O_DIRECTORY | O_NOFOLLOW, starting at the root, and the last name is then opened, created, renamed or
removed with `dir_fd=`: the descriptor pins the folder that was opened, so a later swap cannot redirect the use.
A link met on the way is refused (LinkOnTheWay naming it). Where the OS has no `dir_fd` (Windows), `CAN_WALK` is
False and callers keep their by-path behaviour. Used by app.guard.shared and app.guard.untrusted only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from app.guard.names import PathEscape, single_component

_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))
CAN_WALK = (os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
            and hasattr(os, "O_NOFOLLOW"))


class LinkOnTheWay(PathEscape):
    """A folder on the way from a root down to a name is a symlink (or not a folder): refused, never followed.
    `link` is the path of that component."""

    def __init__(self, link: str, what: str) -> None:
        super().__init__(f"{link}: refused to go through {what} planted on the way")
        self.link = link
        self.what = what


def parts_under(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> tuple[str, ...]:
    """The components of `path` below `root`, compared as written (no look-up): () for the root itself,
    PathEscape when `path` is not written under `root` (nor under its resolved form)."""
    path_text = os.path.abspath(path)
    for base in (os.path.abspath(root), os.path.realpath(root)):
        relative = os.path.relpath(path_text, base)
        if relative == os.curdir:
            return ()
        parts = tuple(Path(relative).parts)
        if parts and parts[0] != os.pardir and not os.path.isabs(relative):
            return parts
    raise PathEscape(f"{path} is not under {root}")


def open_folder_beneath(root: str | os.PathLike[str], folder: str | os.PathLike[str], *, create: bool = False,
                        mode: int = 0o777) -> int:
    """A descriptor of `folder` (the caller closes it), reached from `root` one component at a time with
    O_DIRECTORY | O_NOFOLLOW; `create`: missing folders are made (`mode`). `root` itself is the caller's choice
    and is opened as named. LinkOnTheWay naming the first component that is a symlink or not a folder;
    FileNotFoundError for a missing one (not `create`); PathEscape when `folder` is not under `root`."""
    parts = parts_under(root, folder)
    if create:  # the root is the user's (or SegLens's own) output folder: made when missing, as a run always did
        os.makedirs(root, mode=mode, exist_ok=True)
    fd = os.open(root, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    here = os.path.abspath(root)
    try:
        for part in parts:
            single_component(part, under=here)
            here = os.path.join(here, part)
            child = _step(fd, part, here, create=create, mode=mode)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(fd: int, part: str, here: str, *, create: bool, mode: int) -> int:
    """The folder `part` under the descriptor `fd`, opened without following a link (`fd` stays open)."""
    try:
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):  # made by another run meanwhile: opened like any other
                os.mkdir(part, mode, dir_fd=fd)
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise LinkOnTheWay(here, _what(fd, part)) from None
        raise
    return child


def _what(fd: int, part: str) -> str:
    try:
        mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
    except OSError:
        return "something that is not a folder"
    return "a symbolic link" if stat.S_ISLNK(mode) else "something that is not a folder"


def folder_and_name(root: str | os.PathLike[str], path: str | os.PathLike[str], *, create: bool = False,
                    mode: int = 0o777) -> tuple[int, str]:
    """(a descriptor of `path`'s folder, reached from `root` as `open_folder_beneath` does; `path`'s last name).
    The caller closes the descriptor."""
    target = Path(path)
    name = single_component(target.name, under=target.parent)
    return open_folder_beneath(root, target.parent, create=create, mode=mode), name


@contextlib.contextmanager
def parent_under(root: str | os.PathLike[str],
                 components: tuple[str, ...]) -> Iterator[tuple[int | None, str] | None]:
    """(a descriptor of `root/components[:-1]`, the last component), closed after the block; None when a folder
    on the way is gone; LinkOnTheWay (a PathEscape) for one that is a link by now. Without `dir_fd` (Windows):
    (None, the whole path)."""
    if not CAN_WALK:
        yield None, os.fspath(Path(root).joinpath(*components))
        return
    try:
        fd = open_folder_beneath(root, Path(root).joinpath(*components[:-1]))
    except FileNotFoundError:
        yield None
        return
    try:
        yield fd, components[-1]
    finally:
        os.close(fd)


def rmtree_by_fd(folder_fd: int, name: str) -> None:
    """Remove the folder `name` under `folder_fd` and all in it, errors ignored, no link followed (the top one
    included): Python 3.10's shutil.rmtree takes no dir_fd."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=folder_fd)
    except OSError:
        return
    try:
        with os.scandir(fd) as entries:
            children = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for child, is_folder in children:
            if is_folder:
                rmtree_by_fd(fd, child)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=folder_fd)


def lexists_at(folder_fd: int | None, name: str) -> bool:
    """Whether anything (a link included) is under `name` in `folder_fd` (or at the path `name` without one)."""
    try:
        os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
