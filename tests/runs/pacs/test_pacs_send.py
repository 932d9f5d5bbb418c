"""app.runs.pacs.send: the one store-and-verify of the run's --send and the viewer's Send to PACS…, against a
hand-written PACS that keeps what it is sent (and may lose some of it): every series looked for by a query of its
study, instance for instance, and each face's line made from the same record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pydicom

from app.io.pacs.client import SeriesRecord
from app.io.pacs.nodes import parse_node
from app.runs.pacs.send import Sent, SentSeries, VolumeSent, store_and_verify
from tests.dicom_factory import write_series


class KeepingPacs:
    """A PACS that stores what it is sent and answers series queries with the instances it holds; `lose` instances
    of each series are lost after the store (a server that dropped them)."""

    def __init__(self, *, lose: int = 0, count: bool = True) -> None:
        self.node = parse_node("dicomweb+http://127.0.0.1:1/dicom-web")
        self.lose, self.count = lose, count
        self.held: dict[str, tuple[str, str, int]] = {}  # series → (study, modality, instances)

    def store(self, files: Sequence[Path], *, progress: Callable[[int, int], None] | None = None) -> int:
        for done, path in enumerate(files, 1):
            header = pydicom.dcmread(path, stop_before_pixels=True)
            study, modality, instances = self.held.get(str(header.SeriesInstanceUID),
                                                       (str(header.StudyInstanceUID), str(header.Modality), 0))
            self.held[str(header.SeriesInstanceUID)] = (study, modality, instances + 1)
            if progress is not None:
                progress(done, len(files))
        return len(files)

    def find_series(self, study_uid: str) -> list[SeriesRecord]:
        return [SeriesRecord(uid, study, modality, "", None, max(held - self.lose, 0) if self.count else None)
                for uid, (study, modality, held) in self.held.items() if study == study_uid]


def test_every_series_is_found_again_instance_for_instance(tmp_path):
    first = write_series(tmp_path / "a", slices=3, rows=8, columns=8)
    second = write_series(tmp_path / "b", slices=2, rows=8, columns=8)
    told: list[tuple[int, int]] = []
    sent = store_and_verify(KeepingPacs(), first + second, progress=lambda done, total: told.append((done, total)))
    assert (sent.files, sent.stored, sent.found, sent.complete) == (5, 5, 2, True)
    assert sorted((s.modality, s.files, s.found) for s in sent.series) == [("CT", 2, 2), ("CT", 3, 3)]
    assert told[-1] == (5, 5)


def test_a_series_the_server_holds_short_of_its_instances_is_not_found_again(tmp_path):
    # the viewer's send said "found again by a query" for a series the query found at all, whatever it held of it
    files = write_series(tmp_path / "a", slices=4, rows=8, columns=8)
    sent = store_and_verify(KeepingPacs(lose=1), files)
    assert [(s.files, s.found, s.complete) for s in sent.series] == [(4, 3, False)]
    assert (sent.found, sent.complete) == (0, False)
    node = sent.node
    assert VolumeSent((("sc", 4),), sent).line() == (f"Sent to {node}: Secondary Capture (4 files); only 0 of 1 "
                                                     "series found (0 of 1 series)")
    assert sent.line() == f"sent to {node}: 4 of 4 files stored (CT (4 files)); a query found 0 of 1 series complete"


def test_a_server_that_does_not_count_instances_is_taken_at_its_word(tmp_path):
    files = write_series(tmp_path / "a", slices=2, rows=8, columns=8)
    sent = store_and_verify(KeepingPacs(count=False), files)
    assert [s.found for s in sent.series] == [2] and sent.complete


def test_the_run_and_the_viewer_say_one_record_their_own_way():
    sent = Sent(node="PACS", files=3, stored=3, series=(
        SentSeries("1.2.1", "1.2", "SEG", 1, 1), SentSeries("1.2.2", "1.2", "OT", 2, None)))
    assert sent.line() == ("sent to PACS: 3 of 3 files stored (SEG (1 file), OT (2 files)); a query found 1 of 2 "
                           "series complete")
    assert VolumeSent((("dicom-seg", 1), ("sc", 2)), sent).line() == (
        "Sent to PACS: DICOM SEG (1 file), Secondary Capture (2 files); only 1 of 2 series found (1 of 2 series)")
