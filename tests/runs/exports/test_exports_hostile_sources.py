"""The exports that read a volume's source files again — the de-identified source copy (app.runs.exports.source_copy)
and a
NIfTI label volume made like its source NIfTI (app.runs.exports.formats) — read them through app.guard.untrusted: a
source file swapped for a named pipe after the volume was read is refused in one line at once (a plain read waited
for a writer for ever), a sparse giant by its size before a byte is read, and nothing is left written."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import dicom_factory
import numpy as np
import pytest
from test_volume_exports import dicom_volume

from app.errors import SegLensError
from app.io.nifti import nifti_volume
from app.runs.exports.formats import write_nifti_labels, write_source_copy
from app.runs.privacy.deidentify import volume_privacy

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
pytest.importorskip("dicognito")
KEY = b"k" * 32


def finished(call, fifo: Path, seconds: float = 20.0) -> BaseException | None:
    """What `call()` raised (None: nothing), failing the test when it still waits after `seconds` (then the pipe is
    opened for writing, so the waiting read ends and the thread with it)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # the test looks at what it was
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
        pytest.fail(f"still waiting on the named pipe after {seconds:g} s")
    return outcome[0]


def swapped_for_a_fifo(path: Path) -> Path:
    path.unlink()
    os.mkfifo(path)
    return path


def test_a_source_slice_swapped_for_a_named_pipe_is_refused_at_once_and_no_copy_is_left(tmp_path):
    volume = dicom_volume(tmp_path / "series")
    privacy = volume_privacy(volume, anonymize=True, key=KEY)  # the headers read, as a run reads them first
    fifo = swapped_for_a_fifo(volume.slices[2].path)
    out = tmp_path / "out" / "x_source"
    raised = finished(lambda: write_source_copy(volume, out, privacy=privacy), fifo)
    assert isinstance(raised, SegLensError) and "\n" not in str(raised)
    assert f"{fifo}: " in str(raised) and "named pipe" in str(raised)
    assert not out.exists() and not [p for p in (tmp_path / "out").iterdir()]


def test_a_source_slice_swapped_for_a_sparse_giant_is_refused_by_its_size(tmp_path):
    volume = dicom_volume(tmp_path / "series")
    privacy = volume_privacy(volume, anonymize=True, key=KEY)
    giant = volume.slices[0].path
    with open(giant, "r+b") as handle:
        handle.truncate(5 << 30)  # 5 GiB that cost nothing on disk
    with pytest.raises(SegLensError, match="too large"):
        write_source_copy(volume, tmp_path / "out" / "x_source", privacy=privacy)
    assert not (tmp_path / "out" / "x_source").exists()


def test_a_source_nifti_swapped_for_a_named_pipe_is_refused_at_once(tmp_path):
    source = tmp_path / "ct.nii"
    dicom_factory.write_nifti(source)
    volume = nifti_volume(source)
    fifo = swapped_for_a_fifo(source)
    labels = np.zeros((volume.depth, volume.rows, volume.columns), np.uint8)
    target = tmp_path / "out" / "ct_mask.nii.gz"
    raised = finished(lambda: write_nifti_labels(volume, labels, target), fifo)
    assert isinstance(raised, SegLensError) and "\n" not in str(raised)
    assert f"{fifo}: " in str(raised) and "named pipe" in str(raised)
    assert not target.exists()
