"""Several input channels of one case (app.io.channels): nnU-Net's CASE_0000 … CASE_{C-1} files gathered into one
case (found in a folder, or beside the one file named), a 4D NIfTI's volumes as the channels, a missing, unreadable
or mismatched channel that case's one line while the other cases stay, and a case read as [C, D, H, W]."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from app.errors import ImageError
from app.io.channels import (
    CaseStack,
    Channels,
    case_stack,
    case_volume,
    channel_file,
    group_cases,
    model_channels,
)
from app.io.discover import InputFile, discover
from app.io.nifti import nifti_volume
from app.io.stack import VolumeStack

MR = Channels(2, ("T1", "T2"))
SHAPE = (12, 10, 6)  # i (columns), j (rows), k (slices)
AFFINE = np.diag([0.8, 0.9, 2.0, 1.0])


def _data(seed: int, shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 500, shape).astype(np.int16)


def _write(path: Path, data: np.ndarray, affine: np.ndarray = AFFINE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(data, affine), str(path))
    return path


def _case(folder: Path, case: str, seed: int, channels: int = 2) -> list[Path]:
    return [_write(folder / f"{case}_{c:04d}.nii.gz", _data(seed + c)) for c in range(channels)]


def _native(data: np.ndarray) -> np.ndarray:
    """A NIfTI's [i, j, k] data as the volume's [D, H, W] (slice k is data[:, :, k].T)."""
    return data.transpose(2, 1, 0).astype(np.float32)


def _read(volume) -> np.ndarray:
    stack = case_stack(volume)
    while not stack.complete:
        stack.step()
    return stack.array


def test_nnunet_naming_gives_the_case_and_the_channel():
    found = channel_file(Path("x/BraTS_001_0003.nii.gz"))
    assert found is not None and (found.case, found.channel, found.ending) == ("BraTS_001", 3, ".nii.gz")
    assert channel_file(Path("case_0001.nii")).channel == 1
    assert channel_file(Path("case_001.nii.gz")) is None and channel_file(Path("case_0001.png")) is None


def test_the_model_names_its_channels_in_its_metadata_or_none():
    assert model_channels(2, {"seglens.channel_names": '["T1", "T2"]'}).names == ("T1", "T2")
    for bad in ('["T1"]', '{"0": "T1"}', "not json", '["T1", "\\u0000"]', f'["{"x" * 65}", "T2"]'):
        assert model_channels(2, {"seglens.channel_names": bad}).names == ()
    assert model_channels(2, {}).label(1) == "channel 1" and MR.label(1) == "channel 1 (T2)"


def test_a_folder_of_two_cases_gives_one_input_per_case_named_case(tmp_path):
    a, b = _case(tmp_path / "in", "a", 1), _case(tmp_path / "in", "b", 10)
    inputs = group_cases(discover([tmp_path / "in"]), MR)
    assert [(item.path, item.rel, item.problem) for item in inputs] == [
        (tmp_path / "in" / "a", Path("a"), None), (tmp_path / "in" / "b", Path("b"), None)]
    volume = inputs[1].volume
    assert volume is not None and volume.key == "b"
    assert [(ch.volume.source, ch.name) for ch in volume.channels] == [(b[0], "T1"), (b[1], "T2")]
    image = _read(volume)
    assert image.shape == (2, 6, 10, 12) and image.dtype == np.float32
    np.testing.assert_array_equal(image[0], _native(_data(10)))
    np.testing.assert_array_equal(image[1], _native(_data(11)))
    assert a[0].exists()


def test_the_one_file_named_finds_its_other_channels_beside_it(tmp_path):
    first, _ = _case(tmp_path, "heldout_000", 3)
    (item,) = group_cases(discover([first]), MR)
    assert item.path == tmp_path / "heldout_000" and item.problem is None
    np.testing.assert_array_equal(_read(item.volume)[1], _native(_data(4)))
    case = case_volume(nifti_volume(first), MR)  # the viewer's way to the same case
    assert [ch.volume.source.name for ch in case.channels] == ["heldout_000_0000.nii.gz", "heldout_000_0001.nii.gz"]


def test_a_missing_channel_is_its_case_s_one_line_and_the_other_case_stays(tmp_path):
    _case(tmp_path / "in", "a", 1)
    _case(tmp_path / "in", "b", 5, channels=1)
    a, b = group_cases(discover([tmp_path / "in"]), MR)
    assert a.problem is None and a.volume is not None
    assert b.path == tmp_path / "in" / "b" and b.volume is None
    assert b.problem == "channel 1 (T2) missing: no file b_0001.nii.gz beside it"
    with pytest.raises(ImageError, match=r"in/b: channel 1 \(T2\) missing: no file b_0001.nii.gz beside it$"):
        case_volume(nifti_volume(tmp_path / "in" / "b_0000.nii.gz"), MR)


@pytest.mark.parametrize(("shape", "affine", "said"), [
    ((12, 10, 5), AFFINE, "its shape 5×10×12 differs from c_0000.nii.gz's 6×10×12"),
    (SHAPE, np.diag([0.8, 0.9, 2.5, 1.0]), "its voxel-to-mm affine differs from c_0000.nii.gz's (by up to 0.5 mm)"),
])
def test_a_channel_of_another_grid_is_one_line_naming_the_file_and_what_differs(tmp_path, shape, affine, said):
    _case(tmp_path / "in", "a", 1)
    _write(tmp_path / "in" / "c_0000.nii.gz", _data(7))
    _write(tmp_path / "in" / "c_0001.nii.gz", _data(8, shape), affine)
    a, c = group_cases(discover([tmp_path / "in"]), MR)
    assert a.problem is None
    assert c.problem == f"channel 1 (T2), c_0001.nii.gz: {said}; the channels of a case must share shape and geometry"


def test_an_affine_within_the_tolerance_is_the_same_geometry(tmp_path):
    _write(tmp_path / "d_0000.nii.gz", _data(1))
    _write(tmp_path / "d_0001.nii.gz", _data(2), AFFINE + np.diag([1e-5, 0, 0, 0]))
    (item,) = group_cases(discover([tmp_path]), MR)
    assert item.problem is None


def test_a_4d_nifti_s_volumes_are_the_channels_in_file_order(tmp_path):
    t1, t2 = _data(1), _data(2)
    four = _write(tmp_path / "mr.nii.gz", np.stack([t1, t2], axis=3))
    (item,) = group_cases(discover([four]), MR)
    volume = item.volume
    assert item.path == four and volume is not None and volume.time_points == 1 and volume.depth == 6
    assert [(ch.time, ch.name) for ch in volume.channels] == [(0, "T1"), (1, "T2")]
    image = _read(volume)
    np.testing.assert_array_equal(image, np.stack([_native(t1), _native(t2)]))
    three = _write(tmp_path / "three.nii.gz", np.stack([t1, t2, t1], axis=3))
    (refused,) = group_cases(discover([three]), MR)
    assert refused.volume is None and refused.problem.startswith("a 4D NIfTI of 3 volumes; the model takes 2 channels "
                                                                 "(T1, T2): name a case's files CASE_0000 … CASE_0001")


def test_files_not_named_as_channels_and_channels_past_the_model_s_are_one_line_each(tmp_path):
    _write(tmp_path / "brain.nii.gz", _data(1))
    _case(tmp_path, "e", 1, channels=3)
    inputs = group_cases(discover([tmp_path]), MR)
    problems = {item.path.name: item.problem for item in inputs}
    assert problems["brain.nii.gz"].startswith("not named as a case's channel; the model takes 2 channels (T1, T2)")
    assert problems["e"] is None
    assert problems["e_0002.nii.gz"].startswith("channel 2 of case e, past the model's: the model takes 2 channels")


def test_an_unreadable_channel_file_is_its_case_s_line(tmp_path):
    _write(tmp_path / "f_0000.nii.gz", _data(1))
    (tmp_path / "f_0001.nii.gz").write_bytes(b"not a nifti")
    inputs = group_cases(discover([tmp_path]), MR)
    assert [item.path.name for item in inputs] == ["f"]
    assert inputs[0].problem.startswith("channel 1 (T2), f_0001.nii.gz: ")


def test_a_channel_file_linked_from_outside_its_folder_is_refused(tmp_path):
    outside = _write(tmp_path / "elsewhere" / "secret.nii.gz", _data(2))
    first = _write(tmp_path / "in" / "g_0000.nii.gz", _data(1))
    (tmp_path / "in" / "g_0001.nii.gz").symlink_to(outside)
    with pytest.raises(ImageError, match=r"channel 1 \(T2\): .*g_0001.nii.gz"):
        case_volume(nifti_volume(first), MR)


def test_a_model_of_one_channel_keeps_its_inputs_as_they_are(tmp_path):
    _case(tmp_path, "h", 1)
    inputs = discover([tmp_path])
    assert group_cases(inputs, Channels(1)) == inputs
    assert case_volume(inputs[0].volume, Channels(1)) is inputs[0].volume
    image = InputFile(tmp_path / "x.png", Path("x.png"))
    assert group_cases([image], MR) == [image]  # a 2D image: the 3D run says what it needs


def test_a_case_over_the_volume_limit_is_refused_before_anything_is_allocated(tmp_path):
    _case(tmp_path, "i", 1)
    (item,) = group_cases(discover([tmp_path]), MR)
    VolumeStack(item.volume.channels[0].volume, max_pixels=200)  # one channel fits
    with pytest.raises(ImageError, match=r"i_0000.nii.gz: case too large \(2×6×10×12 float32"):
        CaseStack(item.volume, max_pixels=200)
