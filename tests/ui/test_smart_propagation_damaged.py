"""A propagation on a volume damaged since it was opened (a file truncated on disk, still being copied) ends in
one line (issue 28): the worker's slot raised ImageError from reading the start slice, so no PropagationDone came
and the viewer said "propagating …" with Stop shown for ever."""

from __future__ import annotations

import os

import nibabel as nib
import numpy as np

from app.io.images import read_slice
from app.io.nifti import nifti_volume
from app.ui.state.prompt_messages import PromptLoad, PropagateRequest
from app.ui.state.view_state import LatestRequest
from app.ui.workers.prompt_worker import PromptWorker


def test_a_volume_truncated_since_it_was_opened_ends_the_propagation_in_one_line(tmp_path):
    path = tmp_path / "ball.nii"
    values = np.random.default_rng(0).integers(0, 200, (32, 32, 8)).astype(np.int16)
    nib.save(nib.Nifti1Image(values, np.eye(4)), str(path))
    volume = nifti_volume(path)
    read_slice(volume, 3)
    os.truncate(path, 352 + 32 * 32 * 2 * 5)  # five slices of eight left
    worker = PromptWorker(latest=LatestRequest(), latest_prefetch=LatestRequest())
    ended, given = [], []
    worker.propagation_ended.connect(ended.append)
    worker.propagated.connect(given.append)
    worker.load(PromptLoad(1, "prompt_demo"))
    mask = np.zeros((32, 32), bool)
    mask[10:20, 10:20] = True
    worker.propagate(PropagateRequest(7, str(path), volume, 3, mask, None, 1, 8, None))
    assert given == [] and len(ended) == 1
    done = ended[0]
    assert done.request_id == 7 and done.end.last == 3
    assert done.end.reason == (f"{path}: damaged NIfTI data (the header declares 16384 bytes of voxels from byte "
                               "352; the file holds 10592 bytes)")
