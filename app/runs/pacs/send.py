"""Results sent to a PACS and found there again: the one store-and-verify of every face.

`store_and_verify` stores the files to the node, then looks for each of their series by a series-level query of its
study and counts its instances: the outcome is one record (`Sent`, a `SentSeries` per series). The run's `--send`
(app.runs.pacs.run.send_exports: what --export wrote) and the viewer's Results ▸ Send to PACS… (`send_volume`: the
shown volume's result written as a run writes it, into a temporary folder) both go through it.

The one send rule (app.io.pacs.nodes.send_refusal: a de-identified result only to a research node, an identified one
never to one) is checked before anything is stored: by what each file says of itself (`files_refusal`), or by what
the viewer is asked to send (`send_volume`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.spelling import counted

if TYPE_CHECKING:
    import numpy as np

    from app.inference.model.spec import ClassInfo
    from app.io.pacs.client import PacsClient
    from app.io.pacs.nodes import PacsNode
    from app.io.volumes import Volume
    from app.runs.privacy.check import OwnWords
    from app.runs.privacy.deidentify import VolumePrivacy

Progress = Callable[[int, int], None]  # (files stored, files to store)

KIND_NAMES = {"dicom-seg": "DICOM SEG", "sc": "Secondary Capture", "rtstruct": "RTSTRUCT"}


@dataclass(frozen=True)
class SentSeries:
    """One series sent: its UIDs, modality, files stored and the instances a query found on the server afterwards
    (None: the query did not find the series)."""

    series_uid: str
    study_uid: str
    modality: str
    files: int
    found: int | None

    @property
    def complete(self) -> bool:
        """Found with every instance sent."""
        return self.found is not None and self.found >= self.files


@dataclass(frozen=True)
class Sent:
    """What a send did: the node, files stored of those given, and each series as the query found it."""

    node: str
    files: int
    stored: int
    series: tuple[SentSeries, ...]

    @property
    def found(self) -> int:
        """The series found complete (every instance sent) by the query."""
        return sum(1 for series in self.series if series.complete)

    @property
    def complete(self) -> bool:
        """Every file stored and every series found with all its instances."""
        return self.stored == self.files and self.found == len(self.series)

    def line(self) -> str:
        """The run's summary line: what was stored and what the query found."""
        kinds = ", ".join(f"{s.modality} ({counted(s.files, 'file')})" for s in self.series)
        return (f"sent to {self.node}: {self.stored} of {counted(self.files, 'file')} stored "
                f"({kinds or 'nothing written'}); a query found {self.found} of {len(self.series)} series complete")


def store_and_verify(client: PacsClient, files: Sequence[Path], *, progress: Progress | None = None) -> Sent:
    """`files` stored to the client's node, then each of their series looked for by a series-level query of its
    study, instance for instance. PacsError (one line) when the node refuses or is not there."""
    groups = _series_of(files)  # read before the store: a caller's temporary folder may go right after it
    stored = client.store(list(files), progress=progress) if files else 0
    found: dict[str, int | None] = {}
    for study_uid in dict.fromkeys(study for study, _ in groups):
        for record in client.find_series(study_uid):
            found[record.series_uid] = record.instances if record.instances is not None else -1
    series = tuple(SentSeries(series_uid=uid, study_uid=study, modality=modality, files=count,
                              found=_instances(found, uid, count))
                   for (study, uid), (modality, count) in groups.items())
    return Sent(node=client.node.name, files=len(files), stored=stored, series=series)


def _instances(found: dict[str, int | None], uid: str, count: int) -> int | None:
    """The instances the query said the series has; a server that does not count them (-1) is taken at `count`."""
    if uid not in found:
        return None
    value = found[uid]
    return count if value is None or value < 0 else value


def _series_of(files: Sequence[Path]) -> dict[tuple[str, str], tuple[str, int]]:
    """(StudyInstanceUID, SeriesInstanceUID) → (Modality, files), read from the files' headers through the
    untrusted gate (an output folder may be one others can write to)."""
    import pydicom

    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    groups: dict[tuple[str, str], tuple[str, int]] = {}
    for path in files:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            ds = pydicom.dcmread(handle, stop_before_pixels=True,
                                 specific_tags=["StudyInstanceUID", "SeriesInstanceUID", "Modality"])
        key = (str(ds.get("StudyInstanceUID", "")), str(ds.get("SeriesInstanceUID", "")))
        modality = str(ds.get("Modality", "")) or "DICOM"
        groups[key] = (modality, groups.get(key, (modality, 0))[1] + 1)
    return groups


# --- the send rule ------------------------------------------------------------------------------------------------


def send_refusal(node: PacsNode, *, anonymize: bool) -> str | None:
    """Why a send of a result (de-identified when `anonymize`) may not go to `node` (`pacs NODE: …`), or None."""
    from app.io.pacs.nodes import send_refusal as rule

    refusal = rule(node, deidentified=anonymize)
    return f"pacs {node.name}: {refusal}" if refusal else None


def files_refusal(node: PacsNode, files: Sequence[Path]) -> str | None:
    """Why `files` may not be stored to `node`: the one send rule (app.io.pacs.nodes.send_refusal) applied to
    what each file says of itself (PatientIdentityRemoved YES: de-identified), naming the first file it refuses
    (`pacs NODE: FILE: …; nothing sent`); None when every file may go."""
    from app.io.pacs.nodes import send_refusal as rule

    for path in files:
        refusal = rule(node, deidentified=is_deidentified(path))
        if refusal:
            return f"pacs {node.name}: {path}: {refusal}; nothing sent"
    return None


def is_deidentified(path: Path) -> bool:
    """Whether a DICOM file says it is de-identified (PatientIdentityRemoved YES), read through the untrusted
    gate (a file that cannot be read is not: it is then sent, or refused, as identified)."""
    import pydicom

    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            header = pydicom.dcmread(handle, stop_before_pixels=True, specific_tags=["PatientIdentityRemoved"])
    except (OSError, ValueError, AttributeError, pydicom.errors.InvalidDicomError):
        return False
    return str(header.get("PatientIdentityRemoved", "")).strip().upper() == "YES"


# --- the viewer's volume ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VolumeResult:
    """A volume's result to send, as the viewer shows it: the whole label volume [D, H, W] uint8, the model's
    classes and file, the exports to write (`kinds`: "dicom-seg", "sc", "rtstruct"), de-identified or not, and the
    overlay's opacity (the Secondary Capture's picture)."""

    volume: Volume
    labels: np.ndarray
    classes: tuple[ClassInfo, ...]
    model_path: Path
    kinds: tuple[str, ...] = ("dicom-seg",)
    anonymize: bool = False
    opacity: float = 0.5


@dataclass(frozen=True)
class VolumeSent:
    """A volume's result sent: the files written of each kind, and the send as the query found it."""

    written: tuple[tuple[str, int], ...]  # (kind, files written), in the order asked
    sent: Sent

    def line(self) -> str:
        """The viewer's line: what was sent, and whether a query found it again."""
        parts = ", ".join(f"{KIND_NAMES.get(kind, kind)} ({count} file{'s' * (count != 1)})"
                          for kind, count in self.written)
        found, wanted = self.sent.found, len(self.sent.series)
        verdict = "found again by a query" if found == wanted else f"only {found} of {wanted} series found"
        return f"Sent to {self.sent.node}: {parts}; {verdict} ({found} of {wanted} series)"


def send_volume(result: VolumeResult, client: PacsClient, *, progress: Progress | None = None) -> VolumeSent:
    """Write `result`'s exports into a temporary folder (as a run writes them), store and verify them; the folder
    goes once they are sent. PacsError (one line) when the send rule refuses the node, or the node refuses."""
    from app.io.pacs.client import pacs_error

    node = client.node
    refusal = send_refusal(node, anonymize=result.anonymize)
    if refusal:
        raise pacs_error(node, refusal.split(": ", 1)[1])
    with tempfile.TemporaryDirectory(prefix="seglens-send-") as folder:
        written = write_exports(result, Path(folder))
        sent = store_and_verify(client, [path for _kind, paths in written for path in paths], progress=progress)
    return VolumeSent(tuple((kind, len(paths)) for kind, paths in written), sent)


def write_exports(result: VolumeResult, folder: Path) -> list[tuple[str, list[Path]]]:
    """Each asked export of the volume into `folder`, as a run writes it: [(kind, its files)]."""
    from app.runs.exports import formats as ex
    from app.runs.outputs.segments import algorithm_of
    from app.runs.privacy.check import own_words
    from app.runs.privacy.deidentify import volume_privacy

    volume, labels = result.volume, result.labels
    segments = ex.segments_of(result.classes)
    algorithm = algorithm_of(result.model_path)
    privacy = volume_privacy(volume, anonymize=result.anonymize, key=_key(result.anonymize))
    written: list[tuple[str, list[Path]]] = []
    for kind in result.kinds:
        if kind == "dicom-seg":
            written.append((kind, [ex.write_dicom_seg(volume, labels, segments, folder / "seg.dcm",
                                                      algorithm=algorithm, privacy=privacy)]))
        elif kind == "sc":
            written.append((kind, ex.write_secondary_capture(
                volume, labels, segments, folder / "sc", display=_display(volume), opacity=result.opacity,
                algorithm=algorithm, privacy=privacy)))
        elif kind == "rtstruct":
            written.append((kind, [ex.write_rtstruct(volume, labels, segments, folder / "rtstruct.dcm",
                                                     algorithm=algorithm, privacy=privacy)]))
    if result.anonymize:
        _last_check(result, [path for _kind, paths in written for path in paths], folder, privacy,
                    own=own_words(segments, algorithm))
    return written


def _last_check(result: VolumeResult, files: list[Path], folder: Path, privacy: VolumePrivacy | None, *,
                own: OwnWords) -> None:
    """A de-identified send: nothing of the source's identity in any file, as before a run's volume counts as done
    (app.runs.privacy.check, with the model's classes and name as its own words); else nothing is sent."""
    from app.errors import SegLensError
    from app.runs.privacy.check import volume_leak

    found = volume_leak(files, facts=privacy.facts if privacy is not None else None, info=result.volume.info,
                        root=folder, cells=[], own=own)
    if found:
        raise SegLensError(f"de-identification check failed: {found}; nothing was sent")


def _key(anonymize: bool) -> bytes:
    if not anonymize:
        return b""
    from app.runs.folder.volumes import pseudonym_key

    return pseudonym_key()


def _display(volume: Volume) -> Callable[[int], np.ndarray]:
    """Slice k as the viewer shows it by default: the volume's own window (the Secondary Capture's picture)."""
    from app.io.images import read_slice

    return lambda k: read_slice(volume, k).display()
