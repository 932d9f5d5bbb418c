"""Fast PNG decoding for plain 8-bit RGB/gray and 16-bit gray files, with what the header tells.

Decoders in order: imagecodecs' libpng over zlib-ng (the optional `fast-decode` extra; ~15 % less CPU than
OpenCV on 1080p frames and it releases the GIL, so the prefetch threads decode in parallel), then OpenCV. Both
return exactly Pillow's pixels for the files `read_image` hands them (tests/io/test_png.py: RGB, gray, 16-bit
gray, Adam7-interlaced, with gAMA and iCCP chunks, which neither decoder nor Pillow applies). Anything else, or a
file either decoder declines, is left to Pillow, which reports what is wrong with it. pyspng (libspng) was
measured too: a little faster still, but it holds the GIL for the whole decode (docs/PERFORMANCE.md, "Decoding").
"""

from __future__ import annotations

import functools
import logging
import struct
from types import ModuleType
from typing import Any

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_LATE_METADATA = (b"eXIf", b"tEXt", b"zTXt", b"iTXt")  # where Pillow finds EXIF (an eXIf chunk or a text profile)


def decoder_name() -> str:
    """Which decoder takes plain PNGs here: 'imagecodecs' or 'opencv'."""
    return "imagecodecs" if _imagecodecs() is not None else "opencv"


def metadata_after_pixels(data: bytes) -> bool:
    """True when a chunk that may carry EXIF follows the first IDAT: Pillow only sees it after decoding the
    whole image (its `getexif` on a PNG decodes the pixels first, which doubled the cost of every PNG read).
    Before the first IDAT, Pillow has already read it when it opened the file. Walks the chunk headers only."""
    if not data.startswith(_SIGNATURE):
        return True  # not a PNG we understand: let Pillow decide
    offset, seen_pixels = len(_SIGNATURE), False
    while offset + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, offset)
        if kind == b"IDAT":
            seen_pixels = True
        elif kind == b"IEND":
            return False
        elif seen_pixels and kind in _LATE_METADATA:
            return True
        offset += 12 + length
    return False  # truncated: the decoder (or Pillow after it) reports it


def decode_png(data: bytes, *, mode: str, size: tuple[int, int]) -> np.ndarray | None:
    """Pixels of a plain PNG whose Pillow `mode` is "RGB" or "L" (8-bit) or "I;16" (16-bit gray), or None when
    no decoder gives the expected shape and type (then Pillow decodes it and says what is wrong)."""
    width, height = size
    dtype = np.dtype(np.uint8 if mode in ("RGB", "L") else np.uint16)
    expected: tuple[tuple[int, ...], np.dtype[Any]] = ((height, width, 3) if mode == "RGB" else (height, width), dtype)
    codecs = _imagecodecs()
    interlaced = len(data) > 28 and data[28] == 1  # IHDR's last byte: Adam7 (libpng logs a warning each time)
    if codecs is not None and not interlaced:
        pixels: np.ndarray | None
        try:
            pixels = codecs.png_decode(data)
        except Exception:  # a damaged file, or one libpng reads differently: try the next decoder
            pixels = None
        if pixels is not None and (pixels.shape, pixels.dtype) == expected:
            return pixels
    if mode == "I;16":
        return None  # OpenCV's 16-bit gray is no faster than Pillow's
    return _opencv(data, mode, expected)


def _opencv(data: bytes, mode: str, expected: tuple[tuple[int, ...], np.dtype[Any]]) -> np.ndarray | None:
    import cv2

    from app.io.native import quiet_native_stderr

    rgb_flag = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.10 decodes to RGB directly
    color = cv2.IMREAD_GRAYSCALE if mode == "L" else cv2.IMREAD_COLOR if rgb_flag is None else rgb_flag
    with quiet_native_stderr():  # libpng's own warnings (app.io.native)
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), color | cv2.IMREAD_IGNORE_ORIENTATION)
    if pixels is None or (pixels.shape, pixels.dtype) != expected:
        return None
    if mode == "RGB" and rgb_flag is None:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)
    return pixels


@functools.cache
def _imagecodecs() -> ModuleType | None:
    try:
        import imagecodecs
    except ImportError:  # the optional `fast-decode` extra is not installed: OpenCV decodes
        return None
    # libpng's warnings about ancillary chunks ("iCCP: too short") would reach stderr once per file through
    # imagecodecs' logger; a file that cannot be decoded still gets its one-line error from Pillow
    logging.getLogger("imagecodecs").setLevel(logging.ERROR)
    return imagecodecs if getattr(imagecodecs, "PNG", None) and imagecodecs.PNG.available else None
