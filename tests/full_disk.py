"""A real full disk for a test: a tiny tmpfs mounted on a folder and filled to its last byte (ENOSPC from the
kernel, not a mock). Only root can mount one: elsewhere the test that asks is skipped, saying why."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


class FullDisk:
    """The filled tmpfs on `folder`: `free()` gives its space back (the filler removed)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.filler = folder / "filler"

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as handle, contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 4096)

    def free(self) -> None:
        self.filler.unlink()


@contextlib.contextmanager
def full_disk(folder: Path, *, size: str = "256k") -> Iterator[FullDisk]:
    """`folder` (created) on a full tmpfs of `size` for the block; unmounted after it."""
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("a real full disk needs a tmpfs, which only root can mount here")
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a real full disk needs a tmpfs: mount refused ({mounted.stderr.strip()})")
    try:
        disk = FullDisk(folder)
        disk.fill()
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)
