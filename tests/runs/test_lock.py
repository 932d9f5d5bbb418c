"""One run at a time per output folder (two runs into one --out corrupt each other's files)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest
from conftest import stripes
from PIL import Image

from app.errors import OutputError
from app.runs.lock import LOCK_NAME, OutputLock


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
