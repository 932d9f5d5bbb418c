"""app.paths.cache_own_bytecode: SegLens's own .pyc files are written only where a short write cannot truncate one
(a truncated .pyc makes every later start fail to import that module)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_PROBE = ("import sys; sys.dont_write_bytecode = True; import app.paths as p; p.cache_own_bytecode({args}); "
          "print(sys.dont_write_bytecode)")


def _writes_bytecode(*, args: str = "", limit: int | None = None) -> bool:
    def limited() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run([sys.executable, "-B", "-c", _PROBE.format(args=args)], cwd=REPO, capture_output=True,
                            text=True, timeout=60, check=True, preexec_fn=limited if limit else None)
    return result.stdout.strip() == "False"


def test_a_writable_tree_with_room_caches_its_bytecode():
    assert _writes_bytecode()


def test_a_disk_with_less_free_space_than_the_margin_caches_none():
    free = shutil.disk_usage(REPO / "app").free
    assert not _writes_bytecode(args=f"min_free={free + (1 << 40)}")


@pytest.mark.skipif(sys.platform == "win32", reason="no file-size limits on Windows")
def test_a_process_under_a_file_size_limit_caches_none():
    assert not _writes_bytecode(limit=1 << 20)
