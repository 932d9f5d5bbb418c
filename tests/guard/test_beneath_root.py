"""A folder on the way planted as a symlink, or swapped for one between a check and the use, never sends a write,
a removal or a rooted read outside its root: with `root=`, app.guard.shared and app.guard.untrusted reach every
folder from the root by descriptor, none followed if it is a link (issue 36, audit findings 2, 3, 4, 9, 11).

The races are made deterministic: the swap happens inside the gate's own check (`join_under` / `inside` wrapped
to swap right after proving the path), i.e. exactly between the check and the use."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import app.guard.shared as shared
import app.guard.untrusted as untrusted
from app.errors import OutputError
from app.guard.beneath import LinkOnTheWay, open_folder_beneath
from app.guard.names import PathEscape
from app.guard.shared import (
    PlantedLink,
    atomic_write,
    create_temporary,
    make_folder,
    open_append,
    open_fresh,
    open_new,
    open_update,
    remove_empty_under,
    remove_under,
)
from app.guard.untrusted import NotRegularFile, OutsideRoot, open_untrusted, read_untrusted, untrusted_problem

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX descriptors (dir_fd) and symlinks")


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """(out, elsewhere): `out/NG` is a symlink, planted by whoever can write into the shared output folder, to a
    folder SegLens can write and the planter cannot."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "NG")
    return out, elsewhere


def _append(path: Path, root: Path) -> None:
    with open_append(path, root=root) as handle:
        handle.write(b"line\n")


def _update(path: Path, root: Path) -> None:
    with open_update(path, root=root) as handle:
        handle.write(b"line\n")


def _new(path: Path, root: Path) -> None:
    with open_new(path, root=root) as handle:
        handle.write(b"x")


def _fresh(path: Path, root: Path) -> None:
    handle, _ = open_fresh(path, root=root)
    handle.close()


def _temporary(path: Path, root: Path) -> None:
    fd, _ = create_temporary(path.parent, path.name, root=root)
    os.close(fd)


_OPENERS: dict[str, Callable[[Path, Path], None]] = {
    "open_append": _append, "open_update": _update, "open_new": _new, "open_fresh": _fresh,
    "create_temporary": _temporary}


@pytest.mark.parametrize("how", sorted(_OPENERS))
def test_a_writer_with_a_root_refuses_a_folder_on_the_way_planted_as_a_link(
        how: str, planted: tuple[Path, Path]) -> None:
    out, elsewhere = planted
    with pytest.raises(PlantedLink) as caught:
        _OPENERS[how](out / "NG" / "journal.jsonl", out)
    assert str(caught.value) == f"{out / 'NG'}: refused to write through a symbolic link planted under the name"
    assert list(elsewhere.iterdir()) == []


def test_atomic_write_with_a_root_refuses_a_folder_on_the_way_planted_as_a_link(planted: tuple[Path, Path]) -> None:
    out, elsewhere = planted
    with pytest.raises(OutputError) as caught:
        atomic_write(out / "NG" / "line1" / "frame1.png", b"copy", root=out)
    assert str(caught.value) == (f"{out / 'NG' / 'line1' / 'frame1.png'}: cannot write ({out / 'NG'}: refused to "
                                 "write through a symbolic link planted under the name)")
    assert list(elsewhere.iterdir()) == []


def test_make_folder_with_a_root_refuses_a_folder_on_the_way_planted_as_a_link(planted: tuple[Path, Path]) -> None:
    out, elsewhere = planted
    with pytest.raises(PlantedLink, match="NG: refused"):
        make_folder(out / "NG" / "sub", private=True, root=out)
    assert list(elsewhere.iterdir()) == []


def test_writers_with_a_root_make_the_folders_and_write_inside(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    atomic_write(out / "ng" / "line1" / "a.png", b"copy", root=out)
    assert (out / "ng" / "line1" / "a.png").read_bytes() == b"copy"
    _append(out / "ng" / "journal.jsonl", out)
    _append(out / "ng" / "journal.jsonl", out)
    assert (out / "ng" / "journal.jsonl").read_bytes() == b"line\nline\n"
    assert make_folder(out / "review" / "x", private=True, root=out).is_dir()
    assert (os.stat(out / "review" / "x").st_mode & 0o777) == 0o700
    assert [p.name for p in (out / "ng" / "line1").iterdir()] == ["a.png"]  # no temporary left


def test_a_path_not_under_the_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PathEscape):
        atomic_write(tmp_path / "other" / "a.png", b"x", root=tmp_path / "out")
    assert not (tmp_path / "other").exists()


def test_the_sinks_sequence_with_a_folder_swapped_after_the_check_writes_nothing_outside(
        tmp_path: Path) -> None:
    """join_under proves out/ng/line1/part.png; the folder is then swapped for a link; atomic_write(root=out) is
    the one lookup that counts."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "ng" / "line1").mkdir(parents=True)
    elsewhere.mkdir()
    target = shared.join_under(out, "ng", "line1", "part1.png")
    os.rename(out / "ng" / "line1", out / "ng" / "moved")
    os.symlink(elsewhere, out / "ng" / "line1")
    with pytest.raises(OutputError, match="line1: refused to write through a symbolic link"):
        atomic_write(target, b"copy", root=out)
    assert list(elsewhere.iterdir()) == []


def _swap_after_the_proof(monkeypatch: pytest.MonkeyPatch, module: object, name: str, calls: int,
                          swap: Callable[[], None]) -> None:
    """Wrap `module.name` (the gate's by-path proof) so that the `calls`-th call proves the path and then the
    folder is swapped for a link: the window between check and use, hit every time."""
    real = getattr(module, name)
    seen = [0]

    def proved_then_swapped(*args: object) -> object:
        result = real(*args)
        seen[0] += 1
        if seen[0] == calls:
            swap()
        return result

    monkeypatch.setattr(module, name, proved_then_swapped)


def _swap_series(root: Path, outside: Path) -> Callable[[], None]:
    def swap() -> None:
        os.rename(root / "series", root / "real")
        os.symlink(outside, root / "series")
    return swap


def test_remove_under_with_a_folder_swapped_after_the_proof_removes_nothing_outside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, precious = tmp_path / "cache", tmp_path / "precious"
    (root / "series" / "old").mkdir(parents=True)
    (precious / "old").mkdir(parents=True)
    (precious / "old" / "scan.dcm").write_bytes(b"other patient")
    _swap_after_the_proof(monkeypatch, shared, "join_under", 2, _swap_series(root, precious))
    with pytest.raises(PathEscape) as caught:
        remove_under(root, "series", "old")
    assert isinstance(caught.value, LinkOnTheWay)
    assert str(caught.value) == f"{root / 'series'}: refused to go through a symbolic link planted on the way"
    assert (precious / "old" / "scan.dcm").read_bytes() == b"other patient"


def test_remove_under_a_file_with_a_folder_swapped_after_the_proof_removes_nothing_outside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, precious = tmp_path / "cache", tmp_path / "precious"
    (root / "series").mkdir(parents=True)
    (root / "series" / "state.json").write_bytes(b"ours")
    precious.mkdir()
    (precious / "state.json").write_bytes(b"theirs")
    _swap_after_the_proof(monkeypatch, shared, "join_under", 2, _swap_series(root, precious))
    with pytest.raises(PathEscape):
        remove_under(root, "series", "state.json", folders=False)
    assert (precious / "state.json").read_bytes() == b"theirs"


def test_remove_empty_under_with_a_folder_swapped_after_the_proof_removes_nothing_outside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, precious = tmp_path / "cache", tmp_path / "precious"
    (root / "series" / "empty").mkdir(parents=True)
    (precious / "empty").mkdir(parents=True)
    _swap_after_the_proof(monkeypatch, shared, "join_under", 2, _swap_series(root, precious))
    with pytest.raises(PathEscape):
        remove_empty_under(root, "series", "empty")
    assert (precious / "empty").is_dir()


def test_remove_under_still_removes_inside_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "series" / "old" / "deep").mkdir(parents=True)
    (root / "series" / "old" / "deep" / "a").write_bytes(b"x")
    assert remove_under(root, "series", "old") is True
    assert not (root / "series" / "old").exists()
    assert remove_under(root, "gone", "old") is False
    assert remove_empty_under(root, "gone", "old") is False


def test_open_untrusted_with_a_folder_swapped_after_the_check_reads_nothing_outside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = tmp_path / "watched", tmp_path / "outside"
    (root / "series").mkdir(parents=True)
    (root / "series" / "scan.txt").write_bytes(b"inside data")
    outside.mkdir()
    (outside / "scan.txt").write_bytes(b"SECRET outside the root")
    _swap_after_the_proof(monkeypatch, untrusted, "inside", 1, _swap_series(root, outside))
    with pytest.raises(OutsideRoot) as caught:
        read_untrusted(root / "series" / "scan.txt", limit=1 << 20, root=root)
    assert str(caught.value) == f"leads outside {root} (a symbolic link)"


def test_untrusted_problem_with_a_folder_swapped_after_the_check_names_the_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = tmp_path / "watched", tmp_path / "outside"
    (root / "series").mkdir(parents=True)
    (root / "series" / "scan.txt").write_bytes(b"inside data")
    outside.mkdir()
    (outside / "scan.txt").write_bytes(b"SECRET outside the root")
    _swap_after_the_proof(monkeypatch, untrusted, "inside", 1, _swap_series(root, outside))
    assert untrusted_problem(root / "series" / "scan.txt", root=root) == f"leads outside {root} (a symbolic link)"


def test_a_hard_link_in_a_watched_folder_is_refused_with_a_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "watched", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "owner-only.txt").write_bytes(b"owner-only data outside the watched folder")
    os.link(outside / "owner-only.txt", root / "scan.txt")
    with pytest.raises(NotRegularFile) as caught:
        open_untrusted(root / "scan.txt", limit=1 << 20, root=root)
    assert str(caught.value) == "not a regular file: a hard link"
    assert untrusted_problem(root / "scan.txt", root=root) == "not a regular file: a hard link"
    # a file the user named (no root) is theirs to name, hard links included
    assert read_untrusted(root / "scan.txt", limit=1 << 20) == b"owner-only data outside the watched folder"


def test_a_rooted_read_inside_still_reads(tmp_path: Path) -> None:
    root = tmp_path / "watched"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "scan.txt").write_bytes(b"inside")
    assert read_untrusted(root / "a" / "b" / "scan.txt", limit=100, root=root) == b"inside"
    (root / "top.txt").write_bytes(b"top")
    assert read_untrusted(root / "top.txt", limit=100, root=root) == b"top"
    assert untrusted_problem(root / "a" / "b" / "scan.txt", root=root) is None


def test_open_folder_beneath(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    fd = open_folder_beneath(root, root / "x" / "y", create=True)
    os.close(fd)
    assert (root / "x" / "y").is_dir()
    os.symlink(tmp_path, root / "x" / "link")
    with pytest.raises(LinkOnTheWay, match="link: refused to go through a symbolic link planted on the way"):
        open_folder_beneath(root, root / "x" / "link" / "z", create=True)
    assert not (tmp_path / "z").exists()
    with pytest.raises(FileNotFoundError):
        open_folder_beneath(root, root / "missing")
    with pytest.raises(PathEscape):
        open_folder_beneath(root, tmp_path)


def test_the_log_is_never_written_through_a_link_planted_as_seglens_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.logs import RotatingFile

    logs, victim = tmp_path / "shared-logs", tmp_path / "victim.txt"
    logs.mkdir()
    victim.write_bytes(b"victim\n")
    os.symlink(victim, logs / "seglens.log")
    with pytest.raises(PlantedLink, match="seglens.log: refused to write through a symbolic link"):
        RotatingFile(logs / "seglens.log")
    assert victim.read_bytes() == b"victim\n"
    os.unlink(logs / "seglens.log")
    handler = RotatingFile(logs / "seglens.log")
    try:
        handler.emit(logging.LogRecord("t", logging.WARNING, __file__, 1, "written", None, None))
    finally:
        handler.close()
    assert (logs / "seglens.log").read_text(encoding="utf-8") == "written\n"


def test_rename_under_with_under_refuses_a_folder_on_the_way_swapped_for_a_link(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "ng" / "line1").mkdir(parents=True)
    (out / "ng" / "line1" / "a.png").write_bytes(b"ours")
    shared.rename_under(out / "ng" / "line1", "a.png", "a_2.png", under=out)
    assert (out / "ng" / "line1" / "a_2.png").read_bytes() == b"ours"
    elsewhere.mkdir()
    (elsewhere / "a_2.png").write_bytes(b"theirs")
    os.rename(out / "ng" / "line1", out / "ng" / "moved")
    os.symlink(elsewhere, out / "ng" / "line1")
    with pytest.raises(PlantedLink, match="line1: refused to write through a symbolic link"):
        shared.rename_under(out / "ng" / "line1", "a_2.png", "a_3.png", under=out)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["a_2.png"]


def test_stale_temporaries_are_removed_in_the_folder_listed_not_in_one_swapped_in_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "ng").mkdir(parents=True)
    elsewhere.mkdir()
    name = f"{shared.TEMPORARY_PREFIX}frame.png.0000.tmp"
    (out / "ng" / name).write_bytes(b"ours")
    (elsewhere / name).write_bytes(b"theirs")
    for path in (out / "ng" / name, elsewhere / name):
        os.utime(path, (1, 1))
    real = shared._remove_if_stale

    def swapped_then_removed(*args: object) -> int:
        if not os.path.islink(out / "ng"):
            os.rename(out / "ng", out / "moved")
            os.symlink(elsewhere, out / "ng")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(shared, "_remove_if_stale", swapped_then_removed)
    assert shared.remove_stale_temporaries(out) == 1
    assert (elsewhere / name).read_bytes() == b"theirs"
    assert not (out / "moved" / name).exists()
