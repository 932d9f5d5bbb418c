"""What the DICOM exports share: the source datasets of a volume's slices, in the volume's order, and a dataset
written as one file, whole or not at all."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import OutputError
from app.io.files import atomic_write
from app.io.volumes import DICOM_KINDS, Volume

if TYPE_CHECKING:
    from pydicom import Dataset

def require_dicom(volume: Volume, what: str) -> None:
    """Refuse, in one line, a volume without a DICOM source (NIfTI has no patient, study or instances)."""
    if volume.kind not in DICOM_KINDS:
        raise OutputError(f"{what} needs a DICOM source ({volume.source} is NIfTI)")


def save_dataset(dataset: Dataset, path: Path) -> Path:
    """Write a DICOM dataset (with its file meta) to `path` atomically; returns `path`."""
    buffer = io.BytesIO()
    dataset.save_as(buffer, enforce_file_format=True)
    atomic_write(path, buffer.getvalue())
    return path


def source_series_number(datasets: list[Dataset]) -> int:
    """The source's SeriesNumber (0 when absent): derived series are numbered after it."""
    value = datasets[0].get("SeriesNumber") if datasets else None
    return int(value) if value not in (None, "") else 0
