"""Degenerate geometry is refused where the headers are decoded (app.io.series, app.io.volumes): a PixelSpacing of
0, a position of 1e306 or NaN, an orientation of zero vectors, a NIfTI 1e30 mm away — one line naming the file and
the tag, and the volume read without geometry, so no mL (0 mL or a 300-digit cell before) is ever computed from it.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pydicom
import pytest

from app.cli import main
from app.io.discover import discover
from app.io.nifti import nifti_volume
from tests.dicom_factory import write_series

NO_GEOMETRY = "the volume is read without geometry (no spacing, so no mL)"


def volume_of(folder: Path):
    (volume,) = [item.volume for item in discover([folder]) if item.volume is not None]
    return volume


def set_tag(path: Path, keyword: str, value) -> None:
    ds = pydicom.dcmread(path)
    setattr(ds, keyword, value)
    ds.save_as(path)


def test_a_pixel_spacing_of_zero_is_refused_by_name_and_gives_no_ml(tmp_path: Path) -> None:
    write_series(tmp_path, pixel_spacing=(0.0, 0.8))
    volume = volume_of(tmp_path)
    assert volume.spacing is None and volume.affine is None and volume.voxel_ml is None
    assert volume.millilitres(np.array([10, 5])) is None
    assert volume.warnings == (f"slice1.dcm: PixelSpacing (0, 0.8) is not a size from 1e-06 to 1000 mm; {NO_GEOMETRY}",)


@pytest.mark.parametrize(("position", "says"), [
    ([-10.0, -20.0, 1e306], "(-10, -20, 1e+306) lies over 100 m from the origin"),
    ([float("nan"), -20.0, 37.5], "(nan, -20, 37.5) is not three finite numbers"),
])
def test_one_slices_absurd_position_is_refused_naming_its_file(tmp_path: Path, position: list, says: str) -> None:
    paths = write_series(tmp_path)
    set_tag(paths[3], "ImagePositionPatient", position)
    volume = volume_of(tmp_path)
    assert volume.ordered_by == "instance number" and volume.depth == 6
    assert volume.spacing is None and volume.affine is None and volume.slice_position_mm(3) is None
    assert volume.warnings == (f"slice4.dcm: ImagePositionPatient {says}; {NO_GEOMETRY}",
                               "ordered by InstanceNumber: their positions cannot be used")


def test_every_slice_beyond_reach_is_one_line_and_a_count(tmp_path: Path) -> None:
    """1e306 + 2.5 k is 1e306 for every k: before, five slices were dropped as duplicates and the one left had a
    made-up step of 1 mm."""
    write_series(tmp_path, origin=(0.0, 0.0, 1e306))
    volume = volume_of(tmp_path)
    assert volume.depth == 6 and volume.spacing is None
    assert volume.warnings[0] == (f"slice1.dcm: ImagePositionPatient (0, 0, 1e+306) lies over 100 m from the origin; "
                                  f"{NO_GEOMETRY} (and 5 more files)")


def test_an_orientation_of_zero_vectors_is_refused(tmp_path: Path) -> None:
    paths = write_series(tmp_path, slices=3)
    for path in paths:
        set_tag(path, "ImageOrientationPatient", [0.0] * 6)
    volume = volume_of(tmp_path)
    assert volume.depth == 3 and volume.spacing is None and volume.affine is None
    assert volume.warnings[0] == (f"slice1.dcm: ImageOrientationPatient (0, 0, 0, 0, 0, 0) is not two unit vectors; "
                                  f"{NO_GEOMETRY} (and 2 more files)")


def test_slices_20_m_apart_are_no_voxel_size(tmp_path: Path) -> None:
    """Positions each within reach, but a step of 20 m: the volume's own check (app.io.volumes) refuses it."""
    write_series(tmp_path, slices=3, spacing=20_000.0)
    volume = volume_of(tmp_path)
    assert volume.spacing is None and volume.voxel_ml is None
    assert volume.warnings == (f"{tmp_path.name}: the slice positions: the voxel size (20000, 0.7, 0.8) mm is not a "
                               f"size from 1e-06 to 1000 mm; {NO_GEOMETRY}",)


def test_a_nifti_placed_1e30_mm_away_gives_no_ml(tmp_path: Path) -> None:
    import nibabel as nib

    path = tmp_path / "far.nii.gz"
    affine = np.diag([0.9, 1.1, 3.0, 1.0])
    affine[2, 3] = 1e30  # a float32 header's sform holds it; 1e306 would be inf
    nib.save(nib.Nifti1Image(np.ones((8, 6, 3), np.int16), affine), str(path))
    volume = nifti_volume(path)
    assert volume.spacing is None and volume.affine is None and volume.voxel_ml is None
    assert volume.warnings == ("far.nii.gz: pixdim / the affine: the voxel-to-mm affine places voxel 0 over 100 m "
                               f"from the origin; {NO_GEOMETRY}",)



@pytest.mark.parametrize("name", ["zero.nii", "zero.nii.gz"])
def test_a_nifti_pixdim_of_zero_is_not_mended_to_1_mm(tmp_path: Path, name: str) -> None:
    """nibabel's loader mends a pixdim of 0 to 1 ("setting 0 dims to 1"): the volume had invented 1 mm voxels and
    so invented mL. The stored header is read unmended, and the volume has no geometry."""
    import gzip
    import struct

    import nibabel as nib

    plain = tmp_path / "plain.nii"
    image = nib.Nifti1Image(np.ones((8, 6, 3), np.int16), np.eye(4))
    image.header.set_qform(None, code=0)
    image.header.set_sform(None, code=0)
    nib.save(image, str(plain))
    data = bytearray(plain.read_bytes())
    data[76:108] = struct.pack("<8f", 1, 0, 0, 0, 1, 1, 1, 1)  # pixdim: no voxel size stored
    path = tmp_path / name
    path.write_bytes(gzip.compress(bytes(data)) if name.endswith(".gz") else bytes(data))
    volume = nifti_volume(path)
    assert volume.spacing is None and volume.affine is None and volume.voxel_ml is None
    assert volume.warnings == (f"{name}: pixdim / the affine: the voxel size (0, 0, 0) mm is not a size from 1e-06 "
                               f"to 1000 mm; {NO_GEOMETRY}",)


def test_the_report_has_no_ml_from_a_spacing_of_zero(ct_model, tmp_path: Path, capsys) -> None:
    write_series(tmp_path / "in" / "ct", pixel_spacing=(0.0, 0.8))
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out)]) == 0
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        (row,) = [r for r in csv.DictReader(handle) if r["slices"]]
    assert row["status"] == "ok" and int(row["pixels_disc"]) > 0 and row["ml_disc"] == ""
    assert f"PixelSpacing (0, 0.8) is not a size from 1e-06 to 1000 mm; {NO_GEOMETRY}" in capsys.readouterr().err
