"""From a volume's native array to the axes a 3D model was trained on, and back: an axis permutation and flips.

A native array is `[k, j, i]` (slice, row, column) and `Volume.affine` maps (i, j, k) to RAS+ mm, so native axis a
is voxel axis 2 − a. Its letters (nibabel's `aff2axcodes`, the nearest patient axis of an oblique volume) say which
patient direction each array axis increases toward: a NIfTI in RAS+ is "SAR", an axial DICOM series "SPL".
A model's `axes` code ("RAS", "LPS", "SPL", …) names the direction of its tensor's D, H and W; "native" takes the
array as stored (nnU-Net's and SimpleITK's order), whatever its orientation.

Both directions are numpy views (transposes and negative strides): nothing is copied here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from app.errors import SegLensError

_OPPOSITE = {"R": "L", "L": "R", "A": "P", "P": "A", "S": "I", "I": "S"}
T = TypeVar("T", int, float)
_LINE = {"R": 0, "L": 0, "A": 1, "P": 1, "S": 2, "I": 2}  # the patient axis (x, y, z) a letter lies on


@dataclass(frozen=True)
class Orientation:
    """Tensor axis n (0 D, 1 H, 2 W) is native array axis `perm[n]`, reversed where `flip[n]`."""

    perm: tuple[int, int, int] = (0, 1, 2)
    flip: tuple[bool, bool, bool] = (False, False, False)

    @property
    def identity(self) -> bool:
        return self.perm == (0, 1, 2) and not any(self.flip)

    def to_model(self, array: np.ndarray) -> np.ndarray:
        """A view of `array` ([..., D, H, W] native) in the model's axes; leading axes (channels) kept."""
        lead = array.ndim - 3
        view = np.transpose(array, (*range(lead), *(lead + axis for axis in self.perm)))
        flipped = tuple(lead + n for n in range(3) if self.flip[n])
        return np.flip(view, flipped) if flipped else view

    def to_native(self, array: np.ndarray) -> np.ndarray:
        """A view of `array` ([..., d, h, w] in the model's axes) in the native array's axes."""
        lead = array.ndim - 3
        flipped = tuple(lead + n for n in range(3) if self.flip[n])
        view = np.flip(array, flipped) if flipped else array
        inverse = [self.perm.index(axis) for axis in range(3)]
        return np.transpose(view, (*range(lead), *(lead + n for n in inverse)))

    def model_order(self, values: tuple[T, T, T]) -> tuple[T, T, T]:
        """Per-native-axis values (a shape, a spacing) in the model's axis order."""
        return values[self.perm[0]], values[self.perm[1]], values[self.perm[2]]

    def native_order(self, values: tuple[T, T, T]) -> tuple[T, T, T]:
        """Per-model-axis values in the native array's axis order."""
        inverse = [self.perm.index(axis) for axis in range(3)]
        return values[inverse[0]], values[inverse[1]], values[inverse[2]]


def check_axes_code(axes: str) -> str:
    """"native", or a three-letter code naming each patient axis once (upper-cased); else SegLensError."""
    code = axes.strip()
    if code.lower() == "native":
        return "native"
    code = code.upper()
    if len(code) != 3 or any(c not in _LINE for c in code) or len({_LINE[c] for c in code}) != 3:
        raise SegLensError(f"input.axes: {axes!r} is not an orientation code (three letters, one of R/L, A/P and "
                           "S/I each, like RAS or LPS, or native)")
    return code


def native_codes(affine: np.ndarray) -> str:
    """The letters of the native array's axes (slice, row, column) from `Volume.affine`: "SAR", "SPL", …"""
    from nibabel.orientations import aff2axcodes

    voxel = aff2axcodes(np.asarray(affine, np.float64))  # for voxel axes (i, j, k)
    if any(letter is None for letter in voxel):
        raise SegLensError("the volume's affine is degenerate: an axis has no patient direction")
    return "".join(str(letter) for letter in reversed(voxel))


def orientation(axes: str, affine: np.ndarray | None) -> Orientation:
    """How the native array becomes the model's `axes` ("native": as stored)."""
    code = check_axes_code(axes)
    if code == "native":
        return Orientation()
    if affine is None:
        raise SegLensError(f"the 3D model expects its volumes in {code} orientation (input.axes), and this volume "
                           "has no geometry to orient it by")
    return between(native_codes(affine), code)


def between(native: str, model: str) -> Orientation:
    """The permutation and flips from an array whose axes point toward `native`'s letters to `model`'s."""
    perm: list[int] = []
    flip: list[bool] = []
    for letter in model:
        axis = next(a for a, have in enumerate(native) if _LINE[have] == _LINE[letter])
        perm.append(axis)
        flip.append(native[axis] == _OPPOSITE[letter])
    return Orientation((perm[0], perm[1], perm[2]), (flip[0], flip[1], flip[2]))
