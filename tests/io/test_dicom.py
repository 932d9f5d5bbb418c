"""DICOM: real units (HU), the file's window, MONOCHROME1, frames, compressed files, and what the model sees."""

from __future__ import annotations

import warnings

import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, JPEGLSLossless, SecondaryCaptureImageStorage, generate_uid

from app.errors import ImageError
from app.inference.image.pipeline import model_pixels
from app.inference.model.builder import load_spec
from app.io import dicom
from app.io.images import read_image
from app.io.window import apply_window

CT = get_testdata_file("CT_small.dcm")
MR = get_testdata_file("MR_small.dcm")


def write_dicom(path, frames: np.ndarray, *, photometric="MONOCHROME2", syntax=ExplicitVRLittleEndian,
                slope=1.0, intercept=0.0, window=None, raw_bytes=None):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = syntax
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.Modality, ds.PatientName, ds.PatientID = "CT", "Test^Patient", "P-1"
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, photometric
    ds.Rows, ds.Columns = frames.shape[-2:]
    if frames.ndim == 3:
        ds.NumberOfFrames = frames.shape[0]
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
    ds.RescaleSlope, ds.RescaleIntercept = slope, intercept
    if window:
        ds.WindowCenter, ds.WindowWidth = window
    ds.PixelData = raw_bytes if raw_bytes is not None else frames.astype(np.int16).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def test_ct_values_are_hounsfield_units():
    image = read_image(CT)
    ds = pydicom.dcmread(CT)
    expected = ds.pixel_array.astype(np.float32) * float(ds.RescaleSlope) + float(ds.RescaleIntercept)
    for y, x in ((0, 0), (64, 64), (100, 30)):
        assert image.raw[y, x] == pytest.approx(expected[y, x])
    assert image.source_mode == "DICOM" and image.info["Modality"] == "CT" and image.info["Patient ID"] == "1CT1"
    assert image.pixels.shape == (128, 128) and image.pixels.dtype == np.uint8


def test_mr_window_from_the_file_is_the_default_display():
    image = read_image(MR)
    assert image.window == (600.0, 1600.0) and "from the file" in image.info["Window"]
    np.testing.assert_array_equal(image.pixels, apply_window(image.raw, 600, 1600))
    soft = image.display((40, 400))  # an interactive window changes the display, not the values
    assert not np.array_equal(soft, image.pixels) and image.raw.max() == pytest.approx(2145)


def test_apply_window_follows_the_dicom_formula():
    values = np.array([-200.0, -160.5, 40.0, 239.5, 300.0])
    levels = apply_window(values, 40, 400)
    assert levels[0] == 0 and levels[-1] == 255 and abs(int(levels[2]) - 128) <= 1


def test_monochrome1_is_inverted_and_hu_rescaled(tmp_path):
    stored = np.arange(64, dtype=np.int16).reshape(8, 8) * 10
    path = write_dicom(tmp_path / "m1.dcm", stored, photometric="MONOCHROME1", slope=2.0, intercept=-100,
                       window=(0, 1000))
    image = read_image(path)
    assert image.raw[7, 7] == pytest.approx(630 * 2 - 100) and image.invert
    assert image.pixels[0, 0] > image.pixels[7, 7]  # low values are bright in MONOCHROME1


def test_multiframe_frames_are_selectable(tmp_path):
    frames = np.stack([np.full((6, 5), value, np.int16) for value in (0, 500, 1000)])
    path = write_dicom(tmp_path / "multi.dcm", frames, window=(500, 1000))
    assert read_image(path).frame_count == 3
    assert read_image(path, frame=2).raw.mean() == pytest.approx(1000)
    with pytest.raises(ImageError, match="frame 7 does not exist"):
        read_image(path, frame=7)


def test_compressed_dicom_decodes_through_the_installed_codecs():
    """pylibjpeg (the dicom-codecs extra, installed in dev) decodes the lossless syntaxes to the very pixels of the
    uncompressed file; Pillow decodes JPEG 2000."""
    plain = read_image(get_testdata_file("MR_small.dcm")).raw
    for name in ("MR_small_jpeg_ls_lossless.dcm", "MR_small_jp2klossless.dcm", "MR_small_RLE.dcm"):
        np.testing.assert_array_equal(read_image(get_testdata_file(name)).raw, plain, err_msg=name)
    assert read_image(get_testdata_file("JPEG2000.dcm")).pixels.shape == (1024, 256)


@pytest.mark.parametrize(("install", "fix"), [
    ("installed", "(pip install pylibjpeg pylibjpeg-libjpeg)"),
    ("checkout", "(uv sync --extra dicom-codecs, which brings pylibjpeg, pylibjpeg-libjpeg)")])
def test_compressed_dicom_without_its_decoder_names_the_package(tmp_path, monkeypatch, install, fix):
    import pydicom.dataset

    import app.paths

    monkeypatch.setattr(app.paths, "install_kind", lambda: install)

    def no_plugin(self):
        raise RuntimeError("Unable to decode the pixel data as none of the plugins are available")

    monkeypatch.setattr(pydicom.dataset.Dataset, "pixel_array", property(no_plugin))
    path = write_dicom(tmp_path / "jls.dcm", np.zeros((4, 4), np.int16), syntax=JPEGLSLossless,
                       raw_bytes=b"\xfe\xff\x00\xe0\x00\x00\x00\x00" + b"\x00" * 8)
    with pytest.raises(ImageError) as err:
        read_image(path)
    message = str(err.value)
    assert "jls.dcm" in message and ("JPEG-LS" in message or "JPEG LS" in message) and message.endswith(fix)


def test_not_a_dicom_despite_the_extension(tmp_path):
    (tmp_path / "fake.dcm").write_bytes(b"\x00" * 200)
    with pytest.raises(ImageError, match="fake.dcm: not a valid DICOM"):
        read_image(tmp_path / "fake.dcm")


def test_sidecar_window_sets_what_the_model_sees(models):
    path = models("binary_logits")
    path.with_suffix(".yaml").write_text("input:\n  window: [40, 400]\n")
    spec = load_spec(path)
    image = read_image(CT)
    np.testing.assert_array_equal(model_pixels(spec, image), apply_window(image.raw, 40, 400))
    path.with_suffix(".yaml").write_text("input:\n  range: [-1000, 1000]\n")
    levels = model_pixels(load_spec(path), image)
    assert levels[0, 0] == round((image.raw[0, 0] + 1000) * 255 / 2000)


def test_sixteen_bit_png_keeps_its_values_and_gets_an_auto_window(tmp_path):
    from PIL import Image

    values = (np.arange(100 * 100, dtype=np.uint32).reshape(100, 100) % 4000 + 1000).astype(np.uint16)
    Image.fromarray(values).save(tmp_path / "deep.png")
    image = read_image(tmp_path / "deep.png")
    assert image.raw.max() == 4999 and image.raw.min() == 1000
    assert 2000 < image.window[0] < 4000 and image.display().max() == 255  # auto window stretches the display


def test_multiframe_dicom_total_pixels_are_checked_before_decoding(tmp_path, monkeypatch):
    """Each 16×16 frame is under the limit but the 10-frame volume (2560 pixels) is not; pydicom decodes the
    whole volume to give one frame, so the total must be checked, before the pixel data is touched."""
    path = write_dicom(tmp_path / "volume.dcm", np.zeros((10, 16, 16), np.int16))
    monkeypatch.setattr(dicom, "_pixel_array", lambda ds, p: pytest.fail("decoded before the limit check"))
    with pytest.raises(ImageError) as caught:
        read_image(path, max_pixels=1000)
    message = str(caught.value)
    assert message.startswith(str(path)) and "too large" in message and "10 frames" in message, message


def test_multiframe_dicom_under_the_limit_still_reads(tmp_path):
    frames = np.arange(4 * 8 * 8, dtype=np.int16).reshape(4, 8, 8)
    image = read_image(write_dicom(tmp_path / "ok.dcm", frames), max_pixels=4 * 8 * 8, frame=3)
    assert image.frame_count == 4 and image.raw[0, 0] == frames[3, 0, 0]


def test_a_missing_dicom_frame_is_refused_before_decoding(tmp_path, monkeypatch):
    path = write_dicom(tmp_path / "volume.dcm", np.zeros((3, 8, 8), np.int16))
    monkeypatch.setattr(dicom, "_pixel_array", lambda ds, p: pytest.fail("decoded a volume to refuse a frame"))
    with pytest.raises(ImageError, match="frame 7 does not exist"):
        read_image(path, frame=7)


def test_header_text_shown_as_information_is_capped(tmp_path):
    """The patient/study fields are shown in the viewer and written to reports; the standard limits them to 64
    characters, a file may hold any length."""
    path = write_dicom(tmp_path / "long.dcm", np.zeros((8, 8), np.int16))
    ds = pydicom.dcmread(path)
    with warnings.catch_warnings():  # pydicom warns about the over-long value we write on purpose
        warnings.simplefilter("ignore")
        ds.InstitutionName, ds.StudyDescription = "x" * 100_000, "study\nwith\nlines"  # too long: read as bytes
        ds.save_as(path)
    info = read_image(path).info
    assert len(info["Institution"]) <= 200 and info["Study"] == "study with lines"
