"""A volume's image as one native array for the three-plane view (app.io.stack): the slices as the volume
decode reads them, at their k; a volume over the limit refused in one line before anything is allocated."""

from __future__ import annotations

import numpy as np
import pytest

from app.errors import ImageError
from app.io.discover import discover
from app.io.images import read_slice
from app.io.stack import VolumeStack
from tests.dicom_factory import disc_slice, write_series


def _series(tmp_path, slices: int = 5):
    write_series(tmp_path / "ct", slices=slices, shuffle=True)
    (item,) = discover([tmp_path / "ct"])
    return item.volume


def test_steps_stack_every_slice_in_real_units_at_its_position(tmp_path):
    volume = _series(tmp_path)
    stack = VolumeStack(volume, chunk=2)
    assert stack.step() == 2 and not stack.complete and stack.done == 2
    while not stack.complete:
        stack.step()
    assert stack.array.shape == (5, 32, 32) and stack.array.dtype == np.float32
    for k in range(5):
        assert np.array_equal(stack.array[k], disc_slice(k, 32, 32))  # HU, ordered along the normal
        assert np.array_equal(stack.array[k], read_slice(volume, k).raw)
    assert stack.step() == 0


def test_a_volume_over_the_limit_is_refused_in_one_line_before_allocating(tmp_path):
    volume = _series(tmp_path)
    with pytest.raises(ImageError) as refused:
        VolumeStack(volume, max_pixels=1000)  # 5 × 32 × 32 float32 = 20 KB over a 16 KB volume budget
    assert str(refused.value) == (f"{volume.source}: volume too large (5×32×32 float32 = 20480 bytes decoded; the "
                                  "limit is 16000 bytes, from --max-megapixels)")


def test_a_4d_nifti_stacks_its_first_time_point(tmp_path):
    """A 4D NIfTI's slices are (t, k) pairs, t-major: the three planes show time point 1, slice k at k."""
    import nibabel as nib

    data = np.zeros((6, 5, 4, 3), np.int16)  # i, j, k, t
    for t in range(3):
        for k in range(4):
            data[:, :, k, t] = 10 * t + k
    nib.save(nib.Nifti1Image(data, np.diag([1.0, 1.0, 2.0, 1.0])), str(tmp_path / "run.nii.gz"))
    (item,) = discover([tmp_path / "run.nii.gz"])
    assert item.volume.time_points == 3 and item.volume.depth == 12
    stack = VolumeStack(item.volume)
    while not stack.complete:
        stack.step()
    assert stack.array.shape == (4, 5, 6)  # [k, row = j, col = i] of t = 0
    assert [float(stack.array[k, 0, 0]) for k in range(4)] == [0.0, 1.0, 2.0, 3.0]
