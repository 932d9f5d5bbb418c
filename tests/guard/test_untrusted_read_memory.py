"""app.guard.untrusted.read_untrusted holds what the file holds, not its limit: a caller names a generous limit
(256 MiB for a boxes CSV, 4 GiB for an input file), and a small file must not cost that much memory to read."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from app.guard.untrusted import TooLarge, read_untrusted


def test_a_small_file_under_a_large_limit_costs_its_own_size(tmp_path: Path) -> None:
    path = tmp_path / "boxes.csv"
    path.write_bytes(b"a,1,1,2,2\n" * 100_000)  # 1 MB
    tracemalloc.start()
    try:
        data = read_untrusted(path, limit=256 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == b"a,1,1,2,2\n" * 100_000
    assert peak < 4 << 20  # was the limit: 256 MiB allocated for 1 MB


def test_the_limit_still_holds(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(TooLarge):
        read_untrusted(path, limit=1000)
    assert read_untrusted(path, limit=1001) == b"x" * 1001
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert read_untrusted(empty, limit=10) == b""
