from __future__ import annotations

from pathlib import Path

import dicom_factory
import numpy as np
import pytest

from app.errors import OutputError
from app.inference.model.spec import ClassInfo
from app.io.render import PALETTE
from app.io.volumes import SliceRef, Volume
from app.runs.exports import secondary_capture
from app.runs.exports.formats import (
    Algorithm,
    Segment,
    nifti_data,
    segments_of,
    write_dicom_seg,
    write_nifti_labels,
    write_secondary_capture,
)

ALGORITHM = Algorithm(name="liver-net", version="0123456789abcdef", sha256="0123456789abcdef" * 4,
                      software_version="1.2.3")
SEGMENTS = (Segment(1, "liver", (255, 0, 0)), Segment(2, "lesion", (0, 255, 0)), Segment(3, "unused", (0, 0, 255)))


def dicom_volume(folder: Path, **series) -> Volume:
    """The Volume the reader would build for a factory series (its paths come back in slice order)."""
    import pydicom

    paths = dicom_factory.write_series(folder, **series)
    headers = [pydicom.dcmread(p, stop_before_pixels=True) for p in paths]
    first = headers[0]
    orientation = np.asarray(first.ImageOrientationPatient, float)
    row_spacing, column_spacing = (float(v) for v in first.PixelSpacing)
    normal = np.cross(orientation[:3], orientation[3:])
    positions = [np.asarray(h.ImagePositionPatient, float) for h in headers]
    step = float((positions[1] - positions[0]) @ normal)
    lps = np.eye(4)
    lps[:3, 0], lps[:3, 1] = orientation[:3] * column_spacing, orientation[3:] * row_spacing
    lps[:3, 2], lps[:3, 3] = normal * step, positions[0]
    affine = np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps
    slices = tuple(SliceRef(p, 0, tuple(pos), h.SOPInstanceUID, int(h.InstanceNumber))
                   for p, pos, h in zip(paths, positions, headers, strict=True))
    return Volume(kind="dicom", source=folder, key=first.SeriesInstanceUID, label="CT", slices=slices,
                  rows=int(first.Rows), columns=int(first.Columns), spacing=(step, row_spacing, column_spacing),
                  affine=affine, window=(40.0, 400.0),
                  series={"StudyInstanceUID": first.StudyInstanceUID, "SeriesInstanceUID": first.SeriesInstanceUID,
                          "FrameOfReferenceUID": first.FrameOfReferenceUID})


def known_labels(depth: int = 6, rows: int = 32, columns: int = 32) -> np.ndarray:
    """Class 1 and 2 in known places: slice 2 has class 2 only, slice 3 is empty."""
    labels = np.zeros((depth, rows, columns), np.uint8)
    for k in range(depth):
        if k in (0, 1, 4, 5):
            labels[k, 10 + k:16 + k, 8:14] = 1
        if k in (1, 2, 5):
            labels[k, 20:26, 18 + k:24 + k] = 2
    return labels


def windowed(k: int, rows: int = 32, columns: int = 32) -> np.ndarray:
    hu = dicom_factory.disc_slice(k, rows, columns)
    return np.clip((hu - (40 - 200)) / 400 * 255, 0, 255).astype(np.uint8)


@pytest.fixture(params=["axial", "oblique"])
def volume(request, tmp_path: Path) -> Volume:
    orientation = dicom_factory.AXIAL if request.param == "axial" else dicom_factory.oblique(20.0)
    return dicom_volume(tmp_path / "series", shuffle=True, orientation=orientation)


# --- segments -----------------------------------------------------------------------------------------------------

def test_segments_of_skips_background_and_uses_the_viewers_colours():
    classes = (ClassInfo("background", None), ClassInfo("liver", (10, 20, 30)), ClassInfo("lesion", None))
    assert segments_of(classes) == (Segment(1, "liver", (10, 20, 30)), Segment(2, "lesion", PALETTE[1]))


# --- DICOM SEG ----------------------------------------------------------------------------------------------------

def test_seg_frames_reference_the_right_source_slice_and_decode_exactly(volume: Volume, tmp_path: Path):
    import highdicom as hd
    import pydicom

    labels = known_labels()
    out = write_dicom_seg(volume, labels, SEGMENTS, tmp_path / "out" / "seg.dcm", algorithm=ALGORITHM)
    assert out == tmp_path / "out" / "seg.dcm"
    plain = pydicom.dcmread(out)
    by_uid = {ref.sop_instance_uid: k for k, ref in enumerate(volume.slices)}
    numbers = [1, 2, 3]
    for frame, group in enumerate(plain.PerFrameFunctionalGroupsSequence):
        derivation = group.DerivationImageSequence[0].SourceImageSequence[0]
        k = by_uid[derivation.ReferencedSOPInstanceUID]
        segment = int(group.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
        np.testing.assert_array_equal(plain.pixel_array[frame] if plain.NumberOfFrames > 1 else plain.pixel_array,
                                      labels[k] == segment)
    seg = hd.seg.segread(out)
    uids = [ref.sop_instance_uid for ref in volume.slices]
    pixels = seg.get_pixels_by_source_instance(source_sop_instance_uids=uids, segment_numbers=numbers)
    for index, value in enumerate(numbers):
        np.testing.assert_array_equal(pixels[..., index].astype(bool), labels == value)


def test_seg_identity_segments_and_algorithm(volume: Volume, tmp_path: Path):
    import highdicom as hd
    import pydicom

    out = write_dicom_seg(volume, known_labels(), SEGMENTS, tmp_path / "seg.dcm", algorithm=ALGORITHM)
    ds = pydicom.dcmread(out)
    assert ds.SegmentationType == "BINARY"
    assert ds.FrameOfReferenceUID == volume.series["FrameOfReferenceUID"]
    assert ds.StudyInstanceUID == volume.series["StudyInstanceUID"]
    assert ds.SeriesInstanceUID != volume.series["SeriesInstanceUID"]
    assert ds.ReferencedSeriesSequence[0].SeriesInstanceUID == volume.series["SeriesInstanceUID"]
    assert {i.ReferencedSOPInstanceUID for i in ds.ReferencedSeriesSequence[0].ReferencedInstanceSequence} == {
        ref.sop_instance_uid for ref in volume.slices}
    assert [s.SegmentLabel for s in ds.SegmentSequence] == ["liver", "lesion", "unused"]  # empty one too
    assert [s.SegmentNumber for s in ds.SegmentSequence] == [1, 2, 3]
    algorithm = ds.SegmentSequence[0].SegmentationAlgorithmIdentificationSequence[0]
    assert (algorithm.AlgorithmName, algorithm.AlgorithmVersion) == ("liver-net", "0123456789abcdef")
    assert ds.SegmentSequence[0].SegmentAlgorithmType == "AUTOMATIC"
    red = hd.color.CIELabColor.from_dicom_value(ds.SegmentSequence[0].RecommendedDisplayCIELabValue)
    assert red.lab == pytest.approx((53.24, 80.09, 67.20), abs=0.1)  # sRGB red in CIELab (D65)
    assert red.to_rgb() == (255, 0, 0)
    assert ds.Manufacturer == "SegLens" and ds.SoftwareVersions == "1.2.3"
    assert "Doe" in str(ds.PatientName)  # the SEG belongs to the source's patient and study


def test_seg_of_an_all_empty_volume_still_reads_back(tmp_path: Path):
    import highdicom as hd

    volume = dicom_volume(tmp_path / "series", slices=3)
    labels = np.zeros((3, 32, 32), np.uint8)
    out = write_dicom_seg(volume, labels, SEGMENTS[:2], tmp_path / "seg.dcm", algorithm=ALGORITHM)
    seg = hd.seg.segread(out)
    pixels = seg.get_pixels_by_source_instance(
        source_sop_instance_uids=[r.sop_instance_uid for r in volume.slices], segment_numbers=[1, 2])
    assert pixels.shape == (3, 32, 32, 2) and not pixels.any()


def test_dicom_exports_refuse_a_nifti_volume(tmp_path: Path):
    volume = nifti_volume(tmp_path / "scan.nii.gz")
    labels = np.zeros((volume.depth, volume.rows, volume.columns), np.uint8)
    with pytest.raises(OutputError, match=r"DICOM SEG needs a DICOM source \(.*scan.nii.gz is NIfTI\)"):
        write_dicom_seg(volume, labels, SEGMENTS, tmp_path / "seg.dcm", algorithm=ALGORITHM)
    with pytest.raises(OutputError, match=r"Secondary Capture needs a DICOM source \(.*scan.nii.gz is NIfTI\)"):
        write_secondary_capture(volume, labels, SEGMENTS, tmp_path / "sc", display=lambda k: labels[k],
                                opacity=0.5, algorithm=ALGORITHM)
    assert not (tmp_path / "seg.dcm").exists() and not (tmp_path / "sc").exists()


# --- NIfTI --------------------------------------------------------------------------------------------------------

def nifti_volume(path: Path, *, time_points: int = 1, shape=(24, 20, 5)) -> Volume:
    import nibabel as nib

    if time_points == 1:
        dicom_factory.write_nifti(path, shape=shape)
    else:
        affine = np.array([[0, -1.2, 0, 4.0], [0.9, 0, 0, -3.0], [0, 0, 2.5, 7.0], [0, 0, 0, 1]])
        image = nib.Nifti1Image(np.zeros((*shape, time_points), np.float32), affine)
        image.header.set_xyzt_units("mm", "sec")
        image.header.set_zooms((1.2, 0.9, 2.5, 1.5))
        nib.save(image, str(path))
    image = nib.load(str(path))
    columns, rows, depth = image.shape[:3]
    slices = tuple(SliceRef(path, k) for k in range(depth * time_points))
    return Volume(kind="nifti", source=path, key=path.name.split(".")[0], label="NIfTI", slices=slices, rows=rows,
                  columns=columns, spacing=(1.0, 1.0, 1.0), affine=image.affine, time_points=time_points)


@pytest.mark.parametrize("name", ["scan.nii.gz", "scan.nii"])
def test_nifti_labels_keep_the_sources_affine_and_shape(tmp_path: Path, name: str):
    import nibabel as nib

    volume = nifti_volume(tmp_path / name)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, (volume.depth, volume.rows, volume.columns)).astype(np.uint8)
    out = write_nifti_labels(volume, labels, tmp_path / "out" / f"labels{name[4:]}")
    source, written = nib.load(str(volume.source)), nib.load(str(out))
    assert np.array_equal(written.affine, source.affine)
    assert written.shape == source.shape and written.get_data_dtype() == np.uint8
    data = np.asarray(written.dataobj)
    assert data.dtype == np.uint8
    np.testing.assert_array_equal(data.transpose(2, 1, 0), labels)
    assert written.header["sform_code"] == source.header["sform_code"]
    assert written.header["qform_code"] == source.header["qform_code"]


def test_nifti_labels_of_a_4d_source_keep_the_time_axis(tmp_path: Path):
    import nibabel as nib

    volume = nifti_volume(tmp_path / "bold.nii.gz", time_points=3, shape=(6, 5, 4))
    labels = np.arange(volume.depth * volume.rows * volume.columns, dtype=np.int64).reshape(12, 5, 6)
    labels = (labels % 7).astype(np.uint8)
    written = nib.load(str(write_nifti_labels(volume, labels, tmp_path / "labels.nii.gz")))
    source = nib.load(str(volume.source))
    assert written.shape == source.shape == (6, 5, 4, 3)
    assert np.array_equal(written.affine, source.affine)
    assert written.header.get_zooms() == source.header.get_zooms()
    data = np.asarray(written.dataobj)
    for t in range(3):
        for k in range(4):
            np.testing.assert_array_equal(data[:, :, k, t].T, labels[t * 4 + k])
    np.testing.assert_array_equal(nifti_data(labels, time_points=3), data)


def test_nifti_labels_of_a_dicom_volume_carry_its_geometry(volume: Volume, tmp_path: Path):
    import nibabel as nib

    labels = known_labels()
    written = nib.load(str(write_nifti_labels(volume, labels, tmp_path / "labels.nii.gz")))
    assert written.shape == (32, 32, 6)
    np.testing.assert_allclose(written.affine, volume.affine, atol=1e-5)
    assert written.header["sform_code"] == 1 and written.header["qform_code"] == 1
    x, y, z = volume.slices[0].position
    np.testing.assert_allclose((written.affine @ [0, 0, 0, 1])[:3], (-x, -y, z), atol=1e-4)
    np.testing.assert_array_equal(np.asarray(written.dataobj).transpose(2, 1, 0), labels)


def test_nifti_refuses_a_volume_without_geometry(tmp_path: Path):
    volume = Volume(kind="dicom", source=tmp_path / "series", key="1.2", label="CT", slices=(SliceRef(tmp_path),),
                    rows=4, columns=4, spacing=None, affine=None)
    with pytest.raises(OutputError, match="series: no geometry"):
        write_nifti_labels(volume, np.zeros((1, 4, 4), np.uint8), tmp_path / "labels.nii.gz")


# --- Secondary Capture --------------------------------------------------------------------------------------------

def test_secondary_capture_series(volume: Volume, tmp_path: Path):
    import pydicom

    labels = known_labels()
    out_dir = tmp_path / "exports" / "sc"
    paths = write_secondary_capture(volume, labels, SEGMENTS, out_dir, display=windowed, opacity=0.5,
                                    algorithm=ALGORITHM)
    assert paths == [out_dir / f"sc_{k:04d}.dcm" for k in range(1, 7)]
    assert sorted(out_dir.iterdir()) == paths
    series_uids = set()
    for k, path in enumerate(paths):
        ds = pydicom.dcmread(path)
        assert ds.PhotometricInterpretation == "RGB" and ds.SamplesPerPixel == 3
        assert ds.SourceImageSequence[0].ReferencedSOPInstanceUID == volume.slices[k].sop_instance_uid
        assert ds.StudyInstanceUID == volume.series["StudyInstanceUID"]
        assert ds.BurnedInAnnotation == "YES" and int(ds.InstanceNumber) == k + 1
        series_uids.add(ds.SeriesInstanceUID)
        rgb, gray = ds.pixel_array, windowed(k)
        strip = secondary_capture.banner_height(32, secondary_capture.banner_text(ALGORITHM))
        assert rgb.shape == (32 + strip, 32, 3)  # the banner is a margin above the image, covering none of it
        rgb = rgb[strip:]
        outside = labels[k] == 0
        np.testing.assert_array_equal(rgb[outside], np.stack([gray[outside]] * 3, axis=-1))
        for value, color, slices in ((1, (255, 0, 0), (0, 1, 4, 5)), (2, (0, 255, 0), (1, 2, 5))):  # known_labels
            inside = labels[k] == value
            assert inside.sum() == (36 if k in slices else 0)
            blended = 0.5 * gray[inside][:, None] + 0.5 * np.array(color)  # the class colour at opacity 0.5
            assert np.abs(rgb[inside] - blended).max(initial=0) <= 0.5  # rounded either way at .5
    assert len(series_uids) == 1 and volume.series["SeriesInstanceUID"] not in series_uids


def test_secondary_capture_failure_leaves_nothing(volume: Volume, tmp_path: Path, monkeypatch):
    real, calls = secondary_capture._sc_image, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(secondary_capture, "_sc_image", failing)
    out_dir = tmp_path / "exports" / "sc"
    with pytest.raises(OutputError, match="sc: cannot write the Secondary Capture series"):
        write_secondary_capture(volume, known_labels(), SEGMENTS, out_dir, display=windowed, opacity=0.5,
                                algorithm=ALGORITHM)
    assert list((tmp_path / "exports").iterdir()) == []


def test_secondary_capture_replaces_an_earlier_export_or_keeps_it_on_failure(tmp_path: Path, monkeypatch):
    volume = dicom_volume(tmp_path / "series", slices=3)
    labels = known_labels(depth=3)
    out_dir = tmp_path / "exports" / "sc"
    out_dir.mkdir(parents=True)
    (out_dir / "sc_0009.dcm").write_bytes(b"old")
    paths = write_secondary_capture(volume, labels, SEGMENTS, out_dir, display=windowed, opacity=0.4,
                                    algorithm=ALGORITHM)
    assert sorted(out_dir.iterdir()) == paths and len(paths) == 3
    assert [p.name for p in (tmp_path / "exports").iterdir()] == ["sc"]

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(secondary_capture, "_sc_image", broken)
    with pytest.raises(RuntimeError):
        write_secondary_capture(volume, labels, SEGMENTS, out_dir, display=windowed, opacity=0.4,
                                algorithm=ALGORITHM)
    assert sorted(out_dir.iterdir()) == paths
    assert [p.name for p in (tmp_path / "exports").iterdir()] == ["sc"]


def test_patient_orientation_letters():
    assert secondary_capture.patient_orientation(dicom_factory.AXIAL) == ("L", "P")
    assert secondary_capture.patient_orientation(dicom_factory.CORONAL) == ("L", "F")
    assert secondary_capture.patient_orientation(dicom_factory.oblique(30.0)) == ("L", "P")
    assert secondary_capture.patient_orientation(dicom_factory.oblique(60.0)) == ("L", "H")
    assert secondary_capture.patient_orientation(None) == ("L", "P")


def test_importing_the_exports_loads_no_dicom_or_nifti_library():
    import subprocess
    import sys

    code = ("import sys, app.runs.exports.formats; "
            "print([m for m in ('highdicom', 'pydicom', 'nibabel') if m in sys.modules])")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


# --- multi-frame source -------------------------------------------------------------------------------------------

def multiframe_volume(tmp_path: Path) -> Volume:
    """One enhanced CT file whose frames are stored top-down (reversed): slice k is frame 3 - k."""
    import highdicom as hd
    import pydicom

    single = dicom_volume(tmp_path / "single", slices=4)
    legacy = [pydicom.dcmread(ref.path) for ref in single.slices][::-1]
    path = tmp_path / "enhanced.dcm"
    hd.legacy.LegacyConvertedEnhancedCTImage(legacy_datasets=legacy, series_instance_uid=hd.UID(), series_number=4,
                                             sop_instance_uid=hd.UID(), instance_number=1).save_as(path)
    uid = pydicom.dcmread(path, stop_before_pixels=True).SOPInstanceUID
    slices = tuple(SliceRef(path, 3 - k, ref.position, uid) for k, ref in enumerate(single.slices))
    return Volume(kind="dicom-multiframe", source=path, key="mf", label="CT", slices=slices, rows=32, columns=32,
                  spacing=single.spacing, affine=single.affine, ordered_by="file")


def test_seg_of_a_multiframe_source_references_its_frames(tmp_path: Path):
    import highdicom as hd

    volume = multiframe_volume(tmp_path)
    labels = known_labels(depth=4)
    out = write_dicom_seg(volume, labels, SEGMENTS[:2], tmp_path / "seg.dcm", algorithm=ALGORITHM)
    seg = hd.seg.segread(out)
    uid = volume.slices[0].sop_instance_uid
    for k, ref in enumerate(volume.slices):
        pixels = seg.get_pixels_by_source_frame(source_sop_instance_uid=uid, source_frame_numbers=[ref.frame + 1],
                                                segment_numbers=[1, 2])
        for index, value in enumerate((1, 2)):
            np.testing.assert_array_equal(pixels[0, ..., index].astype(bool), labels[k] == value)


def test_secondary_capture_of_a_multiframe_source_names_the_frame(tmp_path: Path):
    import pydicom

    volume = multiframe_volume(tmp_path)
    paths = write_secondary_capture(volume, known_labels(depth=4), SEGMENTS, tmp_path / "sc", display=windowed,
                                    opacity=0.5, algorithm=ALGORITHM)
    for ref, path in zip(volume.slices, paths, strict=True):
        source = pydicom.dcmread(path).SourceImageSequence[0]
        assert (source.ReferencedSOPInstanceUID, source.ReferencedFrameNumber) == (ref.sop_instance_uid, ref.frame + 1)
