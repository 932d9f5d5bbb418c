"""Generate a corpus of what QA operators and clinicians really drop: bad files among good ones.

    uv run python tools/make_bad_corpus.py OUT_DIR

Writes good images in odd forms (wrong extension, CMYK, palette, RGBA, 16-bit, EXIF-rotated, non-ASCII names,
multi-page, tiny) and bad files (empty, truncated, text or random bytes with image extensions, a huge header,
broken DICOMs, a NIfTI header declaring 9 M slices in 368 bytes, named pipes, a dangling symlink, a symlink
loop). Returns {file name: expected problem or None}.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image


def _png_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def _huge_png_header(width: int, height: int) -> bytes:
    """A valid PNG signature and IHDR claiming a huge image, and almost no data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk + b"\x00\x00\x00\x00IEND\xaeB`\x82"


def _nifti_header(*shape: int) -> bytes:
    """A NIfTI-1 header (348 bytes + the 4-byte extension flag) declaring int16 voxels of `shape`, from offset 352."""
    dims = [len(shape), *shape] + [1] * (7 - len(shape))
    header = bytearray(348)
    struct.pack_into("<i", header, 0, 348)
    struct.pack_into("<8h", header, 40, *dims)
    struct.pack_into("<hh", header, 70, 4, 16)  # datatype int16, 16 bits per voxel
    struct.pack_into("<8f", header, 76, 1.0, *([1.0] * 7))  # pixdim
    struct.pack_into("<f", header, 108, 352.0)  # vox_offset
    header[344:348] = b"n+1\0"
    return bytes(header) + b"\0" * 4


def make_corpus(out: Path) -> dict[str, str | None]:
    """Create the corpus in `out`; returns {relative name: expected error fragment, or None for good files}."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 255, (48, 64, 3), np.uint8)
    expected: dict[str, str | None] = {}

    def good(name: str, data: bytes) -> None:
        (out / name).write_bytes(data)
        expected[name] = None

    def bad(name: str, data: bytes, problem: str) -> None:
        (out / name).write_bytes(data)
        expected[name] = problem

    png = _png_bytes(rgb)
    jpeg = io.BytesIO()
    Image.fromarray(rgb).save(jpeg, format="JPEG", quality=90)
    good("good_plain.png", png)
    good("good_png_named.jpg", png)  # wrong extension: decoded by content
    good("good_jpeg_named.png", jpeg.getvalue())
    good("good_gray.png", _png_bytes(rgb[..., 0]))
    good("good_16bit.png", _png_bytes(rgb[..., 0].astype(np.uint16) * 257))
    good("good_tiny_1x1.png", _png_bytes(rgb[:1, :1]))
    good("good_thin_2x900.png", _png_bytes(np.zeros((2, 900, 3), np.uint8)))
    good("güte_日本語.png", png)
    for name, image in (("good_cmyk.jpg", Image.fromarray(rgb).convert("CMYK")),
                        ("good_palette.png", Image.fromarray(rgb).convert("P")),
                        ("good_rgba.png", Image.fromarray(np.dstack([rgb, rgb[..., :1]]), "RGBA"))):
        image.save(out / name)
        expected[name] = None
    rotated = Image.fromarray(rgb)
    exif = rotated.getexif()
    exif[0x0112] = 6
    rotated.save(out / "good_exif_rotated.jpg", exif=exif)
    expected["good_exif_rotated.jpg"] = None
    frames = [Image.fromarray(np.roll(rgb, i, axis=1)) for i in range(3)]
    frames[0].save(out / "good_multipage.tif", save_all=True, append_images=frames[1:])
    frames[0].save(out / "good_animated.gif", save_all=True, append_images=frames[1:])
    expected["good_multipage.tif"] = expected["good_animated.gif"] = None
    Image.fromarray(np.where(rgb[..., 0] > 128, np.nan, 0.5).astype(np.float32)).save(out / "good_float_nan.tif")
    expected["good_float_nan.tif"] = None

    bad("empty.png", b"", "empty file")
    bad("truncated.png", png[: len(png) // 2], "damaged or truncated")
    bad("truncated.jpg", jpeg.getvalue()[: len(jpeg.getvalue()) // 3], "damaged or truncated")
    bad("text_named.jpg", b"Just some notes, not a picture.\n" * 20, "not an image")
    bad("html_named.tif", b"<html><body>404 Not Found</body></html>", "not an image")
    bad("random_bytes.bmp", rng.integers(0, 255, 4096, np.uint8).tobytes(), "image")
    bad("gzip_named.png", gzip.compress(png), "not an image")
    bad("bad_crc.png", png[:40] + bytes([png[40] ^ 0xFF]) + png[41:], "image")
    bad("huge_header.png", _huge_png_header(30000, 20000), "image too large")
    tiff = io.BytesIO()
    Image.fromarray(rgb).save(tiff, format="TIFF")
    bad("truncated.tif", tiff.getvalue()[: len(tiff.getvalue()) // 2], "damaged or truncated")
    webp = io.BytesIO()
    Image.fromarray(rgb).save(webp, format="WEBP")
    bad("truncated.webp", webp.getvalue()[: len(webp.getvalue()) // 2], "image")
    bad("zeros.dcm", b"\x00" * 300, "not a valid DICOM")
    bad("preamble_only.dcm", b"\x00" * 128 + b"DICM", "DICOM")
    bad("bmp_bad_header.bmp", b"BM" + b"\xff" * 60, "image")
    bad("declares_9M_slices.nii", _nifti_header(1, 1, 3000, 3000) + b"\0" * 16, "9000000 slices declared")
    if hasattr(os, "mkfifo"):  # a named pipe: opened for reading, it waits for a writer for ever
        os.mkfifo(out / "named_pipe.png")
        expected["named_pipe.png"] = "not a regular file: a named pipe (FIFO)"
        os.mkfifo(out / "named_pipe")  # no extension: looked at for a DICOM marker, never opened to block
    (out / "folder.png").mkdir(exist_ok=True)  # a folder with an image extension: walked, not read
    good("folder.png/inside.png", png)
    try:
        os.symlink(out / "does_not_exist.png", out / "dangling.png")
        expected["dangling.png"] = "file not found"
        (out / "loop").mkdir(exist_ok=True)
        os.symlink(out / "loop", out / "loop" / "again")  # a symlink loop: walked once
    except OSError:  # no symlinks (Windows without developer mode)
        pass
    return expected


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "bad_corpus")
    print(json.dumps(make_corpus(target), indent=2, ensure_ascii=False))
