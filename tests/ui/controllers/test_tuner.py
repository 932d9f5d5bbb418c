"""The Tuner driven with fake decision and folder groups, a fake presenter and file list (no window, no worker): what
a threshold, a layer or a score limit asks the worker for, what is remembered per model, which retuned answers are
shown, and the badges and folder counts that follow."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QSettings, Signal

from app.inference.decide.tuning import Judgement
from app.inference.decide.verdict import Verdict
from app.inference.model.rules import ScoreRule
from app.ui.controllers.tuner import Tuner
from app.ui.state import remembered
from app.ui.state.messages import RetuneRequest
from ui.controllers.fakes import Fake, FakeFiles, FakePresenter, on_screen, ready_state, seg_view

SPEC = SimpleNamespace(verdict=(ScoreRule(0.5),), review=(), classes=(), path=Path("models") / "a.onnx")
SHA = "ab" * 32


class FakeDecision(Fake):
    """DecisionControls' face: what the reader asks for, and set_model."""

    threshold_changed = Signal(object)
    layer_changed = Signal(str)
    class_changed = Signal(object)

    def set_model(self, spec, threshold) -> None:
        self.record("set_model", spec, threshold)


class FakeFolder(Fake):
    """FolderScores' face: the dragged limit and its Reset, the histogram and its counts."""

    limit_moved = Signal(float)
    limit_reset = Signal()

    def show_scores(self, scores, limit, inclusive, passed, rejected, *, review=0, band=False,
                    review_limit=None) -> None:
        self.record("show_scores", scores, limit, inclusive, passed, rejected)
        self.record("band", review, band, review_limit)

    def show_limit(self, limit, *, own: bool) -> None:
        self.record("show_limit", limit, own)

    def follow_limit(self, limit, passed: int, rejected: int, *, own: bool, review: int = 0) -> None:
        self.record("follow_limit", limit, passed, rejected, own)
        self.record("review_count", review)


@pytest.fixture
def rig(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    decision, folder, presenter, files = FakeDecision(), FakeFolder(), FakePresenter(), FakeFiles()
    state = ready_state(SPEC, sha256=SHA)
    tuner = Tuner(state, presenter=presenter, decision=decision, folder=folder, files=files, settings=settings)
    requests: list[RetuneRequest] = []
    tuner.retune_requested.connect(requests.append)
    tuner.model_ready(SHA, SPEC)
    decision.calls.clear()
    return SimpleNamespace(tuner=tuner, state=state, decision=decision, folder=folder, presenter=presenter,
                           files=files, settings=settings, requests=requests)


def judgement(score: float) -> Judgement:
    return Judgement(score, Verdict(score <= 0.5, "" if score <= 0.5 else "score > 0.5"))


def test_a_new_model_starts_at_the_threshold_remembered_for_its_content_else_its_own(rig):
    remembered.save_threshold(rig.settings, SHA, 0.3)
    rig.tuner.model_ready(SHA, SPEC)
    rig.tuner.model_ready("cd" * 32, SPEC)  # another model: nothing remembered for it
    assert rig.decision.called("set_model") == [(SPEC, 0.3), (SPEC, None)]
    assert rig.state.tuning.threshold is None and rig.state.tuning.layer == "mask"


def test_a_threshold_moved_asks_the_worker_to_retune_the_picture_shown_and_is_remembered(rig):
    view = on_screen(rig.state, seg_view())
    rig.decision.threshold_changed.emit(0.4)
    [request] = rig.requests
    assert request.view is view and request.tuning.threshold == 0.4
    assert remembered.threshold(rig.settings, SHA) == 0.4
    rig.decision.threshold_changed.emit(None)  # Reset: the model's own, forgotten
    assert remembered.threshold(rig.settings, SHA) is None
    assert len(rig.requests) == 1  # the picture shown was decided at the model's own: nothing to retune


def test_nothing_is_asked_of_the_worker_while_no_picture_is_shown(rig):
    rig.decision.layer_changed.emit("probability")
    rig.decision.class_changed.emit(1)
    assert rig.requests == []
    assert rig.state.tuning.layer == "probability" and rig.state.tuning.class_index == 1


def test_a_retuned_answer_for_the_picture_on_screen_updates_only_its_decision(rig):
    on_screen(rig.state, seg_view())
    rig.decision.threshold_changed.emit(0.4)
    [request] = rig.requests
    retuned = replace(request.view, tuning=request.tuning, request_id=request.request_id, judgement=judgement(0.6))
    rig.tuner.on_retuned(retuned)
    assert rig.presenter.calls == [("update_decision", retuned)]
    assert rig.files.called("set_verdict") == [("data/a.png", Verdict(False, "score 0.6 > 0.5"), False)]


def test_retuned_answers_of_an_older_retune_or_an_older_model_are_not_shown(rig):
    on_screen(rig.state, seg_view())
    rig.decision.threshold_changed.emit(0.4)
    rig.decision.threshold_changed.emit(0.45)
    first, _ = rig.requests
    older = replace(first.view, tuning=first.tuning, request_id=first.request_id, judgement=judgement(0.6))
    rig.tuner.on_retuned(older)
    assert rig.presenter.calls == []  # superseded by the second retune
    assert [path for path, *_ in rig.files.called("set_verdict")] == ["data/a.png"]  # its verdict still counts
    rig.files.calls.clear()
    rig.tuner.on_retuned(replace(older, generation=0))  # made by a model since replaced
    assert rig.presenter.calls == [] and rig.files.calls == []


def test_a_retuned_answer_for_a_picture_not_yet_on_screen_is_displayed(rig):
    view = seg_view()
    rig.state.select(view.key)  # wanted, its first result not decided at the current tuning
    rig.tuner.tune(threshold=0.4)
    assert not rig.tuner.ensure_tuned(view)
    request = rig.requests[-1]
    retuned = replace(view, tuning=request.tuning, request_id=request.request_id)
    rig.tuner.on_retuned(retuned)
    assert rig.presenter.calls == [("display", retuned)]
    assert rig.tuner.ensure_tuned(retuned) and len(rig.requests) == 1  # tuned: shown as it is


def test_a_dragged_score_limit_rejudges_every_badge_and_the_folder_counts_follow(rig):
    rig.tuner.judged(seg_view("data/a.png", judgement=judgement(0.6)))
    rig.tuner.judged(seg_view("data/b.png", judgement=judgement(0.2)))
    rig.files.calls.clear()
    rig.folder.limit_moved.emit(0.7)
    assert rig.files.called("set_verdict") == [("data/a.png", Verdict(True), False),
                                               ("data/b.png", Verdict(True), False)]
    assert rig.folder.called("follow_limit") == [(0.7, 2, 0, False)]
    assert remembered.score_limit(rig.settings, SHA) == 0.7
    rig.folder.limit_reset.emit()
    assert rig.folder.called("follow_limit")[-1] == (0.5, 1, 1, True)  # the model's own limit again
    assert remembered.score_limit(rig.settings, SHA) is None


def test_a_new_threshold_marks_the_other_badges_out_of_date(rig):
    rig.tuner.judged(seg_view("data/a.png", judgement=judgement(0.6)))
    rig.files.calls.clear()
    rig.decision.threshold_changed.emit(0.4)
    assert rig.files.called("set_verdict") == [("data/a.png", Verdict(False, "score 0.6 > 0.5"), True)]


def test_after_run_on_all_the_folder_shows_the_scores_with_the_limit_in_force(rig):
    rig.tuner.judged_in_run("data/a.png", judgement(0.6), None)
    rig.tuner.judged_in_run("data/b.png", judgement(0.2), None)
    rig.tuner.judged_in_run("data/c.png", None, None)  # no verdict: not counted
    rig.tuner.show_folder()
    assert rig.folder.called("show_scores") == [([0.6, 0.2], 0.5, False, 1, 1)]
    assert rig.folder.called("show_limit") == [(0.5, True)]


def test_review_is_counted_apart_and_the_band_limit_goes_to_the_histogram(qtbot, tmp_path):
    """REVIEW (ok False, review True) is neither OK nor NG in the folder's counts; the band's lower score limit is
    drawn beside the (dragged) fail limit."""
    band = SimpleNamespace(**{**vars(SPEC), "review": (ScoreRule(0.3),)})
    folder, files = FakeFolder(), FakeFiles()
    tuner = Tuner(ready_state(band, sha256=SHA), presenter=FakePresenter(), decision=FakeDecision(), folder=folder,
                  files=files, settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    tuner.model_ready(SHA, band)
    tuner.judged_in_run("data/a.png", judgement(0.6), None)
    review = Verdict(False, "review: score 0.4 > 0.3", review=True)
    tuner.judged_in_run("data/b.png", Judgement(0.4, review, review_reason=review.reason), None)
    tuner.judged_in_run("data/c.png", judgement(0.2), None)
    assert files.called("set_verdict")[1] == ("data/b.png", review, False)
    tuner.show_folder()
    assert folder.called("show_scores") == [([0.6, 0.4, 0.2], 0.5, False, 1, 1)]
    assert folder.called("band") == [(1, True, 0.3)]
    folder.limit_moved.emit(0.35)  # the fail limit dragged below the REVIEW image's score: it is NG now
    assert folder.called("follow_limit")[-1] == (0.35, 1, 2, False) and folder.called("review_count")[-1] == (0,)
    folder.limit_reset.emit()
    assert folder.called("follow_limit")[-1] == (0.5, 1, 1, True) and folder.called("review_count")[-1] == (1,)
