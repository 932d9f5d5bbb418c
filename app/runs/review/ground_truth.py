"""Which reference applies to an image, read and measured: the viewer's ground truth, for the picture shown and for
every row of its review report.

A corrected mask saved in the inputs' review folder is the image's reference first (what a person signed off);
else a reference folder (the viewer's File ▸ Compare with reference masks…), matched as `run --reference` does:
relative path and stem (app.io.references). Anything wrong (no reference, unreadable, another size, values that
are no class) is a one-line notice in the Scored, never an exception. Light to import (the viewer's worker holds
a References from its start): numpy and the readers load with the first image measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.inference.image.labelmap import LabelMap
    from app.inference.model.spec import ModelSpec
    from app.io.discover import InputFile
    from app.io.references import ReferenceIndex
    from app.runs.folder.metrics import Scored
    from app.runs.review.items import MetricsFn


@dataclass(frozen=True)
class GroundTruth:
    """Where an image's reference is looked for: `input_root`, the inputs' folder (its review folder's corrected
    masks come first; None: no reference is looked for), and `reference_root`, a folder of reference masks."""

    input_root: Path | None
    reference_root: Path | None = None


class References:
    """The reference of each image, its folder of reference masks walked once (kept for the next images: one
    instance lives as long as the viewer's worker). Not thread-safe: used from one thread."""

    def __init__(self) -> None:
        self._indexes: dict[Path, ReferenceIndex] = {}

    def compare(self, path: str | Path, mask: np.ndarray | LabelMap, spec: ModelSpec, truth: GroundTruth, *,
                frame: int | None = None) -> tuple[Scored | None, np.ndarray | None]:
        """(the mask measured against the image's reference, the reference labels) — (None, None) when there is
        no reference to look for; (a Scored with its notice, None) when one was looked for and not usable.
        `mask` may be a result's LabelMap: its image-sized mask is made only when there is a reference. `frame`:
        the mask is slice `frame` of a volume (app.runs.review.log.picture_frame; None: a one-frame picture), measured
        against that slice's own correction, else the reference folder's mask named for that slice (a SEG read
        back); a reference folder's one mask per image is no slice's."""
        from app.runs.folder.metrics import Scored
        from app.runs.review.log import find_corrected_mask, review_folder

        if truth.input_root is None:
            return None, None
        try:
            rel = Path(path).relative_to(truth.input_root)
        except ValueError:
            return None, None
        found = find_corrected_mask(review_folder(truth.input_root), rel.as_posix(), frame)
        if found is None and truth.reference_root is not None and frame is not None:
            found = _slice_reference(truth.reference_root, rel.as_posix(), frame)
        if found is None and truth.reference_root is not None and frame is None:
            found, why = self._index(truth.reference_root).find(rel, Path(path))
            if found is None:
                return Scored("", None, f"{Path(path).name}: {why}"), None
        if found is None:
            return None, None
        return _measured(found, mask, spec.label_count)

    def metrics(self, spec: ModelSpec, truth: GroundTruth) -> MetricsFn:
        """IoU and Dice of an input's mask against its reference, for app.runs.review.items (None: none, or
        not usable)."""

        def measure(item: InputFile, mask: np.ndarray, frame: int | None = None) -> dict[str, float] | None:
            scored, _ = self.compare(item.path, mask, spec, truth, frame=frame)
            if scored is None or scored.metrics is None:
                return None
            return {"iou": scored.metrics.iou, "dice": scored.metrics.dice}

        return measure

    def _index(self, root: Path) -> ReferenceIndex:
        from app.io.references import ReferenceIndex

        index = self._indexes.get(root)
        if index is None:
            index = self._indexes[root] = ReferenceIndex(root)
        return index


def _slice_reference(root: Path, rel: str, frame: int) -> Path | None:
    """A volume's slice reference in a reference folder, named as a review folder names a slice's correction
    (`<name>_slice0007_mask.png`): what a DICOM SEG retrieved over its source series is written as
    (app.ui.workers.pacs_worker); a reference folder's one mask per image is no slice's."""
    from app.runs.review.log import corrected_mask_path

    path = corrected_mask_path(root, rel, frame)
    return path if path.is_file() else None


def _measured(found: Path, mask: np.ndarray | LabelMap, n_classes: int) -> tuple[Scored, np.ndarray | None]:
    """`mask` against the reference in `found`, or the notice saying why it cannot be measured."""
    import numpy as np

    from app.errors import SegLensError
    from app.inference.decide.metrics import image_metrics
    from app.io.references import read_reference
    from app.runs.folder.metrics import Scored

    try:
        reference = read_reference(found, n_classes)
    except SegLensError as exc:
        return Scored(str(found), None, str(exc)), None
    labels = mask if isinstance(mask, np.ndarray) else mask.full()
    if reference.shape != labels.shape:
        h, w = reference.shape
        return Scored(str(found), None, f"reference {found.name} is {w}×{h}, the image "
                                        f"{labels.shape[1]}×{labels.shape[0]}"), None
    return Scored(str(found), image_metrics(labels, reference, n_classes)), reference
