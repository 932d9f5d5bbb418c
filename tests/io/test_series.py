"""DICOM series found by discover: grouping, ordering, splitting, gaps, geometry, non-image files, DICOMDIR."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pydicom
import pytest
from PIL import Image

from app.errors import ImageError
from app.io.discover import discover
from app.io.images import read_slice
from tests.dicom_factory import AXIAL, CORONAL, SAGITTAL, disc_slice, oblique, write_series

PYDICOM_FILES = Path(pydicom.__file__).parent / "data" / "test_files"  # local: get_testdata_files may download
LPS_TO_RAS = np.array([-1.0, -1.0, 1.0])


def volumes(folder: Path) -> list:
    return [item.volume for item in discover([folder]) if item.volume is not None]


def ipp(path: Path) -> np.ndarray:
    return np.asarray(pydicom.dcmread(path, stop_before_pixels=True).ImagePositionPatient, float)


def test_a_shuffled_series_without_extensions_is_one_volume_in_position_order(tmp_path):
    paths = write_series(tmp_path / "ct", suffix="", shuffle=True, name="IM")
    items = discover([tmp_path])
    assert len(items) == 1
    item, volume = items[0], items[0].volume
    assert volume.kind == "dicom" and volume.ordered_by == "position" and volume.depth == 6
    assert item.path == tmp_path / "ct" / volume.key and item.rel == Path("ct") / volume.key
    assert [s.path for s in volume.slices] == paths
    assert volume.spacing == pytest.approx((2.5, 0.7, 0.8)) and volume.voxel_ml == pytest.approx(2.5 * 0.56 / 1000)
    assert volume.label == "CT · CHEST · Axial 2.5 mm (6 slices)" and volume.warnings == ()
    assert volume.window == (40.0, 400.0) and volume.info["Slices"] == "6" and volume.series["Modality"] == "CT"
    for k in range(volume.depth):
        image = read_slice(volume, k)
        np.testing.assert_array_equal(image.raw, disc_slice(k, 32, 32))
        assert image.window == (40.0, 400.0) and image.info["Slice"] == f"{k + 1} / 6"
        assert image.info["Position"] == f"{30 + 2.5 * k:.1f} mm"
        assert volume.slice_position_mm(k) == pytest.approx(30 + 2.5 * k)


@pytest.mark.parametrize(("orientation", "labels"), [
    (AXIAL, {"left": "R", "right": "L", "top": "A", "bottom": "P"}),
    (CORONAL, {"left": "R", "right": "L", "top": "S", "bottom": "I"}),
    (SAGITTAL, {"left": "A", "right": "P", "top": "S", "bottom": "I"}),
    (oblique(20), {"left": "R", "right": "L", "top": "AI", "bottom": "PS"}),
])
def test_geometry_maps_voxels_to_the_files_positions(tmp_path, orientation, labels):
    paths = write_series(tmp_path, orientation=orientation, shuffle=True)
    (volume,) = volumes(tmp_path)
    assert volume.orientation_labels() == labels
    np.testing.assert_allclose(volume.affine @ [0, 0, 0, 1], [*(ipp(paths[0]) * LPS_TO_RAS), 1], atol=1e-6)
    row_cos, col_cos = np.asarray(orientation[:3]), np.asarray(orientation[3:])
    for k, path in enumerate(paths):
        expected = ipp(path) + 3 * 0.8 * row_cos + 5 * 0.7 * col_cos
        np.testing.assert_allclose((volume.affine @ [3, 5, k, 1])[:3], expected * LPS_TO_RAS, atol=1e-6)
        np.testing.assert_array_equal(read_slice(volume, k).raw, disc_slice(k, 32, 32))


def test_two_series_in_one_folder_are_two_volumes_beside_other_images(tmp_path):
    write_series(tmp_path, name="a", slices=3, description="first")
    write_series(tmp_path, name="b", slices=4, description="second")
    Image.new("L", (8, 8)).save(tmp_path / "photo.png")
    items = discover([tmp_path])
    labels = [item.volume.label if item.volume else item.rel.name for item in items]
    assert labels == ["CT · CHEST · first (3 slices)", "CT · CHEST · second (4 slices)", "photo.png"]


def test_a_missing_slice_is_a_gap_warning(tmp_path):
    write_series(tmp_path, gap_after=2)
    (volume,) = volumes(tmp_path)
    assert volume.warnings == ("gap between slices 3 and 4: 5.0 mm where the series steps 2.5 mm "
                               "(a slice may be missing)",)
    assert volume.spacing[0] == pytest.approx(2.5)


def test_slices_at_one_position_keep_the_first(tmp_path):
    write_series(tmp_path, name="a", slices=3, series_uid="1.2.3.4")
    write_series(tmp_path, name="b", slices=1, series_uid="1.2.3.4")
    (volume,) = volumes(tmp_path)
    assert volume.depth == 3 and [s.path.name for s in volume.slices] == ["a1.dcm", "a2.dcm", "a3.dcm"]
    assert volume.warnings == ("b1.dcm is at the same position as a1.dcm: skipped as a duplicate",)


@pytest.mark.parametrize("inconsistency", [
    {"orientations": [AXIAL] * 3 + [oblique(20)] * 3},
    {"sizes": [(32, 32)] * 3 + [(16, 24)] * 3},
])
def test_a_series_of_mixed_sizes_or_orientations_is_split(tmp_path, inconsistency):
    write_series(tmp_path, series_uid="1.2.3", **inconsistency)
    found = volumes(tmp_path)
    assert [v.depth for v in found] == [3, 3] and [v.key for v in found] == ["1.2.3", "1.2.3_2"]
    assert all(v.warnings == ("series 1.2.3 has slices of 2 sizes/orientations: split into 2 volumes",)
               for v in found)


def test_a_lone_slice_of_a_split_series_is_a_plain_image(tmp_path):
    write_series(tmp_path, slices=4, sizes=[(32, 32)] * 3 + [(16, 16)])
    items = discover([tmp_path])
    assert [item.volume.depth if item.volume else item.rel.name for item in items] == [3, "slice4.dcm"]


def test_without_positions_slices_follow_the_instance_numbers(tmp_path):
    write_series(tmp_path, positions=False, shuffle=True, suffix="")
    (volume,) = volumes(tmp_path)
    assert volume.ordered_by == "instance number" and [s.instance_number for s in volume.slices] == [1, 2, 3, 4, 5, 6]
    assert volume.warnings == ("ordered by InstanceNumber: the files carry no ImagePositionPatient",)
    assert volume.affine is None and volume.spacing is None and volume.orientation_labels() is None
    assert volume.slice_position_mm(0) is None and "Position" not in read_slice(volume, 0).info


def test_names_in_labels_and_warnings_never_hold_the_patient(tmp_path):
    write_series(tmp_path, gap_after=1, patient=("Secret^Name", "PID-SECRET"))
    (volume,) = volumes(tmp_path)
    text = volume.label + " ".join(volume.warnings)
    assert "Secret" not in text and "PID-SECRET" not in text
    assert volume.info["Patient"] == "Secret^Name"  # the info panel may show it


def test_non_image_dicom_files_in_a_folder_are_not_listed(tmp_path):
    write_series(tmp_path / "ct", slices=3)
    shutil.copy(PYDICOM_FILES / "test-SR.dcm", tmp_path / "report.dcm")
    shutil.copy(PYDICOM_FILES / "rtstruct.dcm", tmp_path / "structures")
    shutil.copy(PYDICOM_FILES / "dicomdirtests" / "DICOMDIR", tmp_path / "DICOMDIR")
    seg = pydicom.dcmread(PYDICOM_FILES / "CT_small.dcm")
    seg.SOPClassUID = seg.file_meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.66.4"
    seg.save_as(tmp_path / "seg.dcm")
    items = discover([tmp_path])
    assert len(items) == 1 and items[0].volume.depth == 3
    named = discover([tmp_path / "report.dcm", tmp_path / "seg.dcm"])  # named explicitly: they get error rows
    assert [item.rel.name for item in named] == ["report.dcm", "seg.dcm"] and named[0].volume is None


def test_single_files_named_explicitly_stay_images_and_one_series_named_together_is_a_volume(tmp_path):
    paths = write_series(tmp_path, slices=4)
    (single,) = discover([PYDICOM_FILES / "CT_small.dcm"])
    assert single.volume is None and single.rel == Path("CT_small.dcm")
    (together,) = discover([str(p) for p in reversed(paths)])
    assert together.volume.depth == 4 and [s.path for s in together.volume.slices] == paths
    assert together.rel == Path(together.volume.key)


def test_the_dicomdir_of_pydicom_expands_named_and_its_folder_gives_the_same_series(tmp_path):
    folder = shutil.copytree(PYDICOM_FILES / "dicomdirtests", tmp_path / "dirtests")
    named = discover([folder / "DICOMDIR"])
    walked = discover([folder])
    series = sorted(item.volume.key for item in named if item.volume)
    assert len(series) == 2 and series == sorted(item.volume.key for item in walked if item.volume)
    assert not any(item.rel.name.startswith("DICOMDIR") for item in walked)
    ct = next(item.volume for item in walked if item.volume and item.volume.depth == 5)
    assert ct.orientation_labels() == {"left": "R", "right": "L", "top": "A", "bottom": "P"}
    assert read_slice(ct, 2).raw.shape == (ct.rows, ct.columns)


def test_a_multiframe_file_is_a_volume_ordered_by_its_frame_positions(tmp_path):
    path = write_multiframe(tmp_path / "enhanced.dcm", frames=4)
    (item,) = discover([path])
    volume = item.volume
    assert volume.kind == "dicom-multiframe" and item.path == path and volume.depth == 4
    assert [s.frame for s in volume.slices] == [3, 2, 1, 0]  # written top to bottom
    assert volume.spacing == pytest.approx((2.0, 0.5, 0.6))
    np.testing.assert_allclose(volume.affine @ [0, 0, 0, 1], [10, 20, 0, 1])
    assert read_slice(volume, 0).raw[0, 0] == pytest.approx(3)
    (rtdose,) = discover([PYDICOM_FILES / "rtdose.dcm"])
    assert rtdose.volume.kind == "dicom-multiframe" and rtdose.volume.affine is None


def test_a_slice_deleted_after_listing_is_a_one_line_error_naming_it(tmp_path):
    paths = write_series(tmp_path, slices=4)
    (volume,) = volumes(tmp_path)
    paths[2].unlink()
    with pytest.raises(ImageError) as err:
        read_slice(volume, 2)
    assert str(paths[2]) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ImageError, match="slice 9 does not exist"):
        read_slice(volume, 8)


def write_multiframe(path: Path, *, frames: int) -> Path:
    """An enhanced-style multi-frame file: frame f holds the value f, written from the top slice down."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.sequence import Sequence
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID = "1.2.840.10008.5.1.4.1.1.2.1"  # enhanced CT
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID = generate_uid()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.Modality = generate_uid(), generate_uid(), "CT"
    ds.Rows, ds.Columns, ds.NumberOfFrames = 8, 10, frames
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
    orientation, measures = Dataset(), Dataset()
    orientation.ImageOrientationPatient = list(AXIAL)
    measures.PixelSpacing, measures.SliceThickness = [0.5, 0.6], 2.0
    shared = Dataset()
    shared.PlaneOrientationSequence, shared.PixelMeasuresSequence = Sequence([orientation]), Sequence([measures])
    ds.SharedFunctionalGroupsSequence = Sequence([shared])
    per_frame = []
    for f in range(frames):
        plane, item = Dataset(), Dataset()
        plane.ImagePositionPatient = [-10.0, -20.0, 2.0 * (frames - 1 - f)]
        item.PlanePositionSequence = Sequence([plane])
        per_frame.append(item)
    ds.PerFrameFunctionalGroupsSequence = Sequence(per_frame)
    ds.PixelData = np.stack([np.full((8, 10), f, np.uint16) for f in range(frames)]).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def test_listing_a_folder_of_photos_imports_no_numpy_nor_pydicom(tmp_path):
    import subprocess
    import sys

    Image.new("L", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "notes").write_text("no DICOM here")
    code = ("import sys; from app.io.discover import discover; items = discover([sys.argv[1]]); "
            "print(len(items), any(m in sys.modules for m in ('numpy', 'pydicom', 'nibabel')))")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["1", "False"]


def _point_records_at(dicomdir: Path, targets: list) -> None:
    """Rewrite the IMAGE records of `dicomdir` to reference `targets` (ReferencedFileID components), in turn."""
    ds = pydicom.dcmread(dicomdir)
    images = [r for r in ds.DirectoryRecordSequence if r.DirectoryRecordType == "IMAGE"]
    for record, target in zip(images, targets, strict=False):  # the rest stay in the folder
        record.ReferencedFileID = target
    ds.save_as(dicomdir)


@pytest.mark.parametrize("escape", ["dotdot", "absolute", "symlink"])
def test_a_dicomdir_never_leads_out_of_its_folder(tmp_path, escape):
    other = write_series(tmp_path / "other_patient", slices=3, patient=("Other^Patient", "PID-OTHER"))
    folder = shutil.copytree(PYDICOM_FILES / "dicomdirtests", tmp_path / "dirtests")
    if escape == "symlink":  # a link inside the folder to a file outside it
        (folder / "link").symlink_to(other[0].parent, target_is_directory=True)
        targets = [["link", p.name] for p in other]
    elif escape == "absolute":
        targets = [[str(p)] for p in other]
    else:
        targets = [["..", "other_patient", p.name] for p in other]
    _point_records_at(folder / "DICOMDIR", targets)
    items = discover([folder / "DICOMDIR"])
    read = {s.path.resolve() for item in items if item.volume for s in item.volume.slices}
    assert read and not read & {p.resolve() for p in other}  # another patient's series is never run
    assert all(p.resolve().is_relative_to(folder.resolve()) for p in read)
    (refused,) = [item for item in items if item.problem]
    assert refused.path == folder / "DICOMDIR" and refused.volume is None
    assert refused.problem == ("references files outside its folder (a '..', absolute or linked path): "
                               f"{len(targets)} not read")
    assert "other_patient" not in refused.problem and "\n" not in refused.problem
