"""How two label volumes agree, as the import tests judge an imported model against its framework's own prediction:
Dice per label, a label neither side has left out (a short-trained fold may never predict one)."""

from __future__ import annotations

import numpy as np


def dice_per_label(ours: np.ndarray, theirs: np.ndarray) -> dict[int, float]:
    """{label: Dice} for every label above 0 present on either side."""
    scores = {}
    for label in range(1, int(max(ours.max(), theirs.max())) + 1):
        a, b = ours == label, theirs == label
        if a.any() or b.any():
            scores[label] = 2.0 * float((a & b).sum()) / float(a.sum() + b.sum())
    return scores
