"""Files that appear whole or not at all, and PNG bytes: what every writer of SegLens uses.

Files are written to a temporary name in the target folder and renamed into place (atomic on POSIX and
Windows), so a crash or cancel never leaves a half-written PNG that looks complete.
"""

from __future__ import annotations

import io
import os
import zlib
from pathlib import Path
from typing import BinaryIO

import cv2
import numpy as np

from app.errors import OutputError
from app.guard.shared import TEMPORARY_PREFIX as TEMPORARY_PREFIX  # the writing gate's, re-exported for the writers
from app.guard.shared import atomic_write as atomic_write
from app.guard.shared import create_temporary as create_temporary
from app.guard.shared import remove_stale_temporaries as remove_stale_temporaries
from app.guard.shared import sync_folder as sync_folder
from app.guard.shared import whole_folder as whole_folder
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the empty IEND chunk every complete PNG ends with
_TEXT_KINDS = (b"tEXt", b"zTXt", b"iTXt")
HASHED_FILE_LIMIT = 1 << 40  # hashed a block at a time: only what is not a regular file is refused
MAX_TEXT_BYTES = 16 << 20  # one text item (SegLens's provenance is a few KB)


def is_complete_png(path: Path) -> bool:
    """Whether `path` is a regular file holding a whole PNG: signature, a valid IHDR and the IEND at its end.

    Cheap (two small reads, no decoding): what --resume checks on every output it trusts. It catches the empty
    and cut-short files a crash or a full disk leaves, not a bit flipped inside the image data.
    """
    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:  # a folder, FIFO or device: refused
            head = handle.read(33)
            handle.seek(-len(_PNG_END), os.SEEK_END)
            tail = handle.read()
    except OSError:  # missing, unreadable, or shorter than the IEND chunk (the seek fails)
        return False
    ihdr_ok = head[8:16] == b"\x00\x00\x00\x0dIHDR" and zlib.crc32(head[12:29]) == int.from_bytes(head[29:33], "big")
    return head[:8] == _PNG_SIGNATURE and ihdr_ok and tail == _PNG_END


def encode_png(pixels: np.ndarray) -> bytes:
    """PNG bytes of a uint8 gray (label mask), uint16 gray (probabilities) or RGB array, at zlib level 1 with a
    fixed row filter.

    libpng's default adaptive filtering costs more than the compression itself: a 1920×1080 mask took ~25 ms.
    Masks are flat runs of labels (no filter, run-length matching: ~4 ms and a third of the size); RGB
    overlays are photographs (the Sub filter: half the time of adaptive filtering, the same size).
    """
    array = cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR) if pixels.ndim == 3 else pixels
    params = [cv2.IMWRITE_PNG_COMPRESSION, 1]
    smooth = pixels.ndim == 3 or pixels.dtype == np.uint16  # 16-bit probabilities vary like a photograph
    if hasattr(cv2, "IMWRITE_PNG_FILTER"):  # OpenCV >= 4.11
        params += ([cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB] if smooth else
                   [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE,
                    cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE])
    ok, buffer = cv2.imencode(".png", array, params)
    if not ok:
        raise OutputError("PNG encoding failed")
    return buffer.tobytes()


def png_with_text(png: bytes, text: dict[str, str]) -> bytes:
    """`png` with one text chunk per item inserted right after IHDR: `tEXt` when the value is Latin-1, `iTXt`
    (uncompressed UTF-8) otherwise. The pixel data is untouched: a bytes concat, not a re-encode.

    OpenCV's imencode cannot write text chunks; readers (Pillow's `Image.open(p).text`, exiftool, `png_text`)
    find them wherever they are, and before IDAT is where the PNG spec prefers them.
    """
    if png[:8] != _PNG_SIGNATURE or png[12:16] != b"IHDR":
        raise ValueError("not a PNG (no signature and IHDR)")
    end_of_ihdr = 8 + 12 + int.from_bytes(png[8:12], "big")
    chunks = b"".join(_text_chunk(key, value) for key, value in text.items())
    return png[:end_of_ihdr] + chunks + png[end_of_ihdr:]


def _text_chunk(key: str, value: str) -> bytes:
    keyword = key.encode("latin-1")  # a keyword is 1-79 Latin-1 characters, no NUL, no edge spaces
    if not 0 < len(keyword) < 80 or b"\0" in keyword or key != key.strip():
        raise ValueError(f"invalid PNG text keyword {key!r}")
    try:
        kind, data = b"tEXt", keyword + b"\0" + value.encode("latin-1")
    except UnicodeEncodeError:  # flag 0 (uncompressed), method 0, empty language tag, empty translated keyword
        # a lone surrogate (a file name's non-UTF-8 byte) as `\udce9`: the text stays UTF-8, and inside JSON (the
        # provenance) that is JSON's own escape, read back as the name it was
        kind, data = b"iTXt", keyword + b"\0\0\0\0\0" + value.encode("utf-8", "backslashreplace")
    return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")


def png_text(source: bytes | Path) -> dict[str, str]:
    """The `tEXt`, `zTXt` and `iTXt` items of a PNG (bytes or a file), in file order; chunks whose CRC does
    not match are skipped. What tests and tools read SegLens's provenance back with. A file is read chunk header
    by chunk header through app.guard.untrusted (the pixel data skipped, not loaded: a sparse giant costs
    nothing), and a compressed item is inflated only up to MAX_TEXT_BYTES (ValueError past it)."""
    if isinstance(source, bytes):
        return _text_items(io.BytesIO(source))
    with open_untrusted(source, limit=INPUT_FILE_LIMIT) as handle:  # a FIFO or a device: refused
        return _text_items(handle)


def _text_items(handle: BinaryIO) -> dict[str, str]:
    if handle.read(8) != _PNG_SIGNATURE:
        raise ValueError("not a PNG")
    items: dict[str, str] = {}
    while len(head := handle.read(8)) == 8:
        length, kind = int.from_bytes(head[:4], "big"), head[4:]
        if kind == b"IEND":
            break
        if kind not in _TEXT_KINDS or length > MAX_TEXT_BYTES:
            handle.seek(length + 4, os.SEEK_CUR)
            continue
        body, crc = handle.read(length), handle.read(4)
        if len(crc) < 4:
            break
        if zlib.crc32(kind + body) == int.from_bytes(crc, "big"):
            key, _, rest = body.partition(b"\0")
            items[key.decode("latin-1")] = _text_value(kind, rest)
    return items


def _text_value(kind: bytes, rest: bytes) -> str:
    if kind == b"tEXt":
        return rest.decode("latin-1")
    if kind == b"zTXt":  # compression method byte, then zlib data
        return _inflate(rest[1:]).decode("latin-1")
    compressed, text = rest[0], rest[2:].split(b"\0", 2)[-1]  # iTXt: flag, method, language\0, translated\0
    return (_inflate(text) if compressed else text).decode("utf-8")


def _inflate(data: bytes) -> bytes:
    """zlib data inflated to at most MAX_TEXT_BYTES (a few KB can expand to gigabytes)."""
    inflater = zlib.decompressobj()
    text = inflater.decompress(data, MAX_TEXT_BYTES)
    if inflater.unconsumed_tail:
        raise ValueError(f"a compressed text item expands past {MAX_TEXT_BYTES >> 20} MiB")
    return text


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in 1 MiB blocks (models are hundreds of MB)."""
    import hashlib

    digest = hashlib.sha256()
    with open_untrusted(path, limit=HASHED_FILE_LIMIT) as handle:  # a FIFO or a device: refused, never waited on
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
