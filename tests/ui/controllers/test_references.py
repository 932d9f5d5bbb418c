"""The reference folder and saved corrections (References) and the review report's request (ReportExporter), driven
with a fake tuner, reviewer, worker and status bar (no window): what each asks the tuning, the review log and the
worker for, and what it says."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PySide6.QtCore import Signal

from app.runs.review.log import Correction, review_folder
from app.ui.controllers.references import References
from app.ui.controllers.reporter import ReportExporter
from app.ui.state.messages import ReportFinished
from ui.controllers.fakes import Fake, FakeFiles, FakeStatus, ready_state


class FakeTuner(Fake):
    def tune(self, **changes) -> None:
        self.record("tune", changes)


class FakeReviewer(Fake):
    """The Reviewer's face: its log (None: no model or no images yet), marks and the report's request."""

    def __init__(self, log=None) -> None:
        super().__init__()
        self.log = log

    def mark(self, state: str, path: str | None = None) -> None:
        self.record("mark", state, path)

    def report_request(self, report_path, tuning, *, anonymize=None):
        self.record("report_request", report_path, tuning, anonymize)
        return SimpleNamespace(entries=("a", "b"), anonymize=bool(anonymize))


class FakeWorker(Fake):
    report_finished = Signal(object)

    def export_report(self, request) -> None:
        self.record("export_report", request)


@pytest.fixture
def refs(qtbot, tmp_path):
    state, files, status, tuner, reviewer = (ready_state(None), FakeFiles(root=tmp_path / "data"), FakeStatus(),
                                             FakeTuner(), FakeReviewer())
    references = References(state, files=files, status=status, tuner=tuner, reviewer=reviewer)
    return SimpleNamespace(references=references, state=state, status=status, tuner=tuner, reviewer=reviewer,
                           root=tmp_path / "data")


def test_a_reference_folder_goes_into_the_tuning_and_none_leaves_the_corrections_only(refs, tmp_path):
    refs.references.set_folder(tmp_path / "truth")
    refs.references.set_folder(None)
    assert refs.tuner.called("tune") == [({"reference_root": str(tmp_path / "truth")},),
                                         ({"reference_root": None},)]
    assert refs.status.messages == [f"Comparing with the reference masks in {tmp_path / 'truth'}",
                                    "No reference folder: corrected masks only"]


def test_a_saved_correction_marks_the_image_corrected_and_makes_it_a_new_reference(refs, tmp_path):
    written = tmp_path / "data_review" / "a.png_mask.png"
    refs.references.on_corrected("data/a.png", str(written))
    refs.state.set_tuning(references=1)  # as the fake tuner's tune would have
    refs.references.on_corrected("data/b.png", str(written))
    assert refs.reviewer.calls == [("mark", "corrected", "data/a.png"), ("mark", "corrected", "data/b.png")]
    assert refs.tuner.called("tune") == [({"references": 1},), ({"references": 2},)]
    assert refs.status.called("showMessage")[0] == (f"Corrected mask saved: {written}", 8000, written.parent)


def test_corrections_go_to_the_review_folder_of_the_inputs_the_image_was_opened_with(refs):
    assert refs.references.destination(str(refs.root / "sub" / "a.png")) == Correction(review_folder(refs.root),
                                                                                        "sub/a.png", refs.root)
    slice_7 = refs.references.destination(str(refs.root / "sub" / "a.png"), 6)
    assert slice_7.frame == 6 and slice_7.path.name == "a.png_slice0007_mask.png"


@pytest.fixture
def reporter(qtbot, tmp_path):
    state, status, worker = ready_state(None), FakeStatus(), FakeWorker()
    log = SimpleNamespace(folder=tmp_path / "data_review")
    reviewer = FakeReviewer(log)
    exporter = ReportExporter(state, reviewer=reviewer, status=status, worker=worker)
    return SimpleNamespace(exporter=exporter, state=state, status=status, worker=worker, log=log, reviewer=reviewer)


def test_without_a_review_log_no_report_is_asked_for(qtbot):
    status, worker = FakeStatus(), FakeWorker()
    ReportExporter(ready_state(None), reviewer=FakeReviewer(), status=status, worker=worker).export()
    assert worker.calls == [] and status.messages == ["No review log: open images and wait for the model"]


def test_the_report_goes_beside_the_review_log_unless_told_where_and_the_worker_writes_it(reporter, tmp_path):
    reporter.state.set_tuning(threshold=0.4)
    reporter.exporter.export()
    reporter.exporter.export(tmp_path / "mine.html", anonymize=True)
    (first, tuning, anonymize), (second, _, anonymize_asked) = reporter.reviewer.called("report_request")
    assert first.parent == reporter.log.folder and first.name.endswith(".html")
    assert second == tmp_path / "mine.html"
    assert tuning.threshold == 0.4 and anonymize is None and anonymize_asked is True
    assert len(reporter.worker.called("export_report")) == 2
    assert reporter.status.messages == ["Writing the review report of 2 images…",
                                        "Writing the review report of 2 images, de-identified…"]


def test_the_reports_outcome_is_said_with_its_folder_or_why_not(qtbot, reporter, tmp_path):
    written = tmp_path / "data_review" / "review_report.html"
    with qtbot.waitSignal(reporter.exporter.report_finished) as finished:
        reporter.worker.report_finished.emit(ReportFinished(report_path=str(written)))
    assert finished.args == [True, str(written)]
    reporter.worker.report_finished.emit(ReportFinished(error="data_review: read-only"))
    assert reporter.status.called("showMessage") == [(f"Review report written: {written}", 20000, written.parent),
                                                     ("Review report not written: data_review: read-only", 20000,
                                                      None)]
