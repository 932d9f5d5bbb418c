"""The model-B controller driven with a fake worker (no window, no thread, no model): what it asks the worker for,
and what each answer puts in the decision panel, the view state and the status bar."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QObject, Signal

from app.ui.controllers.comparer import Comparer
from app.ui.state.messages import (
    AgreementMeasured,
    CompareAllRequest,
    CompareFinished,
    ModelBFailed,
    ModelBRequest,
)
from app.ui.state.view_state import ViewState
from app.ui.widgets.decision import DecisionControls
from app.ui.widgets.file_list import FileList
from app.ui.widgets.status import StatusBar


class FakeWorker(QObject):
    """The InferenceWorker's model-B face: its four answers as signals, its two slots recording what was asked."""

    model_b_ready = Signal(object)
    model_b_failed = Signal(object)  # ModelBFailed
    agreement_ready = Signal(object)  # AgreementMeasured
    compare_finished = Signal(object)  # CompareFinished

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[ModelBRequest] = []
        self.compared: list[CompareAllRequest] = []

    def load_model_b(self, request: ModelBRequest) -> None:
        self.loads.append(request)

    def compare_all(self, request: CompareAllRequest) -> None:
        self.compared.append(request)


@pytest.fixture
def rig(qtbot):
    files, status, decision = FileList(), StatusBar(), DecisionControls()
    for widget in (files, status, decision):
        qtbot.addWidget(widget)
    worker, state, refreshed, messages = FakeWorker(), ViewState(), [], []
    status.messageChanged.connect(messages.append)
    comparer = Comparer(state, files=files, status=status, decision=decision, worker=worker,
                        refresh=lambda: refreshed.append(True))
    return SimpleNamespace(comparer=comparer, worker=worker, state=state, decision=decision, refreshed=refreshed,
                           messages=messages)


def test_open_asks_the_worker_for_model_b_on_the_device_and_runtime(rig):
    rig.comparer.open(Path("models") / "b.onnx", device="cuda", runtime="tensorrt=true")
    rig.comparer.open(None, device="cpu", runtime="")
    assert rig.worker.loads == [ModelBRequest(str(Path("models") / "b.onnx"), "cuda", "tensorrt=true"),
                                ModelBRequest("", "cpu", "")]
    assert rig.messages == ["Loading b.onnx to compare with…"]  # stopping says nothing until the worker answers


def test_model_b_ready_enables_b_in_the_panel_says_where_it_runs_and_shows_again(qtbot, rig):
    info = SimpleNamespace(provider_label="CPU", fallback_warns=True, fallback_reason="no CUDA here")
    summary = SimpleNamespace(spec=SimpleNamespace(path=Path("models") / "b.onnx"), info=info)
    with qtbot.waitSignal(rig.comparer.model_b_changed) as changed:
        rig.worker.model_b_ready.emit(summary)
    assert changed.args == [summary]
    assert rig.decision.model_b == "b.onnx"
    assert rig.messages == ["Comparing with b.onnx on CPU (fell back: no CUDA here)"]
    assert rig.refreshed == [True]
    with qtbot.waitSignal(rig.comparer.model_b_changed) as ended:
        rig.worker.model_b_ready.emit(None)
    assert ended.args == [None] and rig.decision.model_b is None and rig.refreshed == [True, True]


def test_compare_all_records_agreements_and_says_how_it_ended(qtbot, rig):
    rig.comparer.compare_all()
    assert rig.worker.compared == []  # nothing listed: nothing asked
    rig.worker.agreement_ready.emit(AgreementMeasured("/data/a.png", 0.75, 1, 2))
    assert rig.state.agreements == {"/data/a.png": 0.75}
    with qtbot.waitSignal(rig.comparer.compare_finished) as finished:
        rig.worker.compare_finished.emit(CompareFinished(True, "2 compared, mean IoU 0.750"))
    assert finished.args == [True, "2 compared, mean IoU 0.750"]
    assert rig.messages == ["Compare on all: 2 compared, mean IoU 0.750"]


def test_model_b_failure_is_said_in_one_line(qtbot, rig):
    with qtbot.waitSignal(rig.comparer.model_b_failed) as failed:
        rig.worker.model_b_failed.emit(ModelBFailed("b.onnx: not an ONNX model"))
    assert failed.args == ["b.onnx: not an ONNX model"]
    assert rig.messages == ["Not comparing: b.onnx: not an ONNX model"]
