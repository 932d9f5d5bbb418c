"""nibabel builds a NIfTI from the one handle the untrusted gate opened, never from the path (issue 36, audit
finding 6): a path checked, then handed to nibabel, was opened again with a blocking open(), so a file swapped for
a FIFO in between held the loader for ever, and the array proxy opened the path again on every slice read."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from app.errors import ImageError
from app.io import nifti


def _volume(path: Path) -> np.ndarray:
    data = np.arange(4 * 5 * 3, dtype=np.int16).reshape(4, 5, 3)
    nib.save(nib.Nifti1Image(data, np.eye(4)), path)
    return data


def _in_thread(work, path: Path) -> list[object]:  # type: ignore[no-untyped-def]
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(_catch(work)), daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # let the reader go
        thread.join(5)
        pytest.fail("the NIfTI read waited on a FIFO swapped in after the open")
    return box


def _catch(work):  # type: ignore[no-untyped-def]
    try:
        return work()
    except Exception as exc:
        return exc


@pytest.mark.parametrize("name", ["vol.nii", "vol.nii.gz"])
def test_a_slice_is_read_from_the_handle_opened_not_from_a_fifo_swapped_in(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    data = _volume(path)
    img = nifti.load_nifti_image(path)
    path.unlink()
    os.mkfifo(path)  # swapped for a FIFO after the header was read
    box = _in_thread(lambda: np.asarray(img.dataobj[:, :, 1]), path)
    assert np.array_equal(box[0], data[:, :, 1])


def test_a_fifo_is_refused_in_one_line_without_waiting(tmp_path: Path) -> None:
    path = tmp_path / "vol.nii"
    os.mkfifo(path)
    box = _in_thread(lambda: nifti.nifti_volume(path), path)
    assert isinstance(box[0], ImageError)
    assert str(box[0]) == f"{path}: not a regular file: a named pipe (FIFO)"


def test_missing_and_damaged(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"vol\.nii: file not found$"):
        nifti.nifti_volume(tmp_path / "vol.nii")
    (tmp_path / "bad.nii").write_bytes(b"\x00" * 400)
    with pytest.raises(ImageError, match=r"bad\.nii: damaged NIfTI header \("):
        nifti.nifti_volume(tmp_path / "bad.nii")


def test_a_nifti_2_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "two.nii"
    data = np.ones((3, 4, 2), np.float32)
    nib.save(nib.Nifti2Image(data, np.eye(4)), path)
    volume = nifti.nifti_volume(path)
    assert volume.depth == 2
