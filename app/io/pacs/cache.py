"""The local cache retrieved series land in: size-bounded, oldest evicted, cleared on request.

It holds PATIENT DATA (the retrieved DICOM files, identities and all), in the user cache folder
(platformdirs' user_cache_dir("SegLens")/pacs: ~/.cache/SegLens/pacs on Linux, ~/Library/Caches/SegLens/pacs on
macOS, %LOCALAPPDATA%\\SegLens\\Cache\\pacs on Windows). Folders are named by a hash of the SeriesInstanceUID, never
by patient. A series is received into a temporary folder under `.receiving/` and renamed into place only once
every instance has arrived, with a manifest beside the files; an error or a stop deletes the temporary folder, so
a half series never looks complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.io.pacs.errors import PacsError

log = logging.getLogger(__name__)

MANIFEST = "seglens-series.json"
_RECEIVING = ".receiving"
_TRASH = ".trash"
_STALE_S = 24 * 3600  # a temporary folder this old belongs to a process that died mid-retrieve


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


@dataclass(frozen=True)
class Retrieved:
    """A COMPLETE series in the cache: its folder, how many files and bytes."""

    series_uid: str
    folder: Path
    files: int
    bytes: int


class SeriesCache:
    """Complete series by SeriesInstanceUID, at most `max_bytes` in all (the oldest used evicted first)."""

    def __init__(self, root: Path | None = None, *, max_bytes: int = 20 * 2**30) -> None:
        self.root = root if root is not None else default_root()
        self.max_bytes = max_bytes
        self._active: set[Path] = set()  # this process's temporary folders, never swept as stale

    def complete(self, series_uid: str) -> Path | None:
        """The folder of a complete series, else None. Marks it used (eviction takes the least recently used)."""
        folder = self.root / series_key(series_uid)
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

    @contextmanager
    def receiving(self, series_uid: str, *, expected: int | None = None) -> Iterator[Path]:
        """A temporary folder to receive one series into. On a clean exit it is renamed into place with a manifest
        (expected and received counts), then the cache is evicted down to its bound; on an exception, or when fewer
        files than `expected` (or none) arrived, it is deleted and nothing of the series looks complete."""
        temp = self.root / _RECEIVING / f"{series_key(series_uid)}-{uuid.uuid4().hex[:8]}"
        temp.mkdir(parents=True, exist_ok=False)
        self._active.add(temp)
        try:
            yield temp
            self._commit(series_uid, temp, expected)
        finally:
            self._active.discard(temp)
            shutil.rmtree(temp, ignore_errors=True)  # after a commit it is gone already
        self.evict(keep=series_key(series_uid))

    def _commit(self, series_uid: str, temp: Path, expected: int | None) -> None:
        files = [p for p in temp.iterdir() if p.is_file() and not p.name.startswith(".")]
        if not files or (expected is not None and len(files) != expected):
            raise PacsError(f"partial retrieve: {len(files)} of {expected if expected is not None else '?'} "
                            "instances received; nothing kept")
        manifest = {
            "series_uid": series_uid.strip(),
            "expected": expected if expected is not None else len(files),
            "received": len(files),
            "bytes": sum(p.stat().st_size for p in files),
            "completed": time.time(),
        }
        (temp / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        target = self.root / series_key(series_uid)
        if target.exists():  # an older copy: moved aside first (a directory rename never replaces a full one)
            self._discard(target)
        try:
            os.rename(temp, target)
        except OSError as e:
            if not (target / MANIFEST).is_file():  # not another retrieve of the same series finishing first
                raise PacsError(f"cache: cannot keep the series ({type(e).__name__})") from e
        log.debug("cache: series %s complete (%d files)", target.name, len(files))

    def _discard(self, folder: Path) -> None:
        trash = self.root / _TRASH / f"{folder.name}-{uuid.uuid4().hex[:8]}"
        trash.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(folder, trash)  # atomic: the folder stops looking complete at once
        except OSError:
            trash = folder
        shutil.rmtree(trash, ignore_errors=True)

    def series(self) -> list[tuple[Path, float, int]]:
        """The complete series held: (folder, last used, bytes), least recently used first."""
        held = []
        for folder in self.root.iterdir() if self.root.is_dir() else []:
            manifest = _read_manifest(folder) if not folder.name.startswith(".") else None
            if manifest is not None:
                held.append((folder, (folder / MANIFEST).stat().st_mtime, int(manifest["bytes"])))
        return sorted(held, key=lambda item: item[1])

    def size(self) -> int:
        """The bytes the complete series take."""
        return sum(size for _, _, size in self.series())

    def evict(self, *, keep: str = "") -> None:
        """Delete the least recently used series until the cache is under `max_bytes` (never the series whose key
        is `keep`: the one just retrieved stays even when it alone is larger), and stale temporary folders."""
        self._sweep(stale_s=_STALE_S)
        held = self.series()
        total = sum(size for _, _, size in held)
        for folder, _, size in held:
            if total <= self.max_bytes:
                break
            if folder.name != keep:
                self._discard(folder)
                total -= size

    def clear(self) -> None:
        """Delete every series the cache holds (and any temporary folder not being received into now)."""
        for folder, _, _ in self.series():
            self._discard(folder)
        self._sweep(stale_s=0)
        for folder in self.root.iterdir() if self.root.is_dir() else []:
            if not folder.name.startswith("."):  # an incomplete leftover without a manifest
                shutil.rmtree(folder, ignore_errors=True)

    def _sweep(self, *, stale_s: float) -> None:
        now = time.time()
        for place in (self.root / _RECEIVING, self.root / _TRASH):
            for folder in place.iterdir() if place.is_dir() else []:
                if folder not in self._active and now - folder.stat().st_mtime >= stale_s:
                    shutil.rmtree(folder, ignore_errors=True)


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a complete series folder (received == expected), else None."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("received"), int) or data.get("received") != data.get(
        "expected"
    ):
        return None
    return data
