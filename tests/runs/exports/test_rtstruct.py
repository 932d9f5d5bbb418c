"""`--export rtstruct`: the RT Structure Set SegLens writes for a DICOM series, checked by an outside validator
(dciodvfy), read back by a second reader (dicompyler-core: its structure parser and its DVH rasteriser, which
tests pixel centres against each contour and combines a slice's contours by XOR, as planning systems read holes),
its references to the source, and --anonymize end to end through the CLI and the last privacy check.

The reader is test-only (.ci/run installs it, pinned): without it the read-back tests skip here and FAIL in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import dciodvfy
import numpy as np
import pytest

from app.errors import OutputError
from app.io.series import scan_dicom
from app.io.volumes import Volume
from app.runs.exports.rtstruct import UPSAMPLE, build_rtstruct, slice_outlines, write_rtstruct
from app.runs.folder.volumes import export_paths, export_problem
from app.runs.outputs.segments import Algorithm, Segment
from tests import dicom_factory

ALGORITHM = Algorithm(name="organ-net", version="0123456789abcdef", sha256="fedcba9876543210" * 4,
                      software_version="9.9.9")
SEGMENTS = (Segment(1, "sphere", (220, 40, 30)), Segment(2, "ring", (20, 200, 90)),
            Segment(3, "never found", (10, 20, 250)))
INSTALL = 'pip install "dicompyler-core==0.5.6" "matplotlib==3.11.2" (test-only; .ci/run does it)'


def series(folder: Path, **geometry) -> Volume:
    """A factory series read by SegLens's own reader."""
    paths = dicom_factory.write_series(folder, **geometry)
    found = [item for _, item in scan_dicom(paths)]
    assert len(found) == 1 and isinstance(found[0], Volume)
    return found[0]


def phantom(depth: int, rows: int, columns: int) -> np.ndarray:
    """Class 1 a sphere (radius 7 voxels, in voxel units), class 2 a ring with a hole (outer radius 6, inner 3) on
    the middle slices, and an island of class 2 inside the ring's hole on one slice (a contour inside a hole)."""
    labels = np.zeros((depth, rows, columns), np.uint8)
    zz, yy, xx = np.mgrid[:depth, :rows, :columns]
    labels[(zz - depth / 2) ** 2 + (yy - rows * 0.35) ** 2 + (xx - columns * 0.35) ** 2 <= 7 ** 2] = 1
    ring = (yy - rows * 0.7) ** 2 + (xx - columns * 0.7) ** 2
    labels[(ring <= 6 ** 2) & (ring > 3 ** 2) & (zz >= 2) & (zz <= depth - 3)] = 2
    labels[depth // 2][ring[0] <= 0.5] = 2  # the island: one voxel at the hole's centre
    return labels


def dice(a: np.ndarray, b: np.ndarray) -> float:
    total = int(a.sum()) + int(b.sum())
    return 1.0 if total == 0 else 2.0 * int(np.logical_and(a, b).sum()) / total


# --- the outlines, without any reader ---------------------------------------------------------------------------

def test_a_ring_is_an_outer_contour_and_a_hole_whose_parity_gives_back_every_pixel():
    mask = np.zeros((24, 30), bool)
    yy, xx = np.mgrid[:24, :30]
    ring = (yy - 12) ** 2 + (xx - 14) ** 2
    mask[(ring <= 64) & (ring > 9)] = True
    mask[0, 0] = True  # a single pixel in a corner: its own contour, at the image's edge
    outlines = slice_outlines(mask)
    assert len(outlines) == 3  # ring outside, ring hole, the corner pixel
    centres = [(float(c), float(r)) for r in range(24) for c in range(30)]
    inside = np.zeros(mask.shape, bool)
    for points in outlines:
        polygon = points.astype(np.float32).reshape(-1, 1, 2)
        tests = np.array([cv2.pointPolygonTest(polygon, p, False) for p in centres]).reshape(mask.shape)
        assert not (tests == 0).any()  # no pixel centre on an outline: nothing left to a reader's rounding
        inside ^= tests > 0  # even-odd: a hole cuts its outer contour
    assert np.array_equal(inside, mask)
    # every vertex lies (UPSAMPLE - 1) / (2 UPSAMPLE) of a pixel from a pixel centre, towards the edge
    offsets = np.abs(np.concatenate(outlines) - np.round(np.concatenate(outlines)))
    assert np.allclose(offsets[offsets > 0], (UPSAMPLE - 1) / (2 * UPSAMPLE))


def test_an_empty_slice_has_no_outline():
    assert slice_outlines(np.zeros((8, 8), bool)) == []


# --- the file: an outside validator, the references, the geometry ------------------------------------------------

def test_rtstruct_passes_dciodvfy_with_no_error(tmp_path: Path):
    dciodvfy.require()
    volume = series(tmp_path / "series", slices=10, rows=40, columns=44)
    path = write_rtstruct(volume, phantom(10, 40, 44), SEGMENTS, tmp_path / "rt.dcm", algorithm=ALGORITHM)
    assert dciodvfy.verify(path).errors == ()


@pytest.mark.parametrize("orientation", ["axial", "oblique"])
def test_contours_lie_on_their_slice_and_reference_it(tmp_path: Path, orientation: str):
    import pydicom

    tilt = dicom_factory.AXIAL if orientation == "axial" else dicom_factory.oblique(20.0)
    volume = series(tmp_path / "series", slices=10, rows=40, columns=44, orientation=tilt, shuffle=True)
    ds = pydicom.dcmread(write_rtstruct(volume, phantom(10, 40, 44), SEGMENTS, tmp_path / "rt.dcm",
                                        algorithm=ALGORITHM))
    sources = {str(h.SOPInstanceUID): h for h in (pydicom.dcmread(ref.path) for ref in volume.slices)}
    first = next(iter(sources.values()))
    frame = ds.ReferencedFrameOfReferenceSequence[0]
    assert frame.FrameOfReferenceUID == first.FrameOfReferenceUID == ds.FrameOfReferenceUID
    study = frame.RTReferencedStudySequence[0]
    assert study.ReferencedSOPInstanceUID == first.StudyInstanceUID == ds.StudyInstanceUID
    referenced = study.RTReferencedSeriesSequence[0]
    assert referenced.SeriesInstanceUID == first.SeriesInstanceUID
    assert [i.ReferencedSOPInstanceUID for i in referenced.ContourImageSequence] == \
        [ref.sop_instance_uid for ref in volume.slices]
    normal = dicom_factory.normal_of(first.ImageOrientationPatient)
    for roi in ds.ROIContourSequence:
        for contour in roi.get("ContourSequence", []):
            assert contour.ContourGeometricType == "CLOSED_PLANAR"
            source = sources[contour.ContourImageSequence[0].ReferencedSOPInstanceUID]
            points = np.asarray(contour.ContourData, float).reshape(-1, 3)
            assert len(points) == contour.NumberOfContourPoints >= 3
            # on the plane of the slice it references (LPS mm, from its ImagePositionPatient)
            assert np.allclose(points @ normal, np.asarray(source.ImagePositionPatient, float) @ normal, atol=1e-3)


def test_every_class_is_an_roi_named_and_coloured_an_empty_one_without_contours(tmp_path: Path):
    volume = series(tmp_path / "series", slices=10, rows=40, columns=44)
    ds = build_rtstruct(volume, phantom(10, 40, 44), SEGMENTS, algorithm=ALGORITHM)
    assert [(r.ROINumber, r.ROIName, r.ROIGenerationAlgorithm) for r in ds.StructureSetROISequence] == \
        [(1, "sphere", "AUTOMATIC"), (2, "ring", "AUTOMATIC"), (3, "never found", "AUTOMATIC")]
    assert [list(r.ROIDisplayColor) for r in ds.ROIContourSequence] == [list(s.color) for s in SEGMENTS]
    assert ["ContourSequence" in r for r in ds.ROIContourSequence] == [True, True, False]
    assert [o.ReferencedROINumber for o in ds.RTROIObservationsSequence] == [1, 2, 3]
    algorithm = ds.StructureSetROISequence[0].ROIDerivationAlgorithmIdentificationSequence[0]
    assert (algorithm.AlgorithmName, algorithm.AlgorithmVersion) == ("organ-net", "0123456789abcdef")
    assert ALGORITHM.sha256 in algorithm.AlgorithmParameters
    assert (ds.Modality, ds.SeriesNumber, ds.SoftwareVersions) == ("RTSTRUCT", 3003, "9.9.9")


def test_a_nifti_volume_gets_one_line_and_no_file(tmp_path: Path):
    from app.io.nifti import nifti_volume

    dicom_factory.write_nifti(tmp_path / "v.nii.gz")
    volume = nifti_volume(tmp_path / "v.nii.gz")
    assert export_problem("rtstruct", volume) == \
        "DICOM SEG, Secondary Capture and RTSTRUCT need a DICOM source; this is NIfTI"
    labels = np.zeros((volume.depth, volume.rows, volume.columns), np.uint8)
    with pytest.raises(OutputError, match="An RTSTRUCT needs a DICOM source"):
        write_rtstruct(volume, labels, SEGMENTS, tmp_path / "rt.dcm", algorithm=ALGORITHM)
    assert not (tmp_path / "rt.dcm").exists()
    assert export_paths(["rtstruct"], tmp_path / "x") == [tmp_path / "x_rtstruct.dcm"]


# --- a second reader: dicompyler-core ---------------------------------------------------------------------------

@pytest.fixture
def dicompyler(monkeypatch):
    """dicompyler-core's parser and DVH module; skipped without it, a failure in CI."""
    import pydicom.dicomio

    # dicompyler-core 0.5.6 imports pydicom 2's read_file, an alias of dcmread that pydicom 3 removed
    monkeypatch.setattr(pydicom.dicomio, "read_file", pydicom.dcmread, raising=False)
    try:
        from dicompylercore import dicomparser, dvhcalc
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"dicompyler-core is not installed ({exc}): {INSTALL} (CI must read the RTSTRUCT back)")
        pytest.skip(f"dicompyler-core is not installed: {INSTALL}")
    return dicomparser, dvhcalc


def read_back(dicompyler, path: Path, volume: Volume, segments=SEGMENTS) -> dict[str, np.ndarray]:
    """Each ROI of the RTSTRUCT at `path` rasterised by dicompyler-core onto the volume's (axial) slices: its
    planes by z, each contour a matplotlib path tested at the pixel centres (dvhcalc.get_contour_mask), a slice's
    contours combined by XOR as dvhcalc.calculate_plane_histogram does (holes)."""
    import pydicom

    dicomparser, dvhcalc = dicompyler
    parser = dicomparser.DicomParser(str(path))
    first = pydicom.dcmread(volume.slices[0].path, stop_before_pixels=True)
    row_mm, column_mm = (float(v) for v in first.PixelSpacing)
    origin = np.asarray(first.ImagePositionPatient, float)
    xs, ys = origin[0] + column_mm * np.arange(volume.columns), origin[1] + row_mm * np.arange(volume.rows)
    dd = {"lut": [xs, ys], "x_lut_index": 0, "rows": volume.rows, "columns": volume.columns}
    x, y = np.meshgrid(xs, ys)
    points = np.vstack((x.ravel(), y.ravel())).transpose()
    masks = {}
    for number, structure in parser.GetStructures().items():
        planes = {float(z): plane for z, plane in parser.GetStructureCoordinates(number).items()}
        mask = np.zeros((volume.depth, volume.rows, volume.columns), bool)
        for k, ref in enumerate(volume.slices):
            plane = next((p for z, p in planes.items() if abs(z - ref.position[2]) < 0.01), [])
            for contour in plane:
                mask[k] ^= dvhcalc.get_contour_mask(dd, number, points, [c[0:2] for c in contour["data"]])
        masks[structure["name"]] = mask
        assert tuple(int(v) for v in structure["color"]) == next(s.color for s in segments
                                                                 if s.name == structure["name"])
    return masks


@pytest.mark.parametrize("geometry", [
    {"pixel_spacing": (1.0, 1.0), "spacing": 1.0, "origin": (0.0, 0.0, 0.0)},  # unit spacing
    {"pixel_spacing": (0.7, 0.9), "spacing": 2.5, "origin": (-120.3, 40.7, -33.1)},  # non-unit, anisotropic
], ids=["unit", "non-unit"])
def test_dicompyler_rasterises_every_roi_back_onto_the_labels(tmp_path: Path, dicompyler, geometry: dict):
    volume = series(tmp_path / "series", slices=14, rows=40, columns=44, shuffle=True, **geometry)
    labels = phantom(14, 40, 44)
    path = write_rtstruct(volume, labels, SEGMENTS, tmp_path / "rt.dcm", algorithm=ALGORITHM)
    masks = read_back(dicompyler, path, volume)
    assert sorted(masks) == ["never found", "ring", "sphere"]
    for segment in SEGMENTS:
        assert dice(masks[segment.name], labels == segment.value) >= 0.98, segment.name
    ring = masks["ring"][7]
    assert ring[28, 26] and not ring[28, 30] and ring[28, 31]  # the ring, its hole left open, the island in it
    assert not masks["never found"].any()


# --- --anonymize: de-identified like the SEG, and the last check reads it ----------------------------------------

KEY = "0123456789abcdef0123456789abcdef"
PATIENT = ("SMITHSON^ALBERTINE", "PID-778899")


def test_anonymized_rtstruct_is_pseudonymous_and_references_the_deidentified_source(tmp_path: Path, monkeypatch):
    import pydicom

    from app.cli import main

    pytest.importorskip("dicognito")
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    paths = dicom_factory.write_series(tmp_path / "in" / "ct", slices=6, rows=48, columns=48, patient=PATIENT)
    sources = [pydicom.dcmread(p) for p in paths]
    out = tmp_path / "out"
    assert main(["run", "ct_demo", str(tmp_path / "in"), "--out", str(out), "--export", "rtstruct,dicom-seg,source",
                 "--anonymize"]) == 0
    (rt_path,) = out.rglob("*_rtstruct.dcm")
    data = rt_path.read_bytes().upper()
    assert not [n for n in ("SMITHSON", "ALBERTINE", "PID-778899") if n.encode() in data]
    uids = {str(ds.SOPInstanceUID) for ds in sources} | {str(sources[0].StudyInstanceUID),
                                                         str(sources[0].SeriesInstanceUID),
                                                         str(sources[0].FrameOfReferenceUID)}
    assert not [u for u in uids if u.encode() in rt_path.read_bytes()]
    rt = pydicom.dcmread(rt_path)
    (seg_path,) = out.rglob("*_seg.dcm")
    seg = pydicom.dcmread(seg_path)
    copies = [pydicom.dcmread(p) for p in sorted(next(out.rglob("*_source")).iterdir())]
    assert (str(rt.PatientName), rt.PatientID) == (str(seg.PatientName), seg.PatientID)  # the keyed pseudonym
    assert rt.PatientID.startswith("anon-") and rt.PatientIdentityRemoved == "YES"
    assert "113100" in {item.CodeValue for item in rt.DeidentificationMethodCodeSequence}
    frame = rt.ReferencedFrameOfReferenceSequence[0]
    referenced = frame.RTReferencedStudySequence[0].RTReferencedSeriesSequence[0]
    # the remapped UIDs are those of the de-identified source copy (and of the SEG), instance by instance
    assert frame.FrameOfReferenceUID == copies[0].FrameOfReferenceUID == seg.FrameOfReferenceUID
    assert referenced.SeriesInstanceUID == copies[0].SeriesInstanceUID
    assert rt.StudyInstanceUID == copies[0].StudyInstanceUID == seg.StudyInstanceUID
    assert {i.ReferencedSOPInstanceUID for i in referenced.ContourImageSequence} == \
        {str(c.SOPInstanceUID) for c in copies}
    dciodvfy.require()
    assert dciodvfy.verify(rt_path).errors == ()


def test_the_last_privacy_check_reads_the_rtstruct(tmp_path: Path):
    from app.runs.privacy.check import volume_leak
    from app.runs.privacy.deidentify import volume_privacy

    pytest.importorskip("dicognito")
    volume = series(tmp_path / "series", slices=6, rows=32, columns=32, patient=PATIENT)
    labels = phantom(6, 32, 32)
    privacy = volume_privacy(volume, anonymize=False, key=KEY.encode())
    plain = write_rtstruct(volume, labels, SEGMENTS, tmp_path / "out" / "plain_rtstruct.dcm", algorithm=ALGORITHM,
                           privacy=privacy)
    assert volume_leak([plain], facts=privacy.facts, info=volume.info, root=tmp_path / "out", cells=()) == \
        "a patient name in the DICOM tags of plain_rtstruct.dcm"
    private = volume_privacy(volume, anonymize=True, key=KEY.encode())
    written = write_rtstruct(volume, labels, SEGMENTS, tmp_path / "out" / "anon_rtstruct.dcm", algorithm=ALGORITHM,
                             privacy=private)
    assert volume_leak([written], facts=private.facts, info=volume.info, root=tmp_path / "out", cells=()) is None


# --- through the folder run, and a multi-frame source ------------------------------------------------------------

def test_a_run_exports_the_rtstruct_of_a_series_and_a_note_for_a_nifti(ct_model, tmp_path: Path, capsys,
                                                                        dicompyler):
    from app.cli import main

    dicom_factory.write_series(tmp_path / "in" / "ct", slices=6, shuffle=True)
    dicom_factory.write_nifti(tmp_path / "in" / "brain.nii.gz")
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--export", "rtstruct"]) == 0
    (path,) = out.rglob("*_rtstruct.dcm")
    volume = series(tmp_path / "in" / "ct")
    expected = np.stack([dicom_factory.disc_slice(k, 32, 32) > 0 for k in range(6)])
    masks = read_back(dicompyler, path, volume, segments=(Segment(1, "disc", (255, 0, 0)),))
    assert dice(masks["disc"], expected) >= 0.98
    assert "brain.nii.gz: no rtstruct export (DICOM SEG, Secondary Capture and RTSTRUCT need a DICOM source; " \
           "this is NIfTI)" in capsys.readouterr().err
    assert not list(out.rglob("brain*rtstruct*"))


def test_a_multiframe_source_is_referenced_frame_by_frame(tmp_path: Path):
    import pydicom
    from test_volume_exports import multiframe_volume

    volume = multiframe_volume(tmp_path)
    labels = phantom(4, 32, 32)
    ds = pydicom.dcmread(write_rtstruct(volume, labels, SEGMENTS, tmp_path / "rt.dcm", algorithm=ALGORITHM))
    referenced = ds.ReferencedFrameOfReferenceSequence[0].RTReferencedStudySequence[0]
    images = referenced.RTReferencedSeriesSequence[0].ContourImageSequence
    assert [i.ReferencedFrameNumber for i in images] == [ref.frame + 1 for ref in volume.slices]
    by_frame = {ref.frame + 1: ref for ref in volume.slices}
    for roi in ds.ROIContourSequence:
        for contour in roi.get("ContourSequence", []):
            ref = by_frame[contour.ContourImageSequence[0].ReferencedFrameNumber]
            points = np.asarray(contour.ContourData, float).reshape(-1, 3)
            assert np.allclose(points[:, 2], ref.position[2], atol=1e-3)  # axial: on the frame's plane
    dciodvfy.require()
    assert dciodvfy.verify(tmp_path / "rt.dcm").errors == ()
