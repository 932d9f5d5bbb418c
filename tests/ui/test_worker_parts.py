"""The inference worker composes its batch jobs and volume count (issue 25): no mixins; each collaborator answers
on the worker's own signals, which is what the window connects to."""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.ui.state.messages import (
    CompareAllRequest,
    CompareFinished,
    FillRequest,
    ReportFinished,
    ReportRequest,
    RunAllRequest,
)
from app.ui.workers.worker import InferenceWorker


def test_the_worker_is_a_plain_qobject_without_mixins():
    assert InferenceWorker.__bases__ == (QObject,)


def test_without_a_model_each_job_answers_on_the_workers_signals(qtbot):
    worker = InferenceWorker()
    with qtbot.waitSignal(worker.batch_finished, timeout=1000) as run:
        worker.run_all(RunAllRequest(()))
    with qtbot.waitSignal(worker.report_finished, timeout=1000) as report:
        worker.export_report(ReportRequest(entries=(), report_path="r.html", tuning=None, reviews={}, model_name="m",
                                            model_sha256="", seglens_version="0"))
    with qtbot.waitSignal(worker.compare_finished, timeout=1000) as compared:
        worker.compare_all(CompareAllRequest(()))
    assert run.args[0].error == "no model is loaded" and report.args == [ReportFinished(error="no model is loaded")]
    assert compared.args == [CompareFinished(False, "load model B first (Model ▸ Compare with another model…)")]
    assert worker.batch_session_threads is None
    worker.fill_volume(FillRequest("a.nii", object(), None))  # no model: nothing is counted, and nothing is raised
    worker.stop_fill()
