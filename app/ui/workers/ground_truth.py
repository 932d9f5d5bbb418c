"""The shown image against its ground truth, on the inference worker: which reference, read and measured.

A corrected mask saved in the inputs' review folder is the image's reference first (what a person signed off);
else the reference folder chosen with File ▸ Compare with reference masks… (matched as `run --reference` does:
relative path and stem, app.io.references). Anything wrong (no reference, unreadable, another size, values that
are no class) is a one-line notice in the result, never an exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.errors import SegLensError
from app.inference.metrics import image_metrics
from app.io.references import ReferenceIndex, read_reference
from app.runs.metrics_report import Scored
from app.runs.review import find_corrected_mask, review_folder

if TYPE_CHECKING:
    from app.inference.labelmap import LabelMap


def compare(path: str, mask: np.ndarray | LabelMap, tuning, spec, indexes: dict[str, ReferenceIndex]
            ) -> tuple[Scored | None, np.ndarray | None]:
    """(the mask measured against the image's reference, the reference labels) — (None, None) when there is no
    reference to look for; (a Scored with its notice, None) when one was looked for and not usable. `mask` may
    be a result's LabelMap: its image-sized mask is made only when there is a reference to measure it against."""
    try:
        rel = Path(path).relative_to(tuning.input_root)
    except ValueError:
        return None, None
    corrected = find_corrected_mask(review_folder(Path(tuning.input_root)), rel.as_posix())
    found: Path | None
    if corrected is not None:
        found = corrected
    elif tuning.reference_root:
        index = indexes.get(tuning.reference_root)
        if index is None:
            index = indexes[tuning.reference_root] = ReferenceIndex(Path(tuning.reference_root))
        found, why = index.find(rel, Path(path))
        if found is None:
            return Scored("", None, f"{Path(path).name}: {why}"), None
    else:
        return None, None
    n_classes = spec.label_count
    try:
        reference = read_reference(found, n_classes)
    except SegLensError as exc:
        return Scored(str(found), None, str(exc)), None
    if not isinstance(mask, np.ndarray):
        mask = mask.full()
    if reference.shape != mask.shape:
        h, w = reference.shape
        return Scored(str(found), None, f"reference {found.name} is {w}×{h}, the image "
                                        f"{mask.shape[1]}×{mask.shape[0]}"), None
    return Scored(str(found), image_metrics(mask, reference, n_classes)), reference
