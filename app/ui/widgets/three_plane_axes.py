"""Which native axes each pane of the three-plane view shows, and how (pure numpy, no Qt).

A volume is stored `[k, row, col]` (SegLens's native order) in whatever orientation it was acquired in: an axial CT
series, a sagittal MR, a NIfTI in neurological order. The panes show the patient's planes the way every reading
tool does, whatever the storage: axial with the patient's right on the screen's left and anterior at the top,
coronal with the right on the left and superior at the top, sagittal with anterior on the left and superior at the
top. Each native axis is matched to the patient axis it runs closest to (the affine's columns), and a pane is a
slice along one native axis, transposed and flipped as needed: numpy views, never a copy of the volume.
Without an affine the storage is taken as it is (slices, rows, columns) and no letters are shown.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from app.io.geometry import edge_labels

PLANES = ("axial", "coronal", "sagittal")
# RAS+ directions: the pane's normal, the screen's right and the screen's down, for a radiological display
_NORMAL = {"axial": 2, "coronal": 1, "sagittal": 0}  # the patient axis (x L-R, y P-A, z I-S) a pane steps along
_SCREEN = {"axial": ((-1.0, 0, 0), (0, -1.0, 0)),  # right → patient left, down → posterior
           "coronal": ((-1.0, 0, 0), (0, 0, -1.0)),  # right → patient left, down → inferior
           "sagittal": ((0, -1.0, 0), (0, 0, -1.0))}  # right → posterior, down → inferior
_NATIVE = {"axial": (0, 2, 1, False, False), "coronal": (1, 2, 0, False, False),  # no affine: as stored
           "sagittal": (2, 1, 0, False, False)}


@dataclass(frozen=True)
class PlaneAxes:
    """One pane: the native axis it steps through (`normal`: 0 = slice k, 1 = row, 2 = column), the native axes
    shown across (left → right) and down (top → bottom), and whether each is shown reversed."""

    name: str  # "axial", "coronal" or "sagittal"
    normal: int
    across: int
    down: int
    flip_across: bool = False
    flip_down: bool = False

    def view(self, volume: np.ndarray, index: int) -> np.ndarray:
        """The pane's 2D picture of `volume` ([D, H, W], or [D, H, W, ...]) at `index` along `normal`: rows =
        screen rows. A view into `volume` (strided, possibly reversed), not a copy."""
        where: list[slice | int] = [slice(None)] * 3
        where[self.normal] = index
        plane = volume[tuple(where)]
        if self.across < self.down:  # the remaining axes come in native order: rows must be `down`
            plane = np.swapaxes(plane, 0, 1)
        if self.flip_down:
            plane = plane[::-1]
        if self.flip_across:
            plane = plane[:, ::-1]
        return plane

    def screen_size(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """(width, height) in voxels of the pane's picture of a volume of `shape`."""
        return int(shape[self.across]), int(shape[self.down])

    def to_screen(self, point: tuple[int, int, int], shape: tuple[int, ...]) -> tuple[int, int]:
        """The (x, y) voxel of the pane's picture where native `point` (k, row, col) lies."""
        width, height = self.screen_size(shape)
        x, y = point[self.across], point[self.down]
        return (width - 1 - x if self.flip_across else x), (height - 1 - y if self.flip_down else y)

    def from_screen(self, point: tuple[int, int, int], x: int, y: int,
                    shape: tuple[int, ...]) -> tuple[int, int, int]:
        """`point` moved to the pane's voxel (x, y) (clamped inside), its own slice kept."""
        width, height = self.screen_size(shape)
        x, y = min(max(x, 0), width - 1), min(max(y, 0), height - 1)
        moved = list(point)
        moved[self.across] = width - 1 - x if self.flip_across else x
        moved[self.down] = height - 1 - y if self.flip_down else y
        return moved[0], moved[1], moved[2]

    def voxel_mm(self, spacing: tuple[float, float, float] | None) -> tuple[float, float]:
        """(width, height) of one screen voxel in mm: a coronal pane of an axial series is the slice step tall and
        the column spacing wide. (1, 1) without spacing."""
        if spacing is None:
            return 1.0, 1.0
        return float(spacing[self.across]), float(spacing[self.down])

    def letters(self, affine: np.ndarray | None) -> dict[str, str] | None:
        """Patient directions at the pane's edges ({"left": "R", "right": "L", "top": "A", "bottom": "P"} for
        axial), from the affine's columns as shown; None without geometry."""
        if affine is None:
            return None
        right = _direction(affine, self.across) * (-1.0 if self.flip_across else 1.0)
        down = _direction(affine, self.down) * (-1.0 if self.flip_down else 1.0)
        shown = np.eye(4)
        shown[:3, 0], shown[:3, 1] = right, down
        return edge_labels(shown)


def plane_axes(affine: np.ndarray | None) -> dict[str, PlaneAxes]:
    """The three panes' axes for a volume with `affine` ((column i, row j, slice k) → RAS+ mm; None: as stored)."""
    if affine is None:
        return {name: PlaneAxes(name, *_NATIVE[name]) for name in PLANES}
    patient_of = _match_axes(affine)  # native axis → the patient axis it runs closest to
    native_of = {patient: native for native, patient in enumerate(patient_of)}
    panes = {}
    for name in PLANES:
        right, down = (np.asarray(v, float) for v in _SCREEN[name])
        across, below = native_of[int(np.argmax(np.abs(right)))], native_of[int(np.argmax(np.abs(down)))]
        panes[name] = PlaneAxes(name, native_of[_NORMAL[name]], across, below,
                                flip_across=float(_direction(affine, across) @ right) < 0,
                                flip_down=float(_direction(affine, below) @ down) < 0)
    return panes


def _direction(affine: np.ndarray, native: int) -> np.ndarray:
    """The RAS+ unit direction of native axis `native` (0 = slice k: the affine's third column; 2 = column i:
    its first)."""
    column = np.asarray(affine, float)[:3, 2 - native]
    norm = float(np.linalg.norm(column))
    return column / norm if norm else column


def _match_axes(affine: np.ndarray) -> tuple[int, int, int]:
    """For native axes (0, 1, 2), the patient axes (0 = x, 1 = y, 2 = z) they follow: the one-to-one assignment
    with the largest summed |cosine| (an oblique series still gets three distinct planes)."""
    cosines = np.abs(np.stack([_direction(affine, n) for n in range(3)]))
    best = max(itertools.permutations(range(3)), key=lambda p: sum(cosines[n, p[n]] for n in range(3)))
    return best[0], best[1], best[2]
