"""app.runs.prompts.volume: a session's embeddings cache is shared by everything it prompts, so a volume's slice
is keyed by the volume as well as the slice (slice 3 of one volume is not slice 3 of another)."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from prompt_pairs import sam2_pair

from app.inference.prompt.model import Point, load_prompt_spec, open_prompt_session
from app.io.nifti import nifti_volume
from app.runs.prompts.volume import prompt_volume


def _nifti(path: Path, value: int) -> Path:
    data = np.full((64, 48, 5), 20, np.int16)  # x, y, z: 5 slices of 48 rows × 64 columns
    data[20:40, 10:30, :] = value
    nib.save(nib.Nifti1Image(data, np.eye(4)), str(path))
    return path


def test_each_volumes_slice_is_encoded_for_itself(tmp_path: Path) -> None:
    session = open_prompt_session(load_prompt_spec(sam2_pair(tmp_path, radius=10.0)), "cpu")
    first = nifti_volume(_nifti(tmp_path / "a.nii.gz", 200))
    second = nifti_volume(_nifti(tmp_path / "b.nii.gz", 90))
    for volume in (first, second, first):  # back to the first: its slice from the cache
        prompt_volume(session, volume, start=2, points=[Point(30, 20)])
    assert session.encoder_runs == 2


def test_propagating_both_ways_encodes_each_slice_once(tmp_path: Path) -> None:
    # 160 frame pixels: a disc of 10 image pixels on a 64-column slice (16 frame pixels each)
    session = open_prompt_session(load_prompt_spec(sam2_pair(tmp_path, radius=160.0)), "cpu")
    volume = nifti_volume(_nifti(tmp_path / "a.nii.gz", 200))
    result = prompt_volume(session, volume, start=2, points=[Point(30, 20)], propagate_to="both")
    assert result.slices == (0, 1, 2, 3, 4)  # the test decoder's disc under the point, on every slice
    assert session.encoder_runs == 5  # the start slice once for both directions
