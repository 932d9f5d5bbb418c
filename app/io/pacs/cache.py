"""The local cache retrieved series land in: private, size-bounded, oldest evicted, cleared on request.

It holds PATIENT DATA (the retrieved DICOM files, identities and all), in the user cache folder
(platformdirs' user_cache_dir("SegLens")/pacs: ~/.cache/SegLens/pacs on Linux, ~/Library/Caches/SegLens/pacs on
macOS, %LOCALAPPDATA%\\SegLens\\Cache\\pacs on Windows), private to the user: folders 0700, files 0600
(app.guard.shared). Folders are named by a hash of the SeriesInstanceUID, never by patient nor by the UID itself
(a server's UID may be `../../x`).

A series is received into a partial folder beside its place (app.guard.shared.whole_folder) and swapped into place
only once every instance has arrived, with a manifest beside the files: a half series never looks complete, also
when the process is killed (its partial folder is removed by the next retrieve, eviction or clear of any process,
since no live process pins it). A series being received, or needed by a run still to read it, is pinned
(app.io.pacs.cache_pins): eviction and `clear` leave it alone, in this process and in any other.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.guard.names import PathEscape, join_under
from app.guard.shared import atomic_write, make_folder, open_new, remove_under, whole_folder
from app.guard.untrusted import SMALL_FILE_LIMIT, read_untrusted
from app.io.pacs.cache_pins import Pin, cache_lock, pinned_keys, take_pin
from app.io.pacs.errors import PacsError

log = logging.getLogger(__name__)

MANIFEST = "seglens-series.json"
_KEY = re.compile(r"^[0-9a-f]{32}$")  # a series folder; anything else in the root is a partial or a leftover


def default_root() -> Path:
    """The cache's folder: the user cache folder's pacs/."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("SegLens", appauthor=False)) / "pacs"


def series_key(series_uid: str) -> str:
    """The folder name of a series: a hash of its UID (a UID may hint at the site; a name never at the patient)."""
    return hashlib.sha256(series_uid.strip().encode("ascii", "replace")).hexdigest()[:32]


def instance_name(sop_uid: str) -> str:
    """A file name for one received instance (a hash of its SOPInstanceUID: unique, safe on every file system)."""
    return hashlib.sha256(sop_uid.strip().encode("ascii", "replace")).hexdigest()[:32] + ".dcm"


def write_instance(folder: Path, sop_uid: str, data: bytes) -> int:
    """One received instance into a receiving folder, private (0600), named by `instance_name`; its bytes.
    FileExistsError when an instance with that SOPInstanceUID is there already (a server sending one twice)."""
    # reached from the cache's root (the partial folder's parent) by descriptor: a partial folder swapped for a
    # link by someone who can write into the cache gets nothing written through it
    with open_new(join_under(folder, instance_name(sop_uid)), private=True, root=folder.parent) as handle:
        handle.write(data)
    return len(data)


def dataset_bytes(dataset: Any) -> bytes:
    """A pydicom Dataset as the DICOM Part 10 file the cache keeps."""
    buffer = io.BytesIO()
    dataset.save_as(buffer, enforce_file_format=True)
    return buffer.getvalue()


@dataclass(frozen=True)
class Retrieved:
    """A COMPLETE series in the cache: its folder, how many files and bytes."""

    series_uid: str
    folder: Path
    files: int
    bytes: int


class SeriesCache:
    """Complete series by SeriesInstanceUID, at most `max_bytes` in all (the oldest used evicted first, never a
    pinned one)."""

    def __init__(self, root: Path | None = None, *, max_bytes: int = 20 * 2**30) -> None:
        self.root = root if root is not None else default_root()
        self.max_bytes = max_bytes
        self._held: list[Pin] = []

    def _ready(self) -> Path:
        """The root, created private (an existing one of this user's made 0700)."""
        return make_folder(self.root, private=True)

    def complete(self, series_uid: str) -> Path | None:
        """The folder of a complete series, else None. Marks it used (eviction takes the least recently used)."""
        try:
            folder = join_under(self.root, series_key(series_uid))
        except PathEscape:  # a link planted under the series' name, out of the cache
            return None
        manifest = _read_manifest(folder)
        if manifest is None or manifest.get("series_uid") != series_uid.strip():
            return None
        with contextlib.suppress(OSError):  # a read-only cache still serves what it holds
            os.utime(folder / MANIFEST)
        return folder

    def retrieved(self, series_uid: str) -> Retrieved | None:
        """The record of a complete series (its folder, file count and bytes from its manifest), else None."""
        folder = self.complete(series_uid)
        manifest = _read_manifest(folder) if folder else None
        if folder is None or manifest is None:
            return None
        return Retrieved(series_uid.strip(), folder, int(manifest["received"]), int(manifest["bytes"]))

    def pin(self, series_uid: str) -> Pin:
        """Pin a series (held until released, or this process ends): eviction and `clear`, here or in another
        process, leave it alone. A run pins the series it retrieves before the first one arrives. What retrieves
        that are gone left (this series' partial folder included) is removed first."""
        with cache_lock(self._ready()):
            self._sweep()
            return take_pin(self.root, series_key(series_uid))

    def hold(self, series_uid: str) -> None:
        """Pin a series for as long as this cache object is open (`close`)."""
        self._held.append(self.pin(series_uid))

    def close(self) -> None:
        """Release the pins `hold` took."""
        for pin in self._held:
            pin.release()
        self._held.clear()

    @contextmanager
    def receiving(self, series_uid: str, *, expected: int | None = None) -> Iterator[Path]:
        """A partial folder to receive one series into, the series pinned meanwhile. On a clean exit it takes the
        series' place with a manifest (expected and received counts), then the cache is evicted down to its bound;
        on an exception, or when fewer files than `expected` (or none) arrived, it is deleted and nothing of the
        series looks complete. Partial folders of retrieves that are gone are removed first."""
        key = series_key(series_uid)
        stage = "opening"
        try:
            pin = self.pin(series_uid)
        except OSError as e:  # the cache folder not writable, or a link planted under its name
            raise PacsError(f"cache: cannot use {self.root} ({e.strerror or type(e).__name__})") from e
        with pin:
            try:
                with whole_folder(join_under(self.root, key), private=True) as partial:
                    stage = "receiving"
                    yield partial
                    self._seal(series_uid, partial, expected)
                    stage = "swapping"
            except OSError as e:
                if stage == "receiving":
                    raise  # the caller's own failure, as it was
                if stage == "opening" or self.complete(series_uid) is None:  # not another retrieve finishing first
                    raise PacsError(f"cache: cannot keep the series ({e.strerror or type(e).__name__})") from e
            log.debug("cache: series %s complete", key)
        self.evict(keep=key)

    def _seal(self, series_uid: str, partial: Path, expected: int | None) -> None:
        """The partial folder checked whole and given its manifest (PacsError otherwise)."""
        if not partial.is_dir():
            raise PacsError("partial retrieve: the cache's receiving folder was removed meanwhile; nothing kept")
        files = [p for p in partial.iterdir() if not p.name.startswith(".")]
        if not files or (expected is not None and len(files) != expected):
            raise PacsError(f"partial retrieve: {len(files)} of {expected if expected is not None else '?'} "
                            "instances received; nothing kept")
        sizes = [p.lstat() for p in files]
        manifest = {
            "series_uid": series_uid.strip(),
            "expected": expected if expected is not None else len(files),
            "received": len(files),
            "bytes": sum(s.st_size for s in sizes),
            "completed": time.time(),
        }
        atomic_write(partial / MANIFEST, json.dumps(manifest).encode(), private=True, root=self.root)

    def series(self) -> list[tuple[Path, float, int]]:
        """The complete series held: (folder, last used, bytes), least recently used first."""
        held = []
        for name in self._names():
            if not _KEY.match(name) or os.path.islink(self.root / name):
                continue
            folder = join_under(self.root, name)
            manifest = _read_manifest(folder)
            if manifest is not None:
                with contextlib.suppress(OSError):
                    held.append((folder, (folder / MANIFEST).stat().st_mtime, int(manifest["bytes"])))
        return sorted(held, key=lambda item: item[1])

    def _names(self) -> list[str]:
        return sorted(os.listdir(self.root)) if self.root.is_dir() else []

    def size(self) -> int:
        """The bytes the complete series take."""
        return sum(size for _, _, size in self.series())

    def evict(self, *, keep: str = "") -> None:
        """Delete the least recently used series until the cache is under `max_bytes` (never a pinned series nor
        the one whose key is `keep`: the one just retrieved stays even when it alone is larger)."""
        if not self.root.is_dir():
            return
        with cache_lock(self._ready()):
            pinned = pinned_keys(self.root) | {keep}
            held = self.series()
            total = sum(size for _, _, size in held)
            for folder, _, size in held:
                if total <= self.max_bytes:
                    break
                if folder.name not in pinned:
                    self._discard(folder.name)
                    total -= size

    def clear(self) -> int:
        """Delete every series the cache holds, and every partial folder no live retrieve is writing; a pinned
        series (being received, or needed by a run) stays. Returns how many stayed."""
        if not self.root.is_dir():
            return 0
        with cache_lock(self._ready()):
            pinned = pinned_keys(self.root)
            kept = 0
            for name in self._names():
                if name.startswith("."):
                    continue
                if name.split(".", 1)[0] in pinned:
                    kept += _KEY.match(name) is not None
                    continue
                self._discard(name)
            self._remove_old_layout()
        return kept

    def _sweep(self) -> None:
        """Remove the partial folders (and leftovers) of retrieves that are gone: their series has no live pin.
        Call it under `cache_lock`."""
        pinned = pinned_keys(self.root)
        for name in self._names():
            if not name.startswith(".") and not _KEY.match(name) and name.split(".", 1)[0] not in pinned:
                log.debug("cache: removing %s, left by a retrieve that is gone", name)
                self._discard(name)
        self._remove_old_layout()

    def _remove_old_layout(self) -> None:
        """The receiving and trash folders of SegLens before the partial folders (never in use by this one)."""
        for old in (".receiving", ".trash"):
            remove_under(self.root, old)

    def _discard(self, name: str) -> None:
        """A series (or a leftover) removed: its manifest first, so that it stops looking complete at once."""
        with contextlib.suppress(OSError, PathEscape):  # a link planted under the name: the link alone goes, below
            remove_under(self.root, name, MANIFEST)
        remove_under(self.root, name)


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a complete series folder (received == expected), else None."""
    try:
        data = json.loads(read_untrusted(folder / MANIFEST, limit=SMALL_FILE_LIMIT, root=folder))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("received"), int) or data.get("received") != data.get(
        "expected"
    ):
        return None
    return data
