"""The pictures controller driven with a fake worker, file list, status bar, presenter, tuner, reviewer, editor and
volume view (no window, no thread, no model): what showing a picture asks the worker for, which answers reach the
screen — none for a picture the reader has left, none of a replaced model — and what each answer puts in the list
and the status bar."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Signal

from app.ui.controllers.pictures import Pictures
from app.ui.state.messages import BarePicture, TileProgress, ViewFailed, ViewKey, ViewSkipped
from app.ui.state.remote_messages import RemoteRetrying
from app.ui.state.view_state import ViewState
from ui.controllers.fakes import Fake, FakeFiles, FakePresenter, FakeStatus, ready_state, seg_view

A, B = "data/a.png", "data/b.png"


class FakeWorker(Fake):
    """The InferenceWorker's picture face: its answers as signals, what it was asked recorded."""

    result_ready = Signal(object)
    failed = Signal(object)
    skipped = Signal(object)
    tile_progress = Signal(object)
    remote_retrying = Signal(object)

    def process_view(self, request) -> None:
        self.record("process_view", request)

    def note_image_waiting(self, key=None) -> None:
        self.record("note_image_waiting", key)


class FakeTuner(Fake):
    def tune(self, **changes) -> None:
        self.record("tune", changes)

    def ensure_tuned(self, view) -> bool:
        return True

    def judged(self, view) -> None:
        self.record("judged", str(view.path))


class FakeHelpers(Fake):
    """The reviewer's open, the editor's stop and the volume view's show (a plain picture: no volume)."""

    def open(self) -> None:
        self.record("open")

    def stop(self) -> None:
        self.record("stop")

    def show(self, path: str, frame: int):
        self.record("show", path, frame)


@pytest.fixture
def rig(qtbot):
    return make_rig(ready_state(None))


def make_rig(state: ViewState) -> SimpleNamespace:
    files, status, presenter, tuner, helpers, worker = (FakeFiles([A, B]), FakeStatus(), FakePresenter(),
                                                         FakeTuner(), FakeHelpers(), FakeWorker())
    opened, remembered, failures = [], [], []
    pictures = Pictures(state, files=files, status=status, presenter=presenter, tuner=tuner, reviewer=helpers,
                        editor=helpers, volumes=helpers, worker=worker, open_model=opened.append,
                        remember=remembered.append)
    pictures.image_failed.connect(lambda path, message: failures.append((path, message)))
    return SimpleNamespace(pictures=pictures, state=state, files=files, status=status, presenter=presenter,
                           tuner=tuner, helpers=helpers, worker=worker, opened=opened, remembered=remembered,
                           failures=failures)


def answer(rig, path: str, **changes):
    """The worker's result for the newest request of `path`."""
    [request] = [r for (r,) in rig.worker.called("process_view") if r.key.path == path][-1:]
    return replace(seg_view(path, generation=request.generation, request_id=request.request_id), **changes)


def test_showing_a_picture_saves_an_edit_in_progress_and_asks_the_worker_for_it(rig):
    rig.pictures.show(A)
    [(request,)] = rig.worker.called("process_view")
    assert request.key == ViewKey(A) and request.generation == rig.state.generation
    assert rig.files.statuses == {A: "running"}
    assert rig.helpers.names() == ["stop", "show"]  # the editor first: a correction is never dropped


def test_before_the_model_is_ready_the_worker_only_hears_that_a_picture_waits(qtbot):
    rig = make_rig(ViewState())
    rig.pictures.show(A)
    assert rig.worker.calls == [("note_image_waiting", ViewKey(A))]
    assert rig.files.statuses == {}


def test_the_answer_for_the_picture_shown_is_displayed(rig):
    rig.pictures.show(A)
    view = answer(rig, A)
    rig.worker.result_ready.emit(view)
    assert rig.presenter.calls == [("display", view)]
    assert rig.files.statuses[A] == "done" and rig.tuner.called("judged") == [(A,)]


def test_an_answer_for_a_picture_the_reader_has_left_is_kept_but_not_shown_and_going_back_needs_no_run(rig):
    rig.pictures.show(A)
    rig.pictures.show(B)  # the reader moved on before A's answer came
    late = answer(rig, A)
    rig.worker.result_ready.emit(late)
    assert rig.presenter.calls == []
    assert rig.files.statuses[A] == "done" and rig.tuner.called("judged") == [(A,)]  # its badge still counts
    asked = len(rig.worker.called("process_view"))
    rig.pictures.show(A)
    assert rig.presenter.calls == [("display", late)] and len(rig.worker.called("process_view")) == asked


def test_an_answer_of_a_replaced_model_is_dropped(rig):
    rig.pictures.show(A)
    old = answer(rig, A)
    rig.state.begin_model()  # another model was asked for meanwhile
    rig.worker.result_ready.emit(old)
    assert rig.presenter.calls == [] and rig.tuner.calls == [] and rig.files.statuses[A] == "running"
    assert rig.pictures.cached_view(A) is None


def test_a_failure_clears_the_screen_only_for_the_picture_wanted(rig):
    rig.pictures.show(A)
    rig.pictures.show(B)
    rig.worker.failed.emit(ViewFailed(1, A, "a.png: not an image"))
    assert rig.presenter.calls == []
    rig.worker.failed.emit(ViewFailed(2, B, "b.png: truncated"))
    assert rig.presenter.calls == [("failed", "b.png: truncated")]
    assert rig.files.called("set_status")[-2:] == [(A, "error", "a.png: not an image"),
                                                   (B, "error", "b.png: truncated")]
    assert rig.failures == [(A, "a.png: not an image"), (B, "b.png: truncated")]


def test_a_retry_shows_its_picture_only_when_it_is_the_one_wanted(rig):
    rig.pictures.show(A)
    rig.pictures.show(B)
    pixels = np.zeros((4, 6), np.uint8)
    for path in (A, B, None):  # the picture passed over, the one wanted, none (the model's own warm-up)
        picture = BarePicture(ViewKey(path), pixels, (4, 6)) if path else None
        rig.worker.remote_retrying.emit(RemoteRetrying(f"retrying {path}", picture))
    assert rig.presenter.calls == [("waiting", f"retrying {B}")]


def test_a_picture_passed_over_unprocessed_goes_back_to_pending(rig):
    rig.pictures.show(A)
    rig.pictures.show(B)
    rig.worker.skipped.emit(ViewSkipped(1, A))
    rig.worker.skipped.emit(ViewSkipped(2, B))  # still wanted: it is coming
    assert rig.files.statuses == {A: "pending", B: "running"}


def test_tile_progress_is_said_only_for_the_picture_wanted(rig):
    rig.pictures.show(B)
    rig.worker.tile_progress.emit(TileProgress(A, 1, 4))
    rig.worker.tile_progress.emit(TileProgress(B, 2, 4))
    rig.worker.tile_progress.emit(TileProgress(B, 4, 4))
    assert rig.status.messages == ["b.png: tile 2 of 4", ""]


def test_tile_progress_names_a_picture_as_its_row_does(rig):
    rig.files.name_of = lambda path: "CT · CHEST · Axial (3 slices)" if path == B else path  # a series' row
    rig.pictures.show(B)
    rig.worker.tile_progress.emit(TileProgress(B, 2, 4))
    assert rig.status.messages == ["CT · CHEST · Axial (3 slices): tile 2 of 4"]


def test_opening_lists_the_images_found_opens_a_model_among_them_and_shows_the_first(rig, tmp_path):
    for name in ("b.png", "a.png"):
        Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    rig.files.root = tmp_path
    rig.pictures.add_paths([tmp_path / "model.onnx", tmp_path])
    assert rig.opened == [tmp_path / "model.onnx"] and rig.remembered == [tmp_path]
    assert rig.files.called("set_inputs") == [([str(tmp_path / "a.png"), str(tmp_path / "b.png")],)]
    assert rig.tuner.called("tune") == [({"input_root": str(tmp_path)},)]
    # the editor stopped (its correction saved) while the picture it edits was still listed: its review file is
    # named by the list (was: stopped only when the first new picture showed, a KeyError, the correction lost)
    assert rig.helpers.names() == ["stop", "open"] and rig.files.called("setCurrentRow") == [(0,)]
    assert rig.status.messages == ["2 images"]


def test_opening_nothing_readable_says_so(rig, tmp_path):
    (tmp_path / "notes.txt").write_text("not an image")
    rig.pictures.add_paths([tmp_path])
    assert rig.status.messages == ["No images found in what was opened"] and rig.files.called("set_inputs") == []
