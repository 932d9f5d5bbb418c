"""A volume's result in the formats clinical and research systems read: DICOM SEG (the standard, via highdicom),
a NIfTI label volume (research pipelines), and a Secondary Capture series with the overlay burned in (for a
PACS that cannot show SEG). Each file is written whole or not at all (a temporary name, then renamed).

`labels` is always uint8 (depth, rows, columns) in the volume's slice order (app.io.volumes conventions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.io.volumes import Volume

EXPORTS = ("dicom-seg", "nifti", "sc")


@dataclass(frozen=True)
class Segment:
    """One class of the model as a segment: its label value in `labels`, name and display colour (RGB)."""

    value: int
    name: str
    color: tuple[int, int, int]


@dataclass(frozen=True)
class Algorithm:
    """What produced the segmentation (DICOM SEG's algorithm identification)."""

    name: str  # the model file's stem
    version: str  # the model's SHA-256 (first 16 hex digits)
    sha256: str
    software_version: str  # SegLens's version


def write_dicom_seg(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_path: Path, *,
                    algorithm: Algorithm) -> Path:
    """One binary DICOM SEG for a DICOM volume, referencing its source instances per frame."""
    raise NotImplementedError


def write_nifti_labels(volume: Volume, labels: np.ndarray, out_path: Path) -> Path:
    """A uint8 label volume with exactly the source's affine and shape (NIfTI input) or the DICOM geometry."""
    raise NotImplementedError


def write_secondary_capture(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], out_dir: Path, *,
                            display: Callable[[int], np.ndarray], opacity: float,
                            algorithm: Algorithm) -> list[Path]:
    """One Secondary Capture image per slice, overlay burned in, "NOT FOR DIAGNOSIS" banner, in a new series."""
    raise NotImplementedError
