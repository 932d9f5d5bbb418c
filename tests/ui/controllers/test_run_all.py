"""Run on all driven with a fake worker, file list, status bar and tuner (no window, no thread, no model): what it
refuses before asking the worker, the request it sends (the reader's tuning, what to save), and what each answer
puts in the list, the badges, the status bar and the folder's histogram."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Signal

from app.inference.decide.tuning import Judgement
from app.inference.decide.verdict import Verdict
from app.io.discover import discover
from app.runs.folder.writer import Outcome, RunSummary
from app.ui.controllers.run_all import RunOnAll
from app.ui.state.messages import BatchFinished, BatchProgress, RunAllRequest
from app.ui.state.view_state import ViewState
from ui.controllers.fakes import Fake, FakeFiles, FakeStatus, ready_state


class FakeWorker(Fake):
    """The InferenceWorker's Run-on-all face."""

    batch_progress = Signal(object)
    batch_finished = Signal(object)

    def run_all(self, request) -> None:
        self.record("run_all", request)

    def cancel_batch(self) -> None:
        self.record("cancel_batch")


class FakeTuner(Fake):
    def judged_in_run(self, path: str, judgement, threshold) -> None:
        self.record("judged_in_run", path, judgement, threshold)

    def show_folder(self) -> None:
        self.record("show_folder")


@pytest.fixture
def rig(qtbot, tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for name in ("a.png", "b.png"):
        Image.fromarray(np.zeros((4, 4), np.uint8)).save(folder / name)
    return make_rig(ready_state(None), discover([folder]), folder)


def make_rig(state: ViewState, inputs: list, folder: Path) -> SimpleNamespace:
    files, status, worker, tuner = FakeFiles(root=folder), FakeStatus(), FakeWorker(), FakeTuner()
    files.set_inputs(inputs)
    runner = RunOnAll(state, files=files, status=status, worker=worker, tuner=tuner)
    refused: list[str] = []
    runner.refused.connect(refused.append)
    return SimpleNamespace(runner=runner, state=state, files=files, status=status, worker=worker, tuner=tuner,
                           inputs=inputs, folder=folder, refused=refused)


def test_nothing_is_run_without_images_or_a_model(qtbot, rig, tmp_path):
    for idle in (make_rig(ready_state(None), [], tmp_path), make_rig(ViewState(), rig.inputs, tmp_path)):
        idle.runner.start(tmp_path / "out")
        assert idle.status.messages == ["Nothing to run: open images and wait for the model"]
        assert idle.worker.calls == [] and "start_run" not in idle.status.names()


def test_an_output_folder_inside_the_inputs_is_refused_before_the_worker_hears_of_it(rig):
    rig.runner.start(rig.folder / "out")
    [why] = rig.refused
    assert why.startswith(f"{rig.folder / 'out'} is inside the input folder ")
    assert rig.status.messages == [f"Run on all not started: {why}"]
    assert rig.worker.calls == [] and "start_run" not in rig.status.names()


def test_the_request_carries_the_listed_inputs_the_readers_tuning_and_what_to_save(rig, tmp_path):
    rig.state.set_tuning(threshold=0.4, score_limit=0.7)
    rig.runner.start(tmp_path / "out", ("mask",))
    rig.runner.start(None)  # scores and verdicts only: nothing written
    assert rig.worker.called("run_all") == [
        (RunAllRequest(tuple(rig.inputs), str(tmp_path / "out"), ("mask",), rig.state.tuning),),
        (RunAllRequest(tuple(rig.inputs), "", (), rig.state.tuning),)]
    assert rig.status.called("start_run") == [(2,), (2,)]


def test_each_finished_input_marks_its_row_its_badge_and_the_progress(rig, tmp_path):
    rig.state.set_tuning(threshold=0.4)
    rig.runner.start(None)
    rig.state.set_tuning(threshold=0.6)  # moved during the run: the run's badges were made at 0.4
    a, b = rig.inputs
    ok = Judgement(0.2, Verdict(True))
    rig.worker.batch_progress.emit(BatchProgress(Outcome(0, a, None, None), RunSummary(total=2, ok=1), ok))
    rig.worker.batch_progress.emit(BatchProgress(Outcome(1, b, None, "b.png: truncated"),
                                                 RunSummary(total=2, ok=1, failed=1)))
    assert rig.files.called("set_status")[-2:] == [(str(a.path), "done", ""), (str(b.path), "error",
                                                                                  "b.png: truncated")]
    assert rig.tuner.called("judged_in_run") == [(str(a.path), ok, 0.4)]  # a failure has no verdict
    assert rig.status.called("run_progress") == [(1,), (2,)]


def test_the_end_of_the_run_says_how_it_went_and_where_the_report_is_and_shows_the_folders_scores(qtbot, rig,
                                                                                                  tmp_path):
    report = str(tmp_path / "out" / "seglens_report.csv")
    with qtbot.waitSignal(rig.runner.finished) as finished:
        rig.worker.batch_finished.emit(BatchFinished(RunSummary(total=2, ok=2), report_path=report))
    assert finished.args[1] == report
    assert rig.status.called("showMessage") == [(f"Run on all done: 2 ok, 0 failed — {report}", 20000,
                                                 tmp_path / "out")]
    assert "end_run" in rig.status.names() and rig.tuner.names() == ["show_folder"]
    rig.worker.batch_finished.emit(BatchFinished(RunSummary(total=2, ok=1, cancelled=True)))
    assert rig.status.messages[-1] == "Run on all cancelled: 1 ok, 0 failed — scores only, nothing written"


def test_cancel_in_the_status_bar_tells_the_worker_between_images(rig):
    rig.status.cancel_requested.emit()
    assert rig.worker.calls == [("cancel_batch",)]
    assert rig.status.messages == ["Cancelling after the current image…"]
