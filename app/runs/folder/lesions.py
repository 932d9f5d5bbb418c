"""A volume's lesions for the report: its label volume's 3D connected components per class
(app.inference.decide.lesions,
at the volume rules' connectivity, VOLUME_CONNECTIVITY = 26), their count and the largest one's mL per class, and
the volume rules' verdict (`fail_if: {min_component_ml: …}`) on them.

Computed once per volume from the assembled label volume, whatever made it (a 2D model slice by slice, a 3D model),
so the columns and the verdict are a function of kept data, never a new model run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.inference.decide.lesions import Lesion, TooManyComponents, lesions
from app.inference.decide.verdict import Verdict
from app.inference.decide.volume import volume_verdict
from app.inference.model.rules import VOLUME_CONNECTIVITY
from app.inference.model.spec import ModelSpec
from app.io.volumes import Volume
from app.runs.outputs.report import unique_names


def component_columns(spec: ModelSpec) -> list[str]:
    """`connectivity`, then per class but the background (label 0) its component count and its largest
    component's mL: `components_<class>`, `largest_ml_<class>`; none for a classifier."""
    if spec.task != "segmentation":
        return []
    names = spec.class_names[1:]
    counts = unique_names([f"components_{name}" for name in names], reserved=set())
    largest = unique_names([f"largest_ml_{name}" for name in names], reserved=set())
    return ["connectivity", *counts, *largest]


def component_cells(spec: ModelSpec, found: Sequence[Lesion] | None, *, volume_row: bool) -> list[str]:
    """The component columns' values: the volume's row (`found` None: not counted, the cells empty), empty on a
    slice's row. The largest mL is empty without geometry, and 0 for a class without components."""
    if spec.task != "segmentation":
        return []
    labels = range(1, len(spec.class_names))
    if not volume_row or found is None:
        return [""] * (1 + 2 * len(labels))
    counts = [sum(1 for x in found if x.label == value) for value in labels]
    largest = [max((x for x in found if x.label == value), key=lambda x: x.voxels, default=None) for value in labels]
    mls = ["" if x is not None and x.ml is None else f"{0.0 if x is None else x.ml:.3f}" for x in largest]
    return [str(VOLUME_CONNECTIVITY), *(str(n) for n in counts), *mls]


def volume_components(volume: Volume, labels: np.ndarray | None) -> tuple[tuple[Lesion, ...] | None, str]:
    """The label volume's components at VOLUME_CONNECTIVITY with mL from the volume's spacing (`labels` None: no
    slice had a mask, none), or (None, why not): a 4D NIfTI's slices are (time, slice) pairs, which would join
    one time point's lesions to the next's."""
    if volume.time_points > 1:
        return None, f"a 4D NIfTI of {volume.time_points} time points: components are counted in 3D volumes only"
    if labels is None:
        return (), ""
    try:
        return lesions(labels, voxel_ml=volume.voxel_ml, connectivity=VOLUME_CONNECTIVITY), ""
    except TooManyComponents as exc:  # a noisy model's speckle: counted, not listed (the volume rules fail closed)
        return None, str(exc)


def components_notice(volume: Volume, found: Sequence[Lesion] | None, why_not: str) -> str | None:
    """The run's one line for a volume whose components were not listed although it is one 3D volume (too many
    of them: `<source>: class 1 has 32768 components …`), None otherwise (a 4D NIfTI is said where it is read)."""
    if found is not None or not why_not or volume.time_points > 1:
        return None
    return f"{volume.source}: {why_not}"


def components_verdict(spec: ModelSpec, found: Sequence[Lesion] | None, why_not: str) -> Verdict | None:
    """The spec's volume rules on the volume's components; None without such rules (or without a verdict)."""
    return None if spec.verdict is None else volume_verdict(spec.verdict, found, why_not=why_not)
