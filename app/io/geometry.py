"""Volume geometry, pure numpy: DICOM plane → RAS affine, positions along a normal, patient-direction letters.

DICOM works in LPS (x to the patient's Left, y Posterior, z Superior); NIfTI and `Volume.affine` in RAS. Going
from one to the other negates x and y, which leaves dot products between two converted vectors unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

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
