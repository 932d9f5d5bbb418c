"""COCO's run-length masks: a bool mask read in column-major order as alternating runs (zeros first), and the
compressed string form COCO writes them in (pycocotools' `rleToString` / `rleFrString`: each count, after the third
less the count two before it, in 5-bit groups of a LEB128-like code, one character 48–111 per group).

Pure numpy; pycocotools is a test-only reference. Reading a run-length mask someone else wrote is bounded: the
string's length, counts that are non-negative and fill exactly the image's pixels.
"""

from __future__ import annotations

import numpy as np

from app.inference.model.instances import PixelBox


class RleRefused(ValueError):
    """The run-length mask cannot be read; the message says why in a few words."""


def runs(mask: np.ndarray) -> list[int]:
    """The run lengths of a 2D bool mask in column-major order, the first run of zeros (0 when it starts True)."""
    flat = np.asarray(mask, dtype=bool).ravel(order="F")
    if flat.size == 0:
        return [0]
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    edges = np.concatenate(([0], changes, [flat.size]))
    lengths = np.diff(edges).tolist()
    return [0, *lengths] if flat[0] else lengths


def encode(counts: list[int]) -> str:
    """COCO's compressed string of run lengths."""
    out: list[str] = []
    for i, count in enumerate(counts):
        x = count - counts[i - 2] if i > 2 else count
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | 0x20 if more else c) + 48))
    return "".join(out)


def decode(text: str, *, most: int) -> list[int]:
    """The run lengths in COCO's compressed string; RleRefused for a character outside 48–111, a count cut short,
    a negative count or more than `most` counts (an image of n pixels has at most n + 1 runs)."""
    counts: list[int] = []
    x = k = 0
    for char in text:
        c = ord(char) - 48
        if not 0 <= c < 64:
            raise RleRefused(f"character {char!r} is not of COCO's run-length code")
        if k >= 12:
            raise RleRefused("a count longer than 60 bits")
        x |= (c & 0x1F) << (5 * k)
        k += 1
        if c & 0x20:
            continue
        if c & 0x10:
            x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        if x < 0:
            raise RleRefused("a negative run length")
        counts.append(x)
        if len(counts) > most:
            raise RleRefused(f"more than {most:,} runs")
        x = k = 0
    if k:
        raise RleRefused("the last count is cut short")
    return counts


def to_rle(mask: np.ndarray) -> dict[str, object]:
    """The mask as COCO's compressed run-length dict: {"size": [h, w], "counts": "…"}."""
    h, w = mask.shape
    return {"size": [int(h), int(w)], "counts": encode(runs(mask))}


def from_counts(counts: list[int], image_hw: tuple[int, int]) -> np.ndarray:
    """The bool mask [h, w] of run lengths that must fill the image exactly (RleRefused otherwise)."""
    h, w = image_hw
    if any(c < 0 for c in counts):
        raise RleRefused("a negative run length")
    if sum(counts) != h * w:
        raise RleRefused(f"the runs hold {sum(counts)} pixels, the image {h * w}")
    values = np.arange(len(counts)) % 2 == 1
    flat: np.ndarray = np.repeat(values, np.asarray(counts, dtype=np.int64))
    mask: np.ndarray = flat.reshape((w, h)).T
    return mask


def cropped_counts(counts: list[int], image_hw: tuple[int, int]) -> tuple[np.ndarray, PixelBox] | None:
    """`from_counts` cut to its True pixels' bounds (as `crop`), never made at the image's size: only the columns
    its runs of ones reach are. None when empty."""
    h, w = image_hw
    if any(c < 0 for c in counts):
        raise RleRefused("a negative run length")
    if sum(counts) != h * w:
        raise RleRefused(f"the runs hold {sum(counts)} pixels, the image {h * w}")
    ends = np.cumsum(np.asarray(counts, dtype=np.int64))
    starts = ends - np.asarray(counts, dtype=np.int64)
    ones = (np.arange(len(counts)) % 2 == 1) & (ends > starts)
    if not ones.any():
        return None
    return columns_from_toggles(np.concatenate([starts[ones], ends[ones]]), h,
                                int(starts[ones].min()) // h, int(ends[ones].max() - 1) // h)


def columns_from_toggles(positions: np.ndarray, h: int, first: int, last: int) -> tuple[np.ndarray, PixelBox] | None:
    """The mask whose value flips at each of `positions` (column-major flat indices; 0 before the first, every
    pixel before column `first` 0), made for columns `first`…`last` alone and cut to its True pixels' bounds."""
    base = first * h
    size = (last - first + 1) * h
    inside = positions[(positions >= base) & (positions < base + size)] - base
    toggles = np.zeros(size, dtype=np.uint8)
    np.bitwise_xor.at(toggles, inside, 1)
    block = (np.cumsum(toggles, dtype=np.uint8) & 1).astype(bool).reshape((last - first + 1, h)).T
    found = crop(block)
    if found is None:
        return None
    mask, (x0, y0, x1, y1) = found
    return mask, (x0 + first, y0, x1 + first, y1)


def crop(mask: np.ndarray) -> tuple[np.ndarray, PixelBox] | None:
    """The mask cut to its True pixels' bounds and those bounds (x0, y0, x1, y1, end-exclusive); None when empty."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    y0, y1, x0, x1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    return np.ascontiguousarray(mask[y0:y1, x0:x1]), (x0, y0, x1, y1)
