"""What the DICOM exports share: the source datasets of a volume's slices, in the volume's order, and a dataset
written as one file, whole or not at all."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import ImageError, OutputError
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted
from app.io.files import atomic_write
from app.io.volumes import Volume

if TYPE_CHECKING:
    from pydicom import Dataset

DICOM_KINDS = ("dicom", "dicom-multiframe")


def require_dicom(volume: Volume, what: str) -> None:
    """Refuse, in one line, a volume without a DICOM source (NIfTI has no patient, study or instances)."""
    if volume.kind not in DICOM_KINDS:
        raise OutputError(f"{what} needs a DICOM source ({volume.source} is NIfTI)")


def source_datasets(volume: Volume) -> list[Dataset]:
    """The header of each slice's source file, in the volume's order (a multi-frame file is read once).

    Pixel data is not read: highdicom takes the geometry and UIDs from the headers only.
    """
    import pydicom

    read: dict[Path, Dataset] = {}
    for ref in volume.slices:
        if ref.path not in read:
            try:
                with open_untrusted(ref.path, limit=INPUT_FILE_LIMIT) as handle:  # a FIFO swapped in: refused
                    read[ref.path] = pydicom.dcmread(handle, stop_before_pixels=True)
            except Exception as exc:  # pydicom raises many types for a damaged file
                raise ImageError(f"{ref.path}: cannot read the source DICOM ({exc})") from exc
    return [read[ref.path] for ref in volume.slices]


def blinded(datasets: list[Dataset], pseudonym: str) -> list[Dataset]:
    """Copies of a volume's source headers for the DICOM writer under --anonymize: PatientName and PatientID the
    keyed pseudonym, every other identifying attribute (app.runs.privacy.ps315.IDENTIFYING) emptied. highdicom copies
    the
    patient and study modules from the headers it is given and quotes them in its warnings and log lines ('The
    string "SMITHSON" is unlikely…'): given these, nothing identifying ever enters it. The profile proper
    (app.runs.privacy.deidentify) then runs on what it built, as before. One copy per file (a multi-frame file's slices
    share it)."""
    import copy

    from app.runs.privacy.ps315 import IDENTIFYING
    from app.runs.privacy.pseudonyms import person_name

    copies: dict[int, Dataset] = {}
    for dataset in datasets:
        if id(dataset) in copies:
            continue
        blind = copy.deepcopy(dataset)
        for keyword in (k for keywords in IDENTIFYING.values() for k in keywords):
            if keyword in blind:
                setattr(blind, keyword, "")  # Type 2 where the writer copies it: present, empty
        blind.PatientName, blind.PatientID = person_name(pseudonym), pseudonym
        copies[id(dataset)] = blind
    return [copies[id(dataset)] for dataset in datasets]


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
