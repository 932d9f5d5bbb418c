"""A small file must not hang SegLens or fill its memory (issue 24, §3): every declared size is checked from the
header before anything is allocated (NIfTI slices, bytes of the decoded type, a TIFF's depth and samples, a
reference's size), volumes are read a slice at a time, and FIFOs or devices among the inputs are refused without
being opened for a blocking read. Hostile files are crafted byte by byte; a hang runs in a child process with a
timeout, so it fails the test instead of stopping the suite."""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
import zlib

import nibabel as nib
import numpy as np
import pytest
import tifffile
from conftest import REPO
from PIL import Image

from app.errors import ImageError
from app.io.images import read_image, read_slice
from app.io.limits import MAX_SLICES
from app.io.nifti import nifti_volume
from app.io.references import read_reference

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


def child(code: str, *, timeout: float = 60) -> str:
    """Run `code` in a fresh interpreter (the repository's `app`); its stdout. A hang fails the test."""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def nifti_header(shape, dtype=np.int16, *, slope: float | None = None) -> bytes:
    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(dtype)
    header["vox_offset"] = 352
    header["magic"] = b"n+1"
    if slope is not None:
        header.set_slope_inter(slope, -10.0)
    return header.binaryblock + b"\0" * 4  # the 4-byte extension flag: 352 bytes before the voxels


# -- NIfTI ---------------------------------------------------------------------------------------------------------

def test_a_368_byte_nifti_declaring_9_million_slices_is_refused_at_once(tmp_path):
    path = tmp_path / "tiny.nii"
    path.write_bytes(nifti_header((1, 1, 3000, 3000)) + b"\0" * 16)
    assert path.stat().st_size == 368
    # before: 9,000,000 slice records were built (16 s, 1.5 GB) and the volume listed as fine
    out = child(f"from app.io.discover import discover; print(discover([{str(path)!r}])[0].problem)")
    assert out.strip() == f"9000000 slices declared; the limit is {MAX_SLICES}"


def test_a_nifti_shorter_than_its_header_declares_is_refused_from_the_header(tmp_path):
    path = tmp_path / "short.nii"
    path.write_bytes(nifti_header((64, 64, 10)) + b"\0" * 100)
    with pytest.raises(ImageError, match=r"damaged NIfTI data \(the header declares 81920 bytes of voxels from "
                                         r"byte 352; the file holds 452 bytes\)"):
        nifti_volume(path)


def test_a_compressed_nifti_is_counted_in_bytes_of_its_decoded_type(tmp_path):
    path = tmp_path / "scaled.nii.gz"
    header = nifti_header((256, 256, 40), slope=0.5)  # 2.6 M int16 voxels, scaled: float64 when decoded
    path.write_bytes(gzip.compress(header + bytes(256 * 256 * 40 * 2), 9))
    assert path.stat().st_size < 20_000
    # 21 MB as float64: over 4 volumes × 4 bytes × 1 megapixel (before: 2.6 megavoxels passed the 4-megavoxel limit)
    with pytest.raises(ImageError) as caught:
        nifti_volume(path, max_pixels=1_000_000)
    assert str(caught.value) == (f"{path}: volume too large (256×256×40 float64 = 21 MB decoded; the limit is "
                                 "16 MB, from --max-megapixels)")
    assert nifti_volume(path, max_pixels=2_000_000).depth == 40  # 32 MB allowed


@pytest.mark.parametrize("name", ["big.nii", "big.nii.gz"])
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="peak memory read from Linux's /proc")
def test_a_nifti_is_read_a_slice_at_a_time_not_as_a_whole_float64_volume(tmp_path, name):
    path = tmp_path / name
    image = nib.Nifti1Image(np.arange(192 * 192 * 400, dtype=np.int32).reshape(192, 192, 400, order="F")
                            .astype(np.int16), np.eye(4))
    image.header.set_data_dtype(np.int16)
    image.header.set_slope_inter(0.5, -10.0)
    nib.save(image, str(path))
    # 14.7 M voxels: 29 MB stored (int16), 118 MB as float64. Before: the whole float64 array, then a float32 copy.
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child would report the test runner's peak
    out = child(f"""
from pathlib import Path
import nibabel, numpy
from app.io.nifti import nifti_volume
from app.io.images import read_slice

def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

before = peak_kb()
volume = nifti_volume(Path({str(path)!r}))
values = [float(read_slice(volume, k).raw[3, 2]) for k in (0, 199, 399)]
print((peak_kb() - before) // 1024, *values)
""")
    grown_mb, *values = out.split()
    stored = np.arange(192 * 192 * 400).reshape(192, 192, 400, order="F").astype(np.int16)
    assert [float(v) for v in values] == [float(stored[2, 3, k]) * 0.5 - 10 for k in (0, 199, 399)]
    held = 70 if name.endswith(".gz") else 20  # .gz: the stored int16 volume (29 MB) kept; .nii: slices only
    assert int(grown_mb) < held, grown_mb


@needs_fifo
def test_a_fifo_among_the_inputs_neither_hangs_discovery_nor_decoding(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(folder / "ok.png")
    for name in ("pipe", "pipe.dcm", "pipe.nii", "pipe.png"):
        os.mkfifo(folder / name)
    out = child(f"""
from app.io.discover import discover
from app.io.images import read_image
from app.errors import ImageError
for item in discover([{str(folder)!r}]):
    try:
        read_image(item.path)
        print(item.rel, "ok")
    except ImageError as exc:
        print(item.rel, exc)
    if item.problem:
        print(item.rel, "problem", item.problem)
""", timeout=30)  # before: open() of `pipe` (looking for the DICM marker) waited for a writer
    lines = sorted(out.strip().splitlines())
    assert "ok.png ok" in lines
    fifo = "not a regular file: a named pipe (FIFO)"
    assert any(line.startswith("pipe.nii problem") and fifo in line for line in lines), lines
    assert any(line.startswith("pipe.png ") and line.endswith(fifo) for line in lines), lines
    assert not any(line.startswith("pipe ") for line in lines)  # a FIFO with no extension is no DICOM


def test_a_device_given_as_an_input_is_one_line():
    with pytest.raises(ImageError, match="^/dev/zero: not a regular file: a character device$"):
        read_image("/dev/zero")


# -- TIFF ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["volumetric", "samples"])
def test_a_tiff_is_counted_in_every_axis_before_decoding(tmp_path, layout, monkeypatch):
    path = tmp_path / f"{layout}.tif"
    planes = np.zeros((30, 600, 600), np.uint8)  # 10.8 MB decoded from a ~40 KB file
    if layout == "volumetric":
        tifffile.imwrite(path, planes, volumetric=True, compression="zlib", tile=(1, 256, 256))
    else:
        tifffile.imwrite(path, planes, photometric="minisblack", planarconfig="separate", compression="zlib")
    assert path.stat().st_size < 100_000

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded before the size was checked")

    monkeypatch.setattr("tifffile.TiffPage.asarray", no_decoding)
    monkeypatch.setattr("app.io.images.Image.open", no_decoding)
    with pytest.raises(ImageError) as caught:  # before: every plane decoded (600² passed the pixel limit)
        read_image(path, max_pixels=600 * 600)
    assert str(caught.value) == (f"{path}: image too large (30×600×600 8-bit = 11 MB decoded; the limit is "
                                 "2.9 MB, from --max-megapixels)")


def test_an_rgb_tiff_at_the_pixel_limit_still_decodes(tmp_path):
    path = tmp_path / "rgb.tif"
    tifffile.imwrite(path, np.full((100, 100, 3), 7, np.uint8), photometric="rgb")
    assert read_image(path, max_pixels=100 * 100).pixels.shape == (100, 100, 3)


# -- references, corrected masks, Pillow's own guard ----------------------------------------------------------------

def png_bytes(width: int, height: int) -> bytes:
    """A gray PNG of zeros, compressed row by row: a 30000² one is under 1 MB."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer, row = zlib.compressobj(9), b"\0" * (width + 1)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", data) + chunk(b"IEND", b""))


def test_a_reference_mask_is_checked_from_its_header(tmp_path, monkeypatch):
    path = tmp_path / "x.png"
    path.write_bytes(png_bytes(3000, 3000))
    monkeypatch.setenv("SEGLENS_MAX_MEGAPIXELS", "4")
    # before: no limit (a 30000² PNG of 854 KB became 3.7 GB); now --max-megapixels, as for the input
    with pytest.raises(ImageError, match=r"x.png: image too large \(3000×3000 = 9 megapixels; the limit is 4\)"):
        read_reference(path, 2)
    assert read_reference(path, 2, max_pixels=9_000_000).shape == (3000, 3000)


def test_pillows_guard_stays_on_for_the_whole_process(tmp_path):
    path = tmp_path / "x.png"
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(path)
    read_image(path)
    assert Image.MAX_IMAGE_PIXELS is not None  # before: None for every Pillow caller once an image was read
    read_reference(path, 2)
    assert Image.MAX_IMAGE_PIXELS is not None


@needs_fifo
def test_a_fifo_reference_is_one_line_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "x.png")
    out = child(f"""
from pathlib import Path
from app.errors import ImageError
from app.io.references import read_reference
try:
    read_reference(Path({str(tmp_path / 'x.png')!r}), 2)
except ImageError as exc:
    print(exc)
""", timeout=30)
    assert out.strip() == f"{tmp_path / 'x.png'}: cannot read the reference mask (not a regular file: a named pipe " \
                          "(FIFO))"


def test_a_nifti_slice_count_is_read_slice_after_slice(tmp_path):
    path = tmp_path / "v.nii.gz"
    nib.save(nib.Nifti1Image(np.arange(5 * 4 * 3 * 2, dtype=np.float32).reshape(5, 4, 3, 2), np.eye(4)), str(path))
    volume = nifti_volume(path)
    data = np.asanyarray(nib.load(str(path)).dataobj)
    for s in range(volume.depth):
        np.testing.assert_array_equal(read_slice(volume, s).raw, data[:, :, s % 3, s // 3].T)


# -- DICOM ---------------------------------------------------------------------------------------------------------

def tiny_dicom(path, *, frames: int = 1, rows: int = 1, columns: int = 1, samples: int = 1) -> None:
    """A DICOM whose header declares `frames` × rows × columns × samples but holds a few bytes of pixels."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID = "1.2.840.10008.5.1.4.1.1.7", generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.SeriesInstanceUID, ds.StudyInstanceUID, ds.Modality = generate_uid(), generate_uid(), "OT"
    ds.Rows, ds.Columns, ds.NumberOfFrames, ds.SamplesPerPixel = rows, columns, frames, samples
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.PhotometricInterpretation = "MONOCHROME2" if samples == 1 else "RGB"
    if samples > 1:
        ds.PlanarConfiguration = 0
    ds.PixelData = b"\0" * 16
    ds.save_as(str(path), enforce_file_format=True)


def test_a_multiframe_dicom_declaring_ten_million_frames_is_one_error_row(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    tiny_dicom(folder / "frames.dcm", frames=10_000_000)
    assert (folder / "frames.dcm").stat().st_size < 1000
    out = child(f"""
from app.io.discover import discover
from app.io.images import read_image
from app.errors import ImageError
items = discover([{str(folder)!r}])
print(len(items), items[0].volume is None)
try:
    read_image(items[0].path)
except ImageError as exc:
    print(exc)
""", timeout=30)  # before: a volume of 10 M slice records (and the first decode asked for all of them)
    listed, message = out.strip().splitlines()
    assert listed == "1 True"  # one plain input (no volume), whose decoder says why
    assert message == f"{folder / 'frames.dcm'}: 10000000 slices declared; the limit is {MAX_SLICES}"



def test_a_truncated_compressed_nifti_is_one_line_when_its_slice_is_read(tmp_path):
    path = tmp_path / "cut.nii.gz"
    whole = gzip.compress(nifti_header((64, 64, 10)) + bytes(64 * 64 * 10 * 2))
    path.write_bytes(whole[: len(whole) // 2])
    volume = nifti_volume(path)  # the header is whole: listed as a volume
    with pytest.raises(ImageError) as caught:
        read_slice(volume, 0)
    assert str(caught.value).startswith(f"{path}: damaged NIfTI data (") and str(caught.value).count(str(path)) == 1
