"""State files SegLens reads back from an output or review folder (the run record `--resume` checks, the run lock's
owner, the review log) are opened only as regular files, without blocking (issue 24, §3): a FIFO planted under
one of those names waited for a writer for ever."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


def child(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_fifo_run_record_is_one_line_for_resume(tmp_path):
    report = tmp_path / "seglens_report.csv"
    os.mkfifo(tmp_path / "seglens_report.csv.run.json")
    out = child(f"""
from pathlib import Path
from app.runs.outputs.provenance import resume_problem
print(resume_problem(Path({str(report)!r}), None))
""")  # before: read_text() waited for a writer
    assert out == f"{tmp_path / 'seglens_report.csv.run.json'}: unreadable (not a regular file: a named pipe (FIFO))"


def test_a_fifo_under_the_lock_name_is_taken_for_a_stale_lock(tmp_path):
    from app.runs.outputs.lock import LOCK_NAME

    os.mkfifo(tmp_path / LOCK_NAME)
    out = child(f"""
from pathlib import Path
from app.runs.outputs.lock import OutputLock
lock = OutputLock(Path({str(tmp_path)!r}))
print(lock._owner())
""")
    assert out == "None"


def test_a_fifo_review_log_is_one_line(tmp_path):
    from app.runs.review.log import REVIEW_FILE

    os.mkfifo(tmp_path / REVIEW_FILE)
    out = child(f"""
from pathlib import Path
from app.runs.review.log import ReviewLog, ReviewError
try:
    ReviewLog.open(Path({str(tmp_path)!r}), "0" * 64)
except ReviewError as exc:
    print(exc)
""")
    assert out == f"{tmp_path / REVIEW_FILE}: cannot read (not a regular file: a named pipe (FIFO))"


def test_a_fifo_where_a_corrected_mask_goes_is_refused_not_read(tmp_path):
    from app.runs.review.log import corrected_mask_path

    target = corrected_mask_path(tmp_path, "x.png")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(target)
    out = child(f"""
from pathlib import Path
import numpy as np
from app.runs.review.log import ReviewError, save_corrected_mask
try:
    save_corrected_mask(Path({str(tmp_path)!r}), "x.png", np.zeros((4, 4), np.uint8))
except ReviewError as exc:
    print(exc)
""")  # before: its PNG text was read to see whether SegLens wrote it, which waited for a writer
    assert out == f"{target}: refusing to replace a file that is not a SegLens corrected mask"
