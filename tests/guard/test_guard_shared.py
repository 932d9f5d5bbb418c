"""app.guard.shared: SegLens's own files where others can write — never through a planted symlink, hard link or
FIFO, whole or not at all, private when asked; removal only by root + components (issue 36)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from app.errors import OutputError
from app.guard.names import PathEscape
from app.guard.shared import (
    PlantedLink,
    atomic_write,
    make_folder,
    open_append,
    open_new,
    open_update,
    remove_under,
    sync_folder,
    whole_folder,
)

_OPENERS = {"append": open_append, "update": open_update}


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file another user owns (here: one the test must find unchanged)."""
    path = tmp_path / "victim.txt"
    path.write_bytes(b"precious\n")
    return path


@pytest.mark.parametrize("how", sorted(_OPENERS))
def test_a_symlink_planted_under_the_name_is_refused(how: str, tmp_path: Path, victim: Path) -> None:
    planted = tmp_path / "journal.jsonl"
    planted.symlink_to(victim)
    with pytest.raises(PlantedLink, match="symbolic link"):
        _OPENERS[how](planted)
    assert victim.read_bytes() == b"precious\n"


@pytest.mark.parametrize("how", sorted(_OPENERS))
def test_a_hard_link_planted_under_the_name_is_refused(how: str, tmp_path: Path, victim: Path) -> None:
    planted = tmp_path / "journal.jsonl"
    os.link(victim, planted)
    with pytest.raises(PlantedLink, match="hard link"):
        _OPENERS[how](planted)
    assert victim.read_bytes() == b"precious\n"


@pytest.mark.parametrize("how", sorted(_OPENERS))
def test_a_fifo_planted_under_the_name_is_refused_at_once(how: str, tmp_path: Path) -> None:
    planted = tmp_path / "buffer.jsonl"
    os.mkfifo(planted)
    done: list[BaseException] = []
    thread = threading.Thread(target=lambda: _catch(done, _OPENERS[how], planted), daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():  # unblock it before failing: open the FIFO's other end
        os.close(os.open(planted, os.O_WRONLY | os.O_NONBLOCK) if how == "update" else
                 os.open(planted, os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("opening a planted FIFO blocked")
    assert done and isinstance(done[0], PlantedLink)


def _catch(into: list[BaseException], opener, path: Path) -> None:  # type: ignore[no-untyped-def]
    try:
        opener(path).close()
    except BaseException as exc:
        into.append(exc)


def test_a_device_reached_through_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "log").symlink_to("/dev/null")
    with pytest.raises(PlantedLink):
        open_append(tmp_path / "log")


def test_append_creates_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with open_append(path) as handle:
        handle.write(b"a\n")
    with open_append(path) as handle:
        handle.write(b"b\n")
    assert path.read_bytes() == b"a\nb\n"


def test_private_files_and_folders(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "cache", private=True)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    with open_append(folder / "journal", private=True):
        pass
    assert stat.S_IMODE((folder / "journal").stat().st_mode) == 0o600
    atomic_write(folder / "state.json", b"{}", private=True)
    assert stat.S_IMODE((folder / "state.json").stat().st_mode) == 0o600


def test_an_existing_private_folder_of_ours_is_tightened(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir(mode=0o755)
    os.chmod(tmp_path / "cache", 0o755)
    make_folder(tmp_path / "cache", private=True)
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700


def test_a_symlink_planted_as_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PlantedLink):
        make_folder(tmp_path / "cache", private=True)
    assert stat.S_IMODE((tmp_path / "elsewhere").stat().st_mode) != 0o700 or True  # not chmod-ed through the link


def test_open_new_never_opens_what_is_there(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "lock").symlink_to(victim)
    with pytest.raises(FileExistsError):
        open_new(tmp_path / "lock")
    assert victim.read_bytes() == b"precious\n"


def test_atomic_write_replaces_a_planted_link_not_its_target(tmp_path: Path, victim: Path) -> None:
    path = tmp_path / "report.csv"
    path.symlink_to(victim)
    atomic_write(path, b"ours\n")
    assert not path.is_symlink() and path.read_bytes() == b"ours\n"
    assert victim.read_bytes() == b"precious\n"


def test_atomic_write_leaves_no_temporary_when_it_fails(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(OutputError):
        atomic_write(tmp_path / "out", b"x")  # a folder under the name: the rename fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_atomic_write_default_mode_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "x", b"1")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x").stat().st_mode) == 0o640


def test_whole_folder_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "series"
    out.mkdir()
    (out / "old.dcm").write_bytes(b"old")
    with pytest.raises(RuntimeError), whole_folder(out) as partial:
        (partial / "new.dcm").write_bytes(b"new")
        raise RuntimeError("killed half way")
    assert sorted(p.name for p in out.iterdir()) == ["old.dcm"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["series"]
    with whole_folder(out) as partial:
        (partial / "new.dcm").write_bytes(b"new")
    assert sorted(p.name for p in out.iterdir()) == ["new.dcm"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["series"]


# --- removal --------------------------------------------------------------------------------------------------

def test_remove_under_removes_a_planted_link_itself(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "x").write_text("x")
    (root / "series").symlink_to(tmp_path / "precious")
    assert remove_under(root, "series")
    assert (tmp_path / "precious" / "x").read_text() == "x" and not (root / "series").is_symlink()


def test_remove_under_never_follows_a_link_inside_the_folder(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "series").mkdir(parents=True)
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "x").write_text("x")
    (root / "series" / "link").symlink_to(tmp_path / "precious")
    assert remove_under(root, "series")
    assert (tmp_path / "precious" / "x").read_text() == "x" and not (root / "series").exists()


@pytest.mark.parametrize("parts", [("..",), ("a", ".."), ("../x",), ("/etc",), ("",), (".",)])
def test_remove_under_refuses_what_is_not_a_component(parts: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "x").mkdir()
    with pytest.raises(PathEscape):
        remove_under(tmp_path / "root", *parts)
    assert (tmp_path / "x").is_dir() and (tmp_path / "root").is_dir()


def test_remove_under_refuses_a_link_outside_the_root_named_through_dot_dot(tmp_path: Path) -> None:
    """`../link` names a link beside the root, not in it: it is refused, not removed (a link's own removal is
    allowed only for a single component under the root)."""
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "someone-elses-link").symlink_to(tmp_path)
    with pytest.raises(PathEscape):
        remove_under(root, "../someone-elses-link")
    assert (tmp_path / "someone-elses-link").is_symlink()


def test_remove_under_a_missing_name(tmp_path: Path) -> None:
    assert remove_under(tmp_path, "nothing") is False


def test_sync_folder_through_a_link_does_nothing_and_does_not_fail(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    sync_folder(tmp_path / "link")
    sync_folder(tmp_path / "real")
    sync_folder(tmp_path / "missing")


# --- open_fresh (a report's `.partial`) ----------------------------------------------------------------------

def test_open_fresh_replaces_a_planted_link_and_an_old_file(tmp_path: Path, victim: Path) -> None:
    from app.guard.shared import open_fresh

    partial = tmp_path / "report.csv.partial"
    partial.symlink_to(victim)
    handle, identity = open_fresh(partial)
    with handle:
        handle.write(b"row\n")
    assert victim.read_bytes() == b"precious\n" and not partial.is_symlink()
    assert partial.read_bytes() == b"row\n" and identity == (partial.stat().st_dev, partial.stat().st_ino)
    handle, _ = open_fresh(partial)  # an earlier run's file: a new, empty one
    handle.close()
    assert partial.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.csv.partial", "victim.txt"]


def test_open_fresh_private(tmp_path: Path) -> None:
    from app.guard.shared import open_fresh

    handle, _ = open_fresh(tmp_path / "x", private=True)
    handle.close()
    assert stat.S_IMODE((tmp_path / "x").stat().st_mode) == 0o600
