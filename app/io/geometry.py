"""Volume geometry, pure numpy: DICOM plane → RAS affine, positions along a normal, patient-direction letters.

DICOM works in LPS (x to the patient's Left, y Posterior, z Superior); NIfTI and `Volume.affine` in RAS. Going
from one to the other negates x and y, which leaves dot products between two converted vectors unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])
_LETTERS = (("L", "R"), ("P", "A"), ("S", "I"))  # LPS axis → (letter of +, letter of −)
OBLIQUE_MIN = 0.3  # a direction component below this is too weak to name


def plane_normal(orientation: Sequence[float]) -> np.ndarray:
    """The slice normal (row cosines × column cosines) of an ImageOrientationPatient."""
    row, col = np.asarray(orientation[:3], float), np.asarray(orientation[3:6], float)
    return np.cross(row, col)


def dicom_affine(orientation: Sequence[float], first_position: Sequence[float], *, step: float,
                 pixel_spacing: Sequence[float]) -> np.ndarray:
    """The 4×4 (column i, row j, slice k) → RAS mm affine of a DICOM stack: LPS columns row_cos × column spacing,
    col_cos × row spacing, normal × step and the first slice's ImagePositionPatient, then x and y negated."""
    row, col = np.asarray(orientation[:3], float), np.asarray(orientation[3:6], float)
    lps = np.eye(4)
    lps[:3, 0] = row * float(pixel_spacing[1])
    lps[:3, 1] = col * float(pixel_spacing[0])
    lps[:3, 2] = plane_normal(orientation) * float(step)
    lps[:3, 3] = np.asarray(first_position, float)
    return _LPS_TO_RAS @ lps


def position_along(point_ras: np.ndarray, axis_ras: np.ndarray) -> float | None:
    """`point` projected on the unit `axis` in mm (None for a degenerate axis)."""
    norm = float(np.linalg.norm(axis_ras))
    return None if norm == 0 else float(np.dot(point_ras, axis_ras) / norm)


def direction_letters(vector_lps: Sequence[float]) -> str:
    """The patient direction of a vector: "L" for +x; oblique: up to two letters of components ≥ 0.3 (unit
    vector), strongest first ("LP"); "" for the zero vector."""
    v = np.asarray(vector_lps, float)
    norm = float(np.linalg.norm(v))
    if norm == 0:
        return ""
    v = v / norm
    order = sorted(range(3), key=lambda axis: -abs(v[axis]))
    letters = [_LETTERS[a][0 if v[a] > 0 else 1] for a in order if abs(v[a]) >= OBLIQUE_MIN]
    return "".join(letters[:2])


def edge_labels(affine_ras: np.ndarray) -> dict[str, str] | None:
    """Letters at the screen's edges for a slice shown as rows × columns: right = the column-increasing
    direction (the affine's i axis), bottom = the row-increasing direction (its j axis), left/top opposite."""
    to_lps = np.array([-1.0, -1.0, 1.0])
    across, down = affine_ras[:3, 0] * to_lps, affine_ras[:3, 1] * to_lps
    right, bottom = direction_letters(across), direction_letters(down)
    if not right or not bottom:
        return None
    return {"left": direction_letters(-across), "right": right, "top": direction_letters(-down), "bottom": bottom}


# What a header may say of where a voxel is and how big it is. Beyond these it is a damaged or hostile file, and a
# volume computed from it is nonsense (0 mL from a PixelSpacing of 0, a 300-digit cell from a position of 1e306):
# such a tag is refused and the volume read without geometry.
MAX_COORDINATE_MM = 1e5  # 100 m from the scanner's origin: no patient lies farther
SPACING_MM = (1e-6, 1e3)  # a voxel side from 1 nm (microscopy) to 1 m
_UNIT = 0.05  # how far a direction cosine vector's length may be from 1, and two of them from perpendicular


def numbers_text(values: Sequence[float]) -> str:
    """`(0, 0.8)`, `(1e+306, 0, 0)`, `(nan, 1, 2)`: a tag's values as an error line quotes them (never 300 digits)."""
    return "(" + ", ".join(f"{float(v):g}" for v in values) + ")"


def position_problem(values: Sequence[float]) -> str:
    """Why an ImagePositionPatient (LPS mm) cannot be used, or ""."""
    if len(values) != 3:
        return f"is {len(values)} numbers, not 3"
    if not all(math.isfinite(v) for v in values):
        return "is not three finite numbers"
    if max(abs(v) for v in values) > MAX_COORDINATE_MM:
        return f"lies over {MAX_COORDINATE_MM / 1000:g} m from the origin"
    return ""


def spacing_problem(values: Sequence[float], count: int = 2) -> str:
    """Why a PixelSpacing (or any voxel size in mm) cannot be used, or ""."""
    low, high = SPACING_MM
    if len(values) != count:
        return f"is {len(values)} numbers, not {count}"
    if not all(math.isfinite(v) for v in values):
        return "is not finite"
    if not all(low <= v <= high for v in values):
        return f"is not a size from {low:g} to {high:g} mm"
    return ""


def orientation_problem(values: Sequence[float]) -> str:
    """Why an ImageOrientationPatient (two direction cosine vectors) cannot be used, or ""."""
    if len(values) != 6:
        return f"is {len(values)} numbers, not 6"
    if not all(math.isfinite(v) for v in values):
        return "is not six finite numbers"
    row, col = np.asarray(values[:3], float), np.asarray(values[3:6], float)
    if abs(np.linalg.norm(row) - 1) > _UNIT or abs(np.linalg.norm(col) - 1) > _UNIT:
        return "is not two unit vectors"
    if abs(float(np.dot(row, col))) > _UNIT:
        return "is not two perpendicular directions"
    return ""


def affine_problem(affine: np.ndarray) -> str:
    """Why a 4×4 voxel → mm affine cannot be used (not finite, a voxel axis of no size or beyond 1 m, the origin
    beyond 100 m), or ""."""
    matrix = np.asarray(affine, float)
    if matrix.shape != (4, 4) or not np.isfinite(matrix).all():
        return "is not a finite 4×4 matrix"
    sides = np.linalg.norm(matrix[:3, :3], axis=0)
    problem = spacing_problem([float(s) for s in sides], 3)
    if problem:
        return f"has voxel sides {numbers_text(sides)} that {problem.removeprefix('is ')}"
    far = position_problem(matrix[:3, 3].tolist())
    return f"places voxel 0 over {MAX_COORDINATE_MM / 1000:g} m from the origin" if far else ""


class RefusedTags:
    """The geometry tags refused while a volume's headers are read: one line per tag, naming the first file that
    holds such a value and how many more do (a damaged series repeats its damage in every file)."""

    def __init__(self, consequence: str) -> None:
        self._consequence = consequence  # what a refusal means for the volume, ending each line
        self._first: dict[str, str] = {}
        self._more: dict[str, int] = {}

    def numbers(self, value: Any, where: str, tag: str, problem_of: Callable[[tuple[float, ...]], str],
                ) -> tuple[float, ...] | None:
        """The tag's numbers, or None: absent (silently), or refused (its line kept for the volume's warnings)."""
        if value is None or value == "":
            return None
        try:
            numbers = tuple(float(v) for v in value) if many_numbers(value) else (float(value),)
        except (TypeError, ValueError, OverflowError):
            self._refuse(tag, f"{where}: {tag} is not numbers; {self._consequence}")
            return None
        problem = problem_of(numbers)
        if problem:
            self._refuse(tag, f"{where}: {tag} {numbers_text(numbers)} {problem}; {self._consequence}")
            return None
        return numbers

    def _refuse(self, tag: str, line: str) -> None:
        if tag in self._first:
            self._more[tag] = self._more.get(tag, 0) + 1
        else:
            self._first[tag] = line

    def lines(self) -> list[str]:
        return [line + (f" (and {self._more[tag]} more file{'s' * (self._more[tag] > 1)})"
                        if self._more.get(tag) else "") for tag, line in self._first.items()]


def many_numbers(value: Any) -> bool:
    """Whether a header value holds several numbers (pydicom's MultiValue, a list), not one (a DSfloat, a str)."""
    return not isinstance(value, (str, bytes, int, float)) and hasattr(value, "__iter__")
