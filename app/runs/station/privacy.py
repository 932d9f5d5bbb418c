"""A station's outputs without patient names: the frame ids, error lines and copies that leave a station.

A station file's `anonymize` (`watch … --anonymize`) says which frames go by a pseudonym:
- `true`: every file's frame;
- absent (the default): a DICOM or NIfTI file's frame only (a DICOM by its extension or its 'DICM' marker, as the
  watch folder takes it): a hospital's scan dropped into a station set up for parts is not shared under its name,
  as `run` de-identifies by default where the list holds a volume; a part's photo keeps its name;
- `false`: none (an industrial line whose DICOM — DICONDE — names no patient).
A camera's or a video's frame ids are counters: they name nobody.

A private frame's id — StationVerdict.frame_id, so the log, the MQTT payload, OPC UA's FrameId, the names under
results/, ng/, review/ and error/ — is the name `seglens-cli run --anonymize` gives that file as an image of the
watched folder, `images/img-<16 hex digits>` (an HMAC of its path relative to the watched folder under this
workstation's pseudonym key, app.runs.privacy.pseudonyms: the same name after a restart, meaningless without the key),
followed by its extension when it is one SegLens reads (`.png`, `.dcm`, `.nii.gz`; anything else could be a
word of a name). An ERROR line names it by that id; a line still holding a word of its path or its patient's name
or ID is withheld. A station judges each DICOM file as one image (a series arrives file by file), so each gets its
own image pseudonym, not run's patient/study/series folders.

The copies of a private frame (app.runs.station.sinks.folder): a DICOM file is de-identified as `run --export source`
de-identifies the source series (app.runs.privacy.deidentify: PS3.15 Basic Profile through dicognito, the patient's
keyed pseudonym, keyed UIDs), then searched for the source's identifying values (app.runs.privacy.check) and removed if
one is still there; a DICOM that cannot be read, or says its pixels carry burned-in annotation, is not copied (one
line in the log). A NIfTI file is not copied (its header's free text and extensions are not de-identified for a
single file). An image's copy is its bytes. The station's own journal (station-journal.jsonl) keeps the real
relative path: it is the station's state in its output folder, how it knows a file is done, not an output for
others (docs/SECURITY.md).
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from app.errors import SegLensError
from app.io.dicom import DICOM_EXTENSIONS
from app.io.discover import IMAGE_EXTENSIONS, InputFile
from app.runs.privacy.names import identifying_words, pseudonymous_path

if TYPE_CHECKING:
    from pydicom import Dataset

    from app.io.sources import Frame
    from app.runs.privacy.check import Identifying

log = logging.getLogger(__name__)

NIFTI_SUFFIXES = (".nii", ".nii.gz")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Shareable:
    """A copy's bytes, and what must not be found in it once written (a de-identified DICOM's source values)."""

    data: bytes
    identifying: Identifying | None = None


@dataclass(frozen=True)
class StationPrivacy:
    """Which frames go by their pseudonym (`anonymize`: True, None for DICOM and NIfTI only, False) and the key."""

    anonymize: bool | None
    key: bytes

    def private(self, frame: Frame) -> bool:
        """Whether `frame` goes by its pseudonym (see the module's docstring)."""
        if frame.path is None or self.anonymize is False:
            return False
        return self.anonymize is True or medical_kind(frame.path) is not None

    def outward(self, frame: Frame, state: str, reason: str) -> tuple[str, str]:
        """The frame's id and reason as they leave the station."""
        if not self.private(frame):
            return frame.id, reason
        name = pseudonymous_id(frame.id, self.key)
        if state != "ERROR":
            return name, reason  # a rule's reason ("review: score 0.7 > 0.56") names no input
        return name, _redacted(frame, name, reason.replace(frame.id, name))

    def shareable(self, path: Path, data: bytes) -> Shareable | None:
        """What the output folder may keep of the input at `path` (its bytes `data`): a DICOM de-identified, an
        image as it is; None for nothing (a NIfTI, a DICOM that cannot be de-identified)."""
        kind = medical_kind(path, data)
        if self.anonymize is False or kind is None:
            return Shareable(data)
        if kind == "nifti":
            log.info("folder sink: a NIfTI input is not copied under anonymize (its header is not de-identified)")
            return None
        try:
            return deidentified_dicom(data, self.key)
        except SegLensError as exc:
            log.warning("folder sink: a DICOM input not copied: %s", exc)  # names no value, no path
            return None


def station_privacy(anonymize: bool | None) -> StationPrivacy | None:
    """The StationPrivacy of a station file's `anonymize` (None when off), the workstation's key read (or made)
    once: PseudonymKeyError, one line, when it is unusable."""
    if anonymize is False:
        return None
    from app.runs.privacy.pseudonyms import pseudonym_key

    return StationPrivacy(anonymize, pseudonym_key())


def pseudonymous_id(frame_id: str, key: bytes) -> str:
    """`images/img-<keyed id>` (what `run --anonymize` names the image at `frame_id`) and the known extension."""
    return pseudonymous_path(frame_id, key) + _known_suffix(PurePosixPath(frame_id).name)


def medical_kind(path: Path, data: bytes | None = None) -> str | None:
    """"dicom", "nifti" or None for an image: by the name, else the 'DICM' marker (of `data`, or the file's)."""
    lower = path.name.lower()
    if lower.endswith(NIFTI_SUFFIXES):
        return "nifti"
    if lower.endswith(DICOM_EXTENSIONS):
        return "dicom"
    if data is not None:
        return "dicom" if data[128:132] == b"DICM" else None
    from app.io.dicom import has_dicom_marker

    return "dicom" if has_dicom_marker(path) else None


def deidentified_dicom(data: bytes, key: bytes) -> Shareable:
    """A DICOM file's bytes de-identified as `run --export source` de-identifies a source file, with the values
    a last check must not find (SegLensError, naming no value, when it cannot be read or de-identified)."""
    import pydicom

    from app.errors import ImageError
    from app.io.dicom import INFO_FIELDS, header_text, quiet_pydicom
    from app.runs.privacy.check import Identifying
    from app.runs.privacy.deidentify import deidentifier, source_facts

    quiet_pydicom()
    try:
        dataset: Dataset = pydicom.dcmread(io.BytesIO(data))
    except Exception as exc:  # pydicom raises many types for a damaged file
        raise ImageError(f"cannot read it to de-identify it ({type(exc).__name__})") from exc
    info = {label: header_text(dataset.get(k)) for k, label in INFO_FIELDS.items() if dataset.get(k) not in (None, "")}
    facts = source_facts([dataset])
    deidentifier(info, key, facts).apply(dataset, derived=False)
    buffer = io.BytesIO()
    try:
        dataset.save_as(buffer, enforce_file_format=True)
    except Exception as exc:  # a value dicognito left that pydicom cannot write
        raise ImageError(f"cannot write it de-identified ({type(exc).__name__})") from exc
    values = [*facts.values, ("patient name", info.get("Patient", "")), ("patient ID", info.get("Patient ID", ""))]
    return Shareable(buffer.getvalue(), Identifying.of(values, facts.uids))


def _known_suffix(name: str) -> str:
    lower = name.lower()
    for suffix in (*NIFTI_SUFFIXES, *sorted(IMAGE_EXTENSIONS)):
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[-len(suffix):]
    return ""


def _redacted(frame: Frame, name: str, line: str) -> str:
    """`line` unless a word of the frame's path or its patient is left in it (outside its pseudonym): then only
    that it could not be judged (the details stay in the debug log)."""
    words = set(identifying_words(InputFile(frame.path or Path(frame.id), Path(frame.id))))
    if frame.path is not None and medical_kind(frame.path) == "dicom":
        words |= _patient_words(frame.path, frame.root)
    left = {word.lower() for word in _WORD.findall(line.replace(name, " "))}
    if left & words:
        return f"{name}: could not be judged (the message named the input or its patient; withheld under anonymize)"
    return line


def _patient_words(path: Path, root: Path | None = None) -> set[str]:
    """The words (3+ letters or digits) of a DICOM file's PatientName and PatientID, when its header reads (under
    `root`, the watched folder: a link out of it is not read)."""
    try:
        import pydicom

        from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

        with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=root) as handle:
            dataset = pydicom.dcmread(handle, stop_before_pixels=True)
    except Exception:  # a file that cannot be read names nobody we can know of
        return set()
    texts = [str(dataset.get("PatientName", "")), str(dataset.get("PatientID", ""))]
    return {word.lower() for text in texts for word in _WORD.findall(text) if len(word) >= 3}
