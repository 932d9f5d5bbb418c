"""One run at a time per output folder (two runs into one --out corrupt each other's files)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest
from conftest import stripes
from PIL import Image

from app.errors import OutputError
from app.runs.outputs.lock import LOCK_NAME, OutputLock, start_ticks, this_process


def test_a_second_run_into_a_folder_in_use_is_refused_and_the_lock_goes_with_the_first(tmp_path):
    busy = r"out: another SegLens run is writing here \(process \d+ on this"
    with OutputLock(tmp_path / "out"), pytest.raises(OutputError, match=busy):
        OutputLock(tmp_path / "out").acquire()
    assert not (tmp_path / "out" / LOCK_NAME).exists()
    with OutputLock(tmp_path / "out"):  # free again
        pass


def test_the_lock_of_a_run_that_died_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": platform.node()}))
    with OutputLock(out):
        assert json.loads((out / LOCK_NAME).read_text())["pid"] != int(dead.stdout)


@pytest.mark.parametrize("record", [{"pid": 1, "host": "scanner-room-pc"}, {"pid": 0, "host": "x"}])
def test_another_machines_lock_is_refused_with_what_to_do(tmp_path, record):
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps(record))
    with pytest.raises(OutputError, match=rf"on {record['host']}.*remove {LOCK_NAME} if that run is over"):
        OutputLock(out).acquire()


def test_the_cli_refuses_a_folder_another_run_writes_to(models, tmp_path):
    from test_cli import cli

    Image.fromarray(stripes()).save(tmp_path / "a.png")
    with OutputLock(tmp_path / "out"):
        done = cli("run", models("rgb_classes"), tmp_path / "a.png", "--out", tmp_path / "out")
    assert done.returncode == 2 and "another SegLens run is writing here" in done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []
    assert cli("run", models("rgb_classes"), tmp_path / "a.png", "--out", tmp_path / "out").returncode == 0
    assert not (tmp_path / "out" / LOCK_NAME).exists()


def test_an_output_folder_that_is_a_file_is_said_so(tmp_path):
    (tmp_path / "out").write_text("a user's file")
    with pytest.raises(OutputError, match=r"out: is a file, not a folder"):
        OutputLock(tmp_path / "out").acquire()
    assert (tmp_path / "out").read_text() == "a user's file"


# -- issue 36: who holds a lock is its process, its start and its boot, not a process id and a host name ----------

linux_proc = pytest.mark.skipif(not os.path.exists("/proc/self/stat") or start_ticks(os.getpid()) is None
                                or not os.path.exists("/proc/sys/kernel/random/boot_id"),
                                reason="the start time and boot id are read from Linux's /proc")


def _planted(out, **record) -> None:
    out.mkdir(exist_ok=True)
    (out / LOCK_NAME).write_text(json.dumps(record))


@linux_proc
def test_a_lock_whose_process_id_was_reused_by_another_process_is_taken_over(tmp_path):
    # the run was killed with kill -9 and its process id went to another process: os.kill(pid, 0) said alive, and
    # the folder stayed refused until someone removed the lock by hand
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        mine = this_process()
        _planted(tmp_path / "out", pid=other.pid, host=platform.node(), **{**mine, "start_ticks": 1})
        with OutputLock(tmp_path / "out"):
            assert json.loads((tmp_path / "out" / LOCK_NAME).read_text())["pid"] == os.getpid()
        _planted(tmp_path / "out", pid=other.pid, host=platform.node(),
                 **{**mine, "start_ticks": start_ticks(other.pid)})
        with pytest.raises(OutputError, match="another SegLens run is writing here"):  # that process is the run
            OutputLock(tmp_path / "out").acquire()
    finally:
        other.kill()
        other.wait()


@linux_proc
def test_a_lock_of_this_boot_is_this_machines_whatever_the_host_is_called_now(tmp_path):
    # the host was renamed after the run died: the lock was taken for another machine's and refused for ever
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _planted(tmp_path / "out", pid=int(dead.stdout), host="old-name-of-this-pc", **this_process())
    with OutputLock(tmp_path / "out"):
        pass
    alive = {**this_process(), "pid": os.getpid()}  # and a live run of this boot is refused, whatever its host
    _planted(tmp_path / "out", host="old-name-of-this-pc", **alive)
    with pytest.raises(OutputError, match="another SegLens run is writing here"):
        OutputLock(tmp_path / "out").acquire()


@linux_proc
def test_a_lock_from_an_earlier_boot_of_this_machine_is_taken_over(tmp_path):
    # pid 1 is always alive: a lock of a run killed by a power cut named a pid that lived again after the reboot
    mine = this_process()
    _planted(tmp_path / "out", pid=1, host=platform.node(), **{**mine, "boot_id": "an-earlier-boot"})
    with OutputLock(tmp_path / "out"):
        pass
    other_machine = {**mine, "boot_id": "its-boot", "machine_id": "another-machine", "host": "scanner-room-pc"}
    _planted(tmp_path / "out", pid=1, **other_machine)
    with pytest.raises(OutputError, match="on scanner-room-pc"):
        OutputLock(tmp_path / "out").acquire()
    _planted(tmp_path / "out", pid=os.getpid(), **{**mine, "pid_ns": "pid:[another-container]"})
    with pytest.raises(OutputError, match="another SegLens run is writing here"):
        OutputLock(tmp_path / "out").acquire()


def test_the_lock_is_never_written_through_a_link_planted_under_its_name(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / LOCK_NAME).symlink_to(victim)
    with OutputLock(tmp_path / "out"):
        lock = tmp_path / "out" / LOCK_NAME
        assert not lock.is_symlink() and json.loads(lock.read_text())["pid"] == os.getpid()
    assert victim.read_text() == "someone else's" and not (tmp_path / "out" / LOCK_NAME).exists()


def test_a_folder_planted_under_the_locks_name_is_kept_with_everything_in_it(tmp_path):
    """The lock's name is SegLens's file: a folder there is someone else's, refused in one line, never emptied (the
    stale-lock take-over removed it whole)."""
    planted = tmp_path / "out" / LOCK_NAME
    planted.mkdir(parents=True)
    (planted / "notes.txt").write_text("someone else's")
    os.utime(planted, (0, 0))  # old: what a stale lock looks like
    with pytest.raises(OutputError, match="cannot be removed|cannot take") as caught, OutputLock(tmp_path / "out"):
        pass
    assert str(tmp_path / "out" / LOCK_NAME) in str(caught.value)
    assert (planted / "notes.txt").read_text() == "someone else's"
