"""Results ▸ Send to PACS…, off the GUI thread and Qt-free: the volume's result written with the exports' own code
(app.runs.exports.formats: the same DICOM SEG and Secondary Capture a run writes) into a temporary folder, stored to
the node, and then found there again by a series query of its study; the folder goes once it is sent.

A pseudonymised result is sent only to a research node: stored beside the identified study, it would look like a
second, unrelated patient; an identified one never to a research node (the one rule of every send, issue 36)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.io.pacs.client import PacsClient
    from app.io.pacs.nodes import PacsNode
    from app.runs.privacy.check import OwnWords
    from app.runs.privacy.deidentify import VolumePrivacy
    from app.ui.state.pacs_messages import PacsSend, PacsSent

KIND_NAMES = {"dicom-seg": "DICOM SEG", "sc": "Secondary Capture", "rtstruct": "RTSTRUCT"}


def send_refusal(node: PacsNode, *, anonymize: bool) -> str | None:
    """Why this send may not go to `node` (one line), or None: the one send rule of every face
    (app.io.pacs.nodes.send_refusal: de-identified only to a research node, identified never to one)."""
    from app.io.pacs.nodes import send_refusal as rule

    refusal = rule(node, deidentified=anonymize)
    return f"pacs {node.name}: {refusal}" if refusal else None


def send_volume(request: PacsSend, client: PacsClient, *,
                progress: Callable[[int, int], None] | None = None) -> PacsSent:
    """Write, store and verify `request`'s exports; PacsError (one line) when the node refuses or is not there."""
    from app.io.pacs.client import pacs_error
    from app.ui.state.pacs_messages import PacsSent

    node = request.target.node
    refusal = send_refusal(node, anonymize=request.anonymize)
    if refusal:
        raise pacs_error(node, refusal.split(": ", 1)[1])
    with tempfile.TemporaryDirectory(prefix="seglens-send-") as folder:
        written = write_exports(request, Path(folder))
        stored = client.store([path for _kind, paths in written for path in paths], progress=progress)
        wanted = _series_of([path for _kind, paths in written for path in paths])
    found = _found_again(client, wanted)
    parts = ", ".join(f"{KIND_NAMES.get(kind, kind)} ({len(paths)} file{'s' * (len(paths) != 1)})"
                      for kind, paths in written)
    verdict = "found again by a query" if found == len(wanted) else f"only {found} of {len(wanted)} series found"
    return PacsSent(request.request_id, stored, found,
                    f"Sent to {node.name}: {parts}; {verdict} ({found} of {len(wanted)} series)")


def write_exports(request: PacsSend, folder: Path) -> list[tuple[str, list[Path]]]:
    """Each asked export of the volume into `folder`, as a run writes it: [(kind, its files)]."""
    from app.runs.exports import formats as ex
    from app.runs.outputs.segments import algorithm_of
    from app.runs.privacy.check import own_words
    from app.runs.privacy.deidentify import volume_privacy

    volume, labels = request.volume, request.labels
    segments = ex.segments_of(request.classes)
    algorithm = algorithm_of(request.model_path)
    privacy = volume_privacy(volume, anonymize=request.anonymize, key=_key(request.anonymize))
    written: list[tuple[str, list[Path]]] = []
    for kind in request.kinds:
        if kind == "dicom-seg":
            written.append((kind, [ex.write_dicom_seg(volume, labels, segments, folder / "seg.dcm",
                                                      algorithm=algorithm, privacy=privacy)]))
        elif kind == "sc":
            written.append((kind, ex.write_secondary_capture(
                volume, labels, segments, folder / "sc", display=_display(request), opacity=request.opacity,
                algorithm=algorithm, privacy=privacy)))
        elif kind == "rtstruct":
            written.append((kind, [ex.write_rtstruct(volume, labels, segments, folder / "rtstruct.dcm",
                                                     algorithm=algorithm, privacy=privacy)]))
    if request.anonymize:
        _last_check(request, [path for _kind, paths in written for path in paths], folder, privacy,
                    own=own_words(segments, algorithm))
    return written


def _last_check(request: PacsSend, files: list[Path], folder: Path, privacy: VolumePrivacy | None, *,
                own: OwnWords) -> None:
    """A de-identified send: nothing of the source's identity in any file, as before a run's volume counts as done
    (app.runs.privacy.check, with the model's classes and name as its own words); else nothing is sent."""
    from app.errors import SegLensError
    from app.runs.privacy.check import volume_leak

    found = volume_leak(files, facts=privacy.facts if privacy is not None else None, info=request.volume.info,
                        root=folder, cells=[], own=own)
    if found:
        raise SegLensError(f"de-identification check failed: {found}; nothing was sent")


def _key(anonymize: bool) -> bytes:
    if not anonymize:
        return b""
    from app.runs.folder.volumes import pseudonym_key

    return pseudonym_key()


def _display(request: PacsSend) -> Callable[[int], np.ndarray]:
    """Slice k as the viewer shows it by default: the volume's own window (the Secondary Capture's picture)."""
    from app.io.images import read_slice

    return lambda k: read_slice(request.volume, k).display()


def _series_of(files: Sequence[Path]) -> dict[str, str]:
    """SeriesInstanceUID → StudyInstanceUID of the written files (headers only, through the untrusted gate: the
    output folder may be one others can write to)."""
    import pydicom

    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    series: dict[str, str] = {}
    for path in files:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            header = pydicom.dcmread(handle, stop_before_pixels=True)
        series[str(header.SeriesInstanceUID)] = str(header.StudyInstanceUID)
    return series


def _found_again(client: PacsClient, wanted: dict[str, str]) -> int:
    """How many of the sent series a query of their study finds on the node."""
    found = 0
    for study in sorted(set(wanted.values())):
        on_node = {record.series_uid for record in client.find_series(study)}
        found += sum(1 for series, its_study in wanted.items() if its_study == study and series in on_node)
    return found
