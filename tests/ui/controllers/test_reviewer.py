"""The Reviewer driven with a fake file list, review panel and status bar (no window, no model run), over a real
review log on disk: what opening, marking, a note and "next unreviewed" write and ask the list and the panel to
show, and what it says when there is nothing to review."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import Signal

from app.runs.review.log import ReviewLog
from app.ui.controllers.reviewer import Reviewer
from app.ui.state.messages import Tuning
from app.ui.state.view_state import ViewState
from ui.controllers.fakes import Fake, FakeFiles, FakeStatus, ready_state

SHA = "ef" * 32


class FakeReviewPanel(Fake):
    """ReviewPanel's face: the reader's A/R/E, note and Next, and what it shows."""

    state_requested = Signal(str)
    note_changed = Signal(str)
    next_requested = Signal()

    def show_review(self, review, foreign: int, counts=None) -> None:
        self.record("show_review", None if review is None else (review.state, review.note), foreign, counts)

    def show_location(self, folder) -> None:
        self.record("show_location", folder)


@pytest.fixture
def rig(qtbot, tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    files = FakeFiles([str(root / name) for name in ("a.png", "b.png", "c.png")], root=root)
    panel, status = FakeReviewPanel(), FakeStatus()
    state = ready_state(SimpleNamespace(path=Path("models") / "a.onnx"), sha256=SHA)
    reviewer = Reviewer(state, files=files, panel=panel, status=status)
    reviewer.model_path, reviewer.model_sha256 = Path("models") / "a.onnx", SHA
    return SimpleNamespace(reviewer=reviewer, files=files, panel=panel, status=status, root=root,
                           folder=tmp_path / "data_review", paths=files.paths())


def on_disk(rig, rel: str):
    review = ReviewLog.open(rig.folder, SHA).get(rel)
    return None if review is None else (review.state, review.note)


def test_without_a_model_nothing_is_opened_and_the_panel_shows_no_review(rig):
    reviewer = Reviewer(ViewState(), files=rig.files, panel=rig.panel, status=rig.status)
    reviewer.open()
    assert rig.panel.calls == [("show_review", None, 0, None)] and rig.files.calls == []
    reviewer.mark("accepted")
    assert rig.status.messages == ["Nothing to review: open images and wait for the model"]


def test_opening_shows_each_listed_images_state_and_the_current_ones_review(rig):
    rig.reviewer.open()
    assert rig.files.called("set_review") == [(path, "unreviewed") for path in rig.paths]
    none = {"unreviewed": 0, "accepted": 0, "rejected": 0, "corrected": 0}
    assert rig.panel.calls == [("show_location", None), ("show_review", None, 0, none)]  # beside the images


def test_accepting_writes_the_log_marks_the_list_and_goes_to_the_next_unreviewed(qtbot, rig):
    rig.reviewer.open()
    rig.files.calls.clear()
    with qtbot.waitSignal(rig.reviewer.reviewed) as reviewed:
        rig.panel.state_requested.emit("accepted")
    a, b, _ = rig.paths
    assert reviewed.args == [a, "accepted"]
    assert on_disk(rig, "a.png") == ("accepted", "")
    assert rig.files.calls == [("set_review", a, "accepted"), ("select_path", b)]
    assert rig.panel.calls[-1] == ("show_review", None, 0,  # b: not reviewed yet
                                   {"unreviewed": 0, "accepted": 1, "rejected": 0, "corrected": 0})


def test_corrected_does_not_move_on(rig):
    rig.reviewer.open()
    rig.files.calls.clear()
    rig.reviewer.mark("corrected", rig.paths[2])
    assert rig.files.calls == [("set_review", rig.paths[2], "corrected")]
    assert on_disk(rig, "c.png") == ("corrected", "")


def test_a_note_is_written_with_the_state_kept_and_the_same_note_again_writes_nothing(rig):
    rig.reviewer.open()
    rig.reviewer.mark("rejected")  # a, then on to b
    rig.files.current = rig.paths[0]
    rig.panel.note_changed.emit("edge, <b>check</b>")
    assert on_disk(rig, "a.png") == ("rejected", "edge, <b>check</b>")
    stamp = (rig.folder / "seglens_review.csv").stat().st_mtime_ns
    rig.panel.note_changed.emit("edge, <b>check</b>")
    assert (rig.folder / "seglens_review.csv").stat().st_mtime_ns == stamp


def test_next_unreviewed_follows_the_lists_filter_and_says_when_every_image_is_reviewed(rig):
    rig.reviewer.open()
    a, _, c = rig.paths
    rig.files.shown_paths = [a, c]  # b filtered out
    rig.panel.next_requested.emit()
    assert rig.files.called("select_path") == [(c,)]
    for path in rig.paths:
        rig.reviewer.mark("corrected", path)
    rig.panel.next_requested.emit()
    assert rig.status.messages == ["Every image is reviewed"]


def test_the_report_request_carries_the_listed_images_their_reviews_and_the_model(rig):
    assert rig.reviewer.report_request(rig.folder / "report.html", Tuning()) is None  # no log yet
    rig.reviewer.open()
    rig.reviewer.mark("accepted")
    request = rig.reviewer.report_request(rig.folder / "report.html", Tuning(threshold=0.4))
    assert [(entry.rel, entry.volume) for entry in request.entries] == [("a.png", None), ("b.png", None),
                                                                        ("c.png", None)]
    assert request.reviews["a.png"].state == "accepted" and request.reviews["b.png"] is None
    assert (request.model_name, request.model_sha256, request.tuning.threshold) == ("a.onnx", SHA, 0.4)
    assert request.anonymize is False  # no volume listed: no patient fields to hide
    assert rig.status.messages == ["No review log: open images and wait for the model"]
