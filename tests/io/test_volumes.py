"""NIfTI volumes, the geometry helpers and read_slice's contract."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

import app.io.nifti as nifti
from app.errors import ImageError
from app.io.discover import discover
from app.io.geometry import dicom_affine, direction_letters
from app.io.images import read_slice
from tests.dicom_factory import write_nifti

NIBABEL_DATA = Path(nib.__file__).parent / "tests" / "data"


@pytest.mark.parametrize("name", ["anatomical.nii", "example4d.nii.gz", "standard.nii.gz"])
def test_nibabel_files_read_as_nibabel_reads_them(name):
    img = nib.load(NIBABEL_DATA / name)
    data = img.get_fdata()
    (item,) = discover([NIBABEL_DATA / name])
    volume = item.volume
    assert volume.kind == "nifti" and volume.ordered_by == "file" and item.path == NIBABEL_DATA / name
    assert (volume.columns, volume.rows) == img.shape[:2]
    np.testing.assert_array_equal(volume.affine, img.affine)
    k_count = img.shape[2]
    times = img.shape[3] if img.ndim == 4 else 1
    assert volume.time_points == times and volume.depth == k_count * times
    for s in sorted({0, volume.depth // 2, volume.depth - 1}):
        t, k = divmod(s, k_count)
        expected = data[:, :, k, t] if img.ndim == 4 else data[:, :, k]
        np.testing.assert_allclose(read_slice(volume, s).raw, expected.T.astype(np.float32), rtol=1e-6)


def test_a_factory_nifti_keeps_its_geometry_and_labels(tmp_path):
    data = write_nifti(tmp_path / "brain.nii.gz")
    (item,) = discover([tmp_path])
    volume = item.volume
    assert volume.key == "brain" and volume.label == "NIfTI · brain (5 slices)" and item.rel == Path("brain.nii.gz")
    assert (volume.rows, volume.columns) == (20, 24) and volume.spacing == pytest.approx((3.0, 1.1, 0.9))
    assert volume.orientation_labels() == {"left": "R", "right": "L", "top": "P", "bottom": "A"}
    assert [volume.slice_position_mm(k) for k in range(5)] == pytest.approx([5, 8, 11, 14, 17])
    image = read_slice(volume, 3)
    np.testing.assert_array_equal(image.raw, data[:, :, 3].T)
    assert image.pixels.dtype == np.uint8 and image.pixels.shape == (20, 24)
    assert image.info["Slice"] == "4 / 5" and image.info["Position"] == "14.0 mm"


def test_a_gzipped_nifti_is_decompressed_once_for_all_its_slices(tmp_path, monkeypatch):
    write_nifti(tmp_path / "v.nii.gz")
    (item,) = discover([tmp_path / "v.nii.gz"])
    loads = []
    real_load = nifti._load
    monkeypatch.setattr(nifti, "_load", lambda path, **kw: loads.append(path) or real_load(path, **kw))
    windows = {read_slice(item.volume, k).window for k in range(item.volume.depth)}
    assert len(loads) == 1 and len(windows) == 1  # one shared window, over the middle slice


def test_spatial_units_in_meters_become_millimetres(tmp_path):
    img = nib.Nifti1Image(np.zeros((4, 5, 3), np.float32), np.diag([0.001, 0.002, 0.003, 1]))
    img.header.set_xyzt_units("meter")
    nib.save(img, tmp_path / "m.nii")
    (item,) = discover([tmp_path / "m.nii"])
    assert item.volume.spacing == pytest.approx((3.0, 2.0, 1.0))


def test_a_4d_nifti_counts_its_time_points(tmp_path):
    data = np.arange(4 * 3 * 2 * 5, dtype=np.float32).reshape(4, 3, 2, 5)
    nib.save(nib.Nifti1Image(data, np.eye(4)), tmp_path / "fmri.nii")
    volume = discover([tmp_path / "fmri.nii"])[0].volume
    assert volume.label == "NIfTI · fmri (2 slices × 5 time points)" and volume.depth == 10
    image = read_slice(volume, 7)  # t = 3, k = 1
    np.testing.assert_array_equal(image.raw, data[:, :, 1, 3].T)
    assert image.info["Time point"] == "4 / 5"


def test_a_damaged_nifti_is_an_input_with_a_one_line_problem(tmp_path):
    (tmp_path / "broken.nii").write_bytes(b"not a nifti header at all" * 3)
    (item,) = discover([tmp_path])
    # the file is the row's own name (discover takes its path off the line); nibabel reads the gate's handle, so
    # its message no longer carries the path itself
    assert item.volume is None and item.rel.name == "broken.nii" and "\n" not in item.problem
    assert item.problem.startswith("damaged NIfTI header (")


def test_read_slice_errors_name_the_file(tmp_path):
    write_nifti(tmp_path / "big.nii")
    volume = discover([tmp_path / "big.nii"])[0].volume
    with pytest.raises(ImageError, match="big.nii: slice too large"):
        read_slice(volume, 0, max_pixels=100)
    (tmp_path / "big.nii").unlink()
    with pytest.raises(ImageError, match="big.nii: file not found"):
        read_slice(volume, 0)


def test_direction_letters_name_the_two_strongest_components():
    assert direction_letters([1, 0, 0]) == "L" and direction_letters([0, -1, 0]) == "A"
    assert direction_letters([0.2, 0.8, -0.5]) == "PI" and direction_letters([0, 0, 0]) == ""


def test_the_dicom_affine_converts_lps_to_ras():
    affine = dicom_affine((1, 0, 0, 0, 1, 0), (-10, -20, 30), step=2.5, pixel_spacing=(0.7, 0.8))
    np.testing.assert_allclose(affine, [[-0.8, 0, 0, 10], [0, -0.7, 0, 20], [0, 0, 2.5, 30], [0, 0, 0, 1]])
