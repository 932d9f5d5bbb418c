"""SeriesCache under pressure from outside its own call: private modes (it holds patient data), a retrieve killed
mid-series (its partial folder gone at the next start, nothing complete meanwhile), `clear` and eviction racing a
retrieve or a run in another process (pins, held by a real second Python process), a receiving folder removed
under a retrieve."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.io.pacs.cache import MANIFEST, SeriesCache, series_key
from app.io.pacs.client import PacsError

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes and signals")

# A second process: receives (or pins) one series in the cache at argv[1], says "ready", then waits for a line on
# stdin before it finishes (or is killed while it waits).
_OTHER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from app.io.pacs.cache import SeriesCache
    cache = SeriesCache(Path(sys.argv[1]))
    if sys.argv[2] == "receive":
        with cache.receiving("9.9", expected=2) as folder:
            (folder / "a.dcm").write_bytes(b"a" * 10)
            print("ready", flush=True)
            sys.stdin.readline()
            (folder / "b.dcm").write_bytes(b"b" * 10)
        print("done", flush=True)
    else:
        with cache.pin("9.9"):
            print("ready", flush=True)
            sys.stdin.readline()
""")


def _receive(cache: SeriesCache, uid: str, size: int = 100) -> Path:
    with cache.receiving(uid, expected=1) as folder:
        (folder / "a.dcm").write_bytes(b"x" * size)
    found = cache.complete(uid)
    assert found is not None
    return found


@pytest.fixture
def other(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Second processes started by the test (killed at the end if still running)."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _start(started: list[subprocess.Popen[str]], root: Path, what: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", _OTHER, str(root), what], cwd=ROOT, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(process)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_cache_is_private(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir(mode=0o755)  # an earlier SegLens made it world-readable: made private again
    os.chmod(root, 0o755)
    folder = _receive(SeriesCache(root), "1.2.3")
    assert _mode(root) == 0o700 and _mode(folder) == 0o700
    assert _mode(folder / MANIFEST) == 0o600


def test_a_retrieve_killed_leaves_nothing_complete_and_its_partial_goes_at_the_next_start(tmp_path, other):
    root = tmp_path / "cache"
    process = _start(other, root, "receive")
    assert len(list(root.rglob("*.dcm"))) == 1  # in the partial folder
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    cache = SeriesCache(root)
    assert cache.complete("9.9") is None and cache.series() == []
    _receive(cache, "1.2.3")  # the next retrieve (any series) removes what the killed one left
    assert not [p for p in root.rglob("*.dcm") if series_key("1.2.3") not in p.parts]
    assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == [series_key("1.2.3")]


def test_clear_leaves_a_series_another_process_is_receiving(tmp_path, other):
    root = tmp_path / "cache"
    cache = SeriesCache(root)
    _receive(cache, "1.1")
    process = _start(other, root, "receive")
    kept = cache.clear()
    assert cache.complete("1.1") is None
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("go on\n")
    process.stdin.flush()
    assert process.stdout.readline() == "done\n" and process.wait(timeout=30) == 0
    assert cache.complete("9.9") is not None  # received whole, never written into a deleted folder
    assert kept == 0  # 9.9's partial folder was not a series yet


def test_clear_and_eviction_leave_a_series_another_process_pinned(tmp_path, other):
    root = tmp_path / "cache"
    cache = SeriesCache(root, max_bytes=250)
    _receive(cache, "9.9")
    process = _start(other, root, "pin")
    for uid in ("1.1", "1.2", "1.3"):  # 9.9 is the least recently used: eviction would take it first
        _receive(cache, uid)
    assert cache.complete("9.9") is not None and cache.complete("1.1") is None
    assert cache.clear() == 1 and cache.complete("9.9") is not None
    process.kill()  # the pin dies with its process (no PID to be reused)
    process.wait(timeout=30)
    assert cache.clear() == 0 and cache.series() == []


def test_the_series_of_a_run_are_not_evicted_by_its_own_later_series(tmp_path: Path) -> None:
    cache = SeriesCache(tmp_path / "cache", max_bytes=150)
    for uid in ("1.1", "1.2", "1.3"):
        cache.hold(uid)  # what a run --from does before its first series arrives
    for uid in ("1.1", "1.2", "1.3"):
        _receive(cache, uid)
    assert all(cache.complete(uid) is not None for uid in ("1.1", "1.2", "1.3"))
    cache.close()
    _receive(cache, "1.4")
    assert [cache.complete(uid) is not None for uid in ("1.1", "1.2", "1.3", "1.4")] == [False, False, False, True]


def test_a_receiving_folder_removed_under_a_retrieve_is_an_error_not_a_series(tmp_path: Path) -> None:
    cache = SeriesCache(tmp_path / "cache")
    removed = r"^partial retrieve: the cache's receiving folder was removed meanwhile"
    with pytest.raises(PacsError, match=removed), cache.receiving("1.2.3", expected=1) as folder:
        (folder / "a.dcm").write_bytes(b"x")
        shutil.rmtree(folder)
    assert cache.complete("1.2.3") is None


def test_a_link_planted_as_the_cache_folder_is_one_line_and_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "cache").symlink_to(elsewhere)
    cache = SeriesCache(tmp_path / "cache")
    with pytest.raises(PacsError, match=rf"^cache: cannot use {tmp_path / 'cache'} \(refused to write through a "
                                        "symbolic link planted under the name\\)$"), cache.receiving("1.2.3") as folder:
        (folder / "a.dcm").write_bytes(b"x")
    assert list(elsewhere.iterdir()) == []


def test_a_link_planted_under_a_series_name_is_no_series(tmp_path: Path) -> None:
    cache = SeriesCache(tmp_path / "cache")
    real = _receive(cache, "1.2.3")
    elsewhere = tmp_path / "elsewhere"
    real.rename(elsewhere)
    (cache.root / series_key("1.2.3")).symlink_to(elsewhere)
    assert cache.complete("1.2.3") is None and cache.series() == []
    assert cache.clear() == 0 and (elsewhere / MANIFEST).is_file()  # the link removed, never what it points to
