"""A PACS retrieve writes each instance into its partial folder reached from the cache's root by descriptor: the
partial folder swapped for a symlink after `join_under` proved the path gets nothing written through it (issue
36, audit finding 2). The swap is deterministic: `join_under` is wrapped to prove the path, then swap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import app.io.pacs.cache as cache
from app.guard.shared import PlantedLink

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX descriptors (dir_fd) and symlinks")


def test_an_instance_is_not_written_through_a_partial_folder_swapped_for_a_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    partial = root / ("0" * 32 + ".partial-1234abcd")
    partial.mkdir(parents=True)
    elsewhere.mkdir()
    real = cache.join_under

    def proved_then_swapped(*args: str) -> Path:
        target = real(*args)
        os.rename(partial, root / "moved")
        os.symlink(elsewhere, partial)
        return target

    monkeypatch.setattr(cache, "join_under", proved_then_swapped)
    with pytest.raises(PlantedLink) as caught:
        cache.write_instance(partial, "1.2.3", b"DICM patient data")
    assert str(caught.value) == f"{partial}: refused to write through a symbolic link planted under the name"
    assert list(elsewhere.iterdir()) == []
