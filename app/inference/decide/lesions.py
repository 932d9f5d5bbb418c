"""3D connected components ("lesions") of a label volume, per class: voxels, mL, bounding box and centroid.

Without scipy (not a dependency: the frozen build has no room for it), in time linear in the voxels: each slice's
components come from OpenCV's `connectedComponentsWithStats` (4-connected in the plane for 6-connectivity, 8 for
26), the components of adjacent slices that touch are joined by a vectorised union-find over their numbers, and
each 3D component's statistics are summed from its slices' (area, bounding box, centroid).

- 6-connectivity: voxels touch when they share a face (in the plane: 4 neighbours; across slices: the same pixel);
- 26-connectivity: a face, an edge or a corner (in the plane: 8 neighbours; across slices: the pixel's 3×3).

A label volume is `labels[k, row, col]` uint8 (app.io.volumes' native order); a component is of one label value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

CONNECTIVITIES = (6, 26)
_IN_PLANE = {6: 4, 26: 8}  # the plane's connectivity that the 3D one implies
# A lesion list longer than this is a noisy model's speckle, not lesions anyone reads (each record is ~1 kB of
# Python objects: a million components were a gigabyte); over it, one line and no list.
MAX_COMPONENTS = 10_000
# 2D pieces (each slice's components, summed as OpenCV numbers them) past which nothing is joined: their numpy
# statistics stay bounded (~60 bytes a piece) whatever the volume holds
MAX_PIECES = 1_000_000


class TooManyComponents(ValueError):
    """A class with more components than are listed; the message is the one line that says so."""


@dataclass(frozen=True)
class Lesion:
    """One 3D connected component of one class."""

    label: int  # the class value
    index: int  # 1-based component number within the class, largest first
    voxels: int
    ml: float | None  # None without geometry (no voxel size)
    bbox: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]  # (k0, k1), (r0, r1), (c0, c1), end exclusive
    centroid: tuple[float, float, float]  # (k, row, col), the mean of its voxels' indices


def connectivity_text(connectivity: int) -> str:
    """How a connectivity is stated to a reader: `26-connected (faces, edges and corners touch)`."""
    touch = "faces touch" if connectivity == 6 else "faces, edges and corners touch"
    return f"{connectivity}-connected ({touch})"


def lesions(labels: np.ndarray, *, voxel_ml: float | None, connectivity: int = 26,
            classes: Sequence[int] | None = None, most: int = MAX_COMPONENTS) -> tuple[Lesion, ...]:
    """The 3D connected components of each class in a `[D, H, W]` uint8 label volume, by class value, each class's
    largest first (equal sizes: by the bounding box's start, k0, r0, c0). `classes` None: every value present but
    0 (the background). `voxel_ml`: one voxel's volume in mL (Volume.voxel_ml), None: `ml` None.
    TooManyComponents (one line) when a class has more than `most` components, counted with numpy before a record
    is made (or more than MAX_PIECES pieces in its slices, before they are joined)."""
    volume = _checked(labels, connectivity)
    if volume.size == 0:
        return ()
    present = _present_per_slice(volume)
    anywhere = np.asarray(present.any(axis=0))
    wanted = np.flatnonzero(anywhere[1:]) + 1 if classes is None else np.asarray(classes, int)
    found: list[Lesion] = []
    for value in sorted({int(v) for v in wanted}):
        if 0 <= value < 256 and present[:, value].any():
            found += _class_lesions(volume, value, np.flatnonzero(present[:, value]), voxel_ml, connectivity, most)
    return tuple(found)


def _checked(labels: np.ndarray, connectivity: int) -> np.ndarray:
    if connectivity not in CONNECTIVITIES:
        raise ValueError(f"connectivity must be 6 or 26, got {connectivity}")
    if labels.ndim != 3:
        raise ValueError(f"a label volume is [D, H, W], got {labels.ndim} dimensions")
    if labels.dtype == np.bool_:
        return labels.view(np.uint8)
    if labels.dtype != np.uint8:
        raise ValueError(f"a label volume is uint8, got {labels.dtype}")
    return labels


def _present_per_slice(volume: np.ndarray) -> np.ndarray:
    """[D, 256] bool: which label values each slice holds (a histogram a slice, never the volume widened)."""
    present = np.zeros((volume.shape[0], 256), bool)
    for k, plane in enumerate(volume):
        present[k] = cv2.calcHist([np.ascontiguousarray(plane)], [0], None, [256], [0, 256]).ravel() > 0
    return present


@dataclass(frozen=True)
class _Plane:
    """One slice's components of one class, numbered from 1 inside the class's bounding box in that slice."""

    numbers: np.ndarray  # int32 [h, w] of the box
    mask: np.ndarray  # uint8 [h, w]: the class's pixels in the box
    top: int
    left: int


@dataclass(frozen=True)
class _Pieces:
    """Every slice's 2D components of one class, numbered 0.. through the volume in slice order, and which touch."""

    k: np.ndarray  # slice of each piece
    stats: np.ndarray  # [n, 5] OpenCV's (left, top, width, height, area), in the plane's coordinates
    centroids: np.ndarray  # [n, 2] (x, y) = (col, row)
    first: np.ndarray  # [E] and
    second: np.ndarray  # [E]: the pieces that touch across adjacent slices


def _class_lesions(volume: np.ndarray, value: int, slices: np.ndarray, voxel_ml: float | None,
                   connectivity: int, most: int) -> list[Lesion]:
    pieces = _pieces(volume, value, slices, connectivity, most)
    roots = _roots(len(pieces.k), pieces.first, pieces.second)
    count = int(np.unique(roots).size)  # the components, counted before a record is made
    if count > most:
        raise TooManyComponents(f"class {value} has {count} components ({connectivity}-connected), over the {most} "
                                "that are listed: no lesion list")
    return _components(value, pieces, roots, voxel_ml)


def _pieces(volume: np.ndarray, value: int, slices: np.ndarray, connectivity: int, most: int) -> _Pieces:
    ks, stats, centroids, first, second = [], [], [], [], []
    offset, previous, previous_k, previous_offset = 0, None, -2, 0
    for k in slices.tolist():
        plane, stat, centre = _plane(volume[k], value, connectivity)
        if offset + len(stat) > MAX_PIECES:
            raise TooManyComponents(f"class {value} has over {MAX_PIECES} pieces in its slices ({connectivity}-"
                                    f"connected), over the {most} components that are listed: no lesion list")
        ks.append(np.full(len(stat), k, np.int64))
        stats.append(stat)
        centroids.append(centre)
        if previous is not None and previous_k == k - 1:
            a, b = _touching(previous, plane, connectivity)
            first.append(a + previous_offset - 1)  # OpenCV numbers a slice's components from 1
            second.append(b + offset - 1)
        previous, previous_k, previous_offset = plane, k, offset
        offset += len(stat)
    return _Pieces(np.concatenate(ks), np.concatenate(stats), np.concatenate(centroids),
                   np.concatenate(first) if first else np.zeros(0, np.int64),
                   np.concatenate(second) if second else np.zeros(0, np.int64))


def _plane(image: np.ndarray, value: int, connectivity: int) -> tuple[_Plane, np.ndarray, np.ndarray]:
    """The class's components in one slice, labelled inside its bounding box only (a few lesions in a 512² CT
    slice are a small part of it), with their stats and centroids moved back to the plane's coordinates."""
    mask = (image == value).view(np.uint8)
    left, top, width, height = cv2.boundingRect(mask)
    box = np.ascontiguousarray(mask[top:top + height, left:left + width])
    _, numbers, stat, centre = cv2.connectedComponentsWithStats(box, connectivity=_IN_PLANE[connectivity],
                                                                ltype=cv2.CV_32S)
    stat = stat[1:].astype(np.int64)
    stat[:, cv2.CC_STAT_LEFT] += left
    stat[:, cv2.CC_STAT_TOP] += top
    return _Plane(numbers, box, top, left), stat, centre[1:] + np.array([left, top], np.float64)


def _touching(below: _Plane, above: _Plane, connectivity: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (component in `below`, component in `above`) pairs of adjacent slices' numbers that touch:
    a pixel of `above` and the same pixel of `below` (6), or one of its 3×3 (26). Only `above`'s foreground is
    visited, so the cost is its pixels, not the plane's."""
    height, width = below.numbers.shape
    points = cv2.findNonZero(above.mask).reshape(-1, 2)  # (x, y); a few times faster than np.nonzero
    ours = above.numbers[points[:, 1], points[:, 0]].astype(np.int64)
    rows = points[:, 1] + (above.top - below.top)  # in below's box
    cols = points[:, 0] + (above.left - below.left)
    base = int(ours.max()) + 1  # a pair's code: below's number * base + above's
    pairs: list[np.ndarray] = []
    for dr, dc in _offsets(connectivity):
        r, c = rows + dr, cols + dc
        inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
        theirs = below.numbers[r[inside], c[inside]].astype(np.int64)
        hit = theirs > 0
        pairs.append(theirs[hit] * base + ours[inside][hit])
    return np.divmod(np.unique(np.concatenate(pairs)), base)


def _offsets(connectivity: int) -> Iterator[tuple[int, int]]:
    if connectivity == 6:
        yield 0, 0
        return
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            yield dr, dc


def _roots(count: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Each piece's root: the smallest piece number it is joined to (a vectorised union-find: every round hooks
    each tree's root onto the smallest root it touches, then every piece jumps to its root)."""
    parent = np.arange(count, dtype=np.int64)
    while first.size:
        a, b = parent[first], parent[second]
        low, high = np.minimum(a, b), np.maximum(a, b)
        apart = low != high
        if not apart.any():
            break
        # an edge inside one tree stays inside it: dropped, so later rounds visit only the edges still between trees
        first, second, low, high = first[apart], second[apart], low[apart], high[apart]
        np.minimum.at(parent, high, low)  # roots hook onto smaller numbers only: no cycle
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
    return parent


def _components(value: int, pieces: _Pieces, roots: np.ndarray, voxel_ml: float | None) -> list[Lesion]:
    """The 3D components' statistics summed from their pieces, largest first (ties: by the box's start k0, r0, c0)."""
    tops, numbers = np.unique(roots, return_inverse=True)
    area = pieces.stats[:, cv2.CC_STAT_AREA]
    voxels = np.bincount(numbers, weights=area).astype(np.int64)
    low = [_reduce(np.minimum, numbers, len(tops), start) for start in _starts(pieces)]
    high = [_reduce(np.maximum, numbers, len(tops), end) for end in _ends(pieces)]
    weighted = [np.bincount(numbers, weights=area * axis) / voxels
                for axis in (pieces.k, pieces.centroids[:, 1], pieces.centroids[:, 0])]
    order = np.lexsort((low[2], low[1], low[0], -voxels))  # not by OpenCV's numbers: its parallel order is its own
    return [Lesion(value, n + 1, int(voxels[i]), None if voxel_ml is None else float(voxels[i]) * voxel_ml,
                   ((int(low[0][i]), int(high[0][i])), (int(low[1][i]), int(high[1][i])),
                    (int(low[2][i]), int(high[2][i]))),
                   (float(weighted[0][i]), float(weighted[1][i]), float(weighted[2][i])))
            for n, i in enumerate(order.tolist())]


def _starts(pieces: _Pieces) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return pieces.k, pieces.stats[:, cv2.CC_STAT_TOP], pieces.stats[:, cv2.CC_STAT_LEFT]


def _ends(pieces: _Pieces) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = pieces.stats
    return (pieces.k + 1, s[:, cv2.CC_STAT_TOP] + s[:, cv2.CC_STAT_HEIGHT],
            s[:, cv2.CC_STAT_LEFT] + s[:, cv2.CC_STAT_WIDTH])


def _reduce(ufunc: np.ufunc, numbers: np.ndarray, count: int, values: np.ndarray) -> np.ndarray:
    """`ufunc` (minimum or maximum) of `values` per component number."""
    out = np.empty(count, values.dtype)
    out[numbers] = values  # each component starts from one of its own pieces' values
    ufunc.at(out, numbers, values)
    return out
