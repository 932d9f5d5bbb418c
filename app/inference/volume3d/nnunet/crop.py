"""nnU-Net's crop to the non-zero region (`crop_to_nonzero` in nnunetv2/preprocessing/cropping): the voxels non-zero
in any channel, with their enclosed holes filled (scipy's `binary_fill_holes`: background not connected to the
volume's border through faces), and the bounding box of that mask.

Without scipy: the background's face-connected components are found slice by slice with OpenCV (4-connected in
the plane), joined across adjacent slices where the same pixel is background in both (a union-find over their
numbers), and a component is a hole when none of its pieces touches the border.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

Box = tuple[slice, slice, slice]


@dataclass(frozen=True)
class Crop:
    """The non-zero mask inside its box, and the box in the volume."""

    box: Box
    mask: np.ndarray  # bool [d, h, w]: inside the box, True where the volume (or an enclosed hole) is non-zero


def nonzero_crop(volume: np.ndarray) -> Crop:
    """The crop of a [C, D, H, W] volume (all of it when every voxel is zero, as nothing then is cropped)."""
    nonzero = np.any(volume != 0, axis=0)
    mask = fill_holes(nonzero)
    where = [np.flatnonzero(np.any(mask, axis=tuple(a for a in range(3) if a != axis))) for axis in range(3)]
    if any(len(w) == 0 for w in where):
        full = (slice(0, mask.shape[0]), slice(0, mask.shape[1]), slice(0, mask.shape[2]))
        return Crop(full, mask)
    box = (slice(int(where[0][0]), int(where[0][-1]) + 1), slice(int(where[1][0]), int(where[1][-1]) + 1),
           slice(int(where[2][0]), int(where[2][-1]) + 1))
    return Crop(box, mask[box])


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """`mask` (bool [D, H, W]) with every background region enclosed by it (face connectivity) set."""
    background = ~mask
    if not background.any():
        return np.array(mask, bool, copy=True)
    labels, counts, touching = _slice_pieces(background)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    first, second = _joins(labels, offsets, background)
    roots = _roots(int(offsets[-1]), first, second)
    outside = np.zeros(int(offsets[-1]), bool)
    np.logical_or.at(outside, roots[touching], True)
    filled: np.ndarray = mask.copy()
    for k in range(mask.shape[0]):
        pieces = labels[k]
        numbers = offsets[k] + pieces - 1
        hole = (pieces > 0) & ~outside[roots[np.maximum(numbers, 0)]]
        filled[k] |= hole
    return filled


def _slice_pieces(background: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per slice: its background pieces numbered from 1 (4-connected), how many, and the global numbers of the
    pieces that touch the volume's border (any piece of the first or last slice, or on a slice's edge)."""
    depth = background.shape[0]
    labels = np.zeros(background.shape, np.int32)
    counts = np.zeros(depth, np.int64)
    touching: list[np.ndarray] = []
    start = 0
    for k in range(depth):
        n, labels[k] = cv2.connectedComponents(background[k].astype(np.uint8), connectivity=4, ltype=cv2.CV_32S)
        counts[k] = n - 1
        if k in (0, depth - 1):
            edge = np.arange(1, n)
        else:
            plane = labels[k]
            edge = np.unique(np.concatenate([plane[0], plane[-1], plane[:, 0], plane[:, -1]]))
            edge = edge[edge > 0]
        touching.append(start + edge - 1)
        start += n - 1
    return labels, counts, np.concatenate(touching).astype(np.int64)


def _joins(labels: np.ndarray, offsets: np.ndarray, background: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of global piece numbers that share a pixel on adjacent slices."""
    first: list[np.ndarray] = []
    second: list[np.ndarray] = []
    for k in range(labels.shape[0] - 1):
        both = background[k] & background[k + 1]
        if both.any():
            pairs = np.unique(np.stack([labels[k][both], labels[k + 1][both]]), axis=1)
            first.append(offsets[k] + pairs[0] - 1)
            second.append(offsets[k + 1] + pairs[1] - 1)
    if not first:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(first).astype(np.int64), np.concatenate(second).astype(np.int64)


def _roots(count: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The smallest number in each joined group: labels propagated along the pairs with pointer jumping."""
    roots = np.arange(count, dtype=np.int64)
    while True:
        low = np.minimum(roots[first], roots[second])
        before = roots.copy()
        np.minimum.at(roots, first, low)
        np.minimum.at(roots, second, low)
        roots = roots[roots]
        if np.array_equal(roots, before):
            return roots
