"""SeriesCache: a series is complete only after its atomic rename with a manifest; oldest evicted; cleared."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from app.io.pacs.cache import MANIFEST, SeriesCache, series_key
from app.io.pacs.client import PacsError


def _receive(cache: SeriesCache, uid: str, sizes: list[int], *, expected: int | None = None) -> Path:
    with cache.receiving(uid, expected=expected) as folder:
        for i, size in enumerate(sizes):
            (folder / f"{i}.dcm").write_bytes(b"x" * size)
    found = cache.complete(uid)
    assert found is not None
    return found


def test_complete_only_after_the_rename(cache: SeriesCache) -> None:
    with cache.receiving("1.2.3", expected=2) as folder:
        (folder / "a.dcm").write_bytes(b"ab")
        assert cache.complete("1.2.3") is None  # half received: not complete
        (folder / "b.dcm").write_bytes(b"cd")
    done = cache.complete("1.2.3")
    assert done == cache.root / series_key("1.2.3")
    assert sorted(p.name for p in done.iterdir()) == ["a.dcm", "b.dcm", MANIFEST]
    manifest = json.loads((done / MANIFEST).read_text())
    assert (manifest["expected"], manifest["received"], manifest["bytes"]) == (2, 2, 4)
    record = cache.retrieved("1.2.3")
    assert record is not None and (record.files, record.bytes, record.folder) == (2, 4, done)
    assert "1.2.3" not in done.name  # named by a hash, not by the UID (nor by patient)


def test_an_error_leaves_nothing(cache: SeriesCache) -> None:
    with pytest.raises(RuntimeError), cache.receiving("1.2.3") as folder:
        (folder / "a.dcm").write_bytes(b"ab")
        raise RuntimeError("server went away")
    assert cache.complete("1.2.3") is None
    assert [p.name for p in cache.root.iterdir() if not p.name.startswith(".")] == []  # no partial folder left


def test_fewer_than_expected_is_refused(cache: SeriesCache) -> None:
    with pytest.raises(PacsError, match=r"^partial retrieve: 1 of 3 instances received; nothing kept$"):
        _receive(cache, "1.2.3", [5], expected=3)
    assert cache.complete("1.2.3") is None
    with pytest.raises(PacsError, match=r"^partial retrieve: 0 of \? instances"):
        _receive(cache, "1.2.4", [])


def test_a_manifest_short_of_its_count_is_not_complete(cache: SeriesCache) -> None:
    folder = _receive(cache, "1.2.3", [1, 1])
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "received": 1}))
    assert cache.complete("1.2.3") is None


def test_a_second_retrieve_replaces_the_first(cache: SeriesCache) -> None:
    _receive(cache, "1.2.3", [1, 1])
    folder = _receive(cache, "1.2.3", [3, 3, 3])
    assert len([p for p in folder.iterdir() if p.suffix == ".dcm"]) == 3


def test_oldest_used_evicted_first_never_the_new_one(tmp_path: Path) -> None:
    cache = SeriesCache(tmp_path, max_bytes=250)
    first = _receive(cache, "1.1", [100])
    second = _receive(cache, "1.2", [100])
    os.utime(first / MANIFEST, (1, 1))
    os.utime(second / MANIFEST, (2, 2))
    assert cache.complete("1.1") == first  # used again: now the newest
    _receive(cache, "1.3", [100])  # 300 > 250: the least recently used (1.2) goes
    assert cache.complete("1.2") is None and not second.exists()
    assert cache.complete("1.1") is not None and cache.complete("1.3") is not None
    _receive(cache, "1.4", [400])  # alone over the bound: it stays, the others go
    assert [cache.complete(uid) is not None for uid in ("1.1", "1.3", "1.4")] == [False, False, True]


def test_clear(cache: SeriesCache) -> None:
    _receive(cache, "1.1", [10])
    _receive(cache, "1.2", [10])
    (cache.root / "leftover").mkdir()
    cache.clear()
    assert cache.series() == [] and cache.size() == 0
    assert [p.name for p in cache.root.iterdir() if not p.name.startswith(".")] == []


@pytest.mark.skipif(sys.platform != "linux", reason="XDG_CACHE_HOME is the Linux user cache folder")
def test_default_root_is_the_user_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert SeriesCache().root == tmp_path / "SegLens" / "pacs"
