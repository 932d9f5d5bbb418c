"""The model loader driven with a fake worker, panel, status bar, presenter, editor, tuner and reviewer (no window,
no thread, no session): what opening a model asks for and clears, what a ready model puts on screen, and that the
answers about a model since replaced are ignored."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import Signal

from app.ui.controllers.loader import ModelLoader
from app.ui.state.messages import LoadRequest, ModelFailed, ModelSummary
from app.ui.state.view_state import ViewState
from ui.controllers.fakes import Fake, FakeFiles, FakePresenter, FakeStatus

MODEL = Path("models") / "lesions.onnx"


class FakeWorker(Fake):
    model_ready = Signal(object)
    model_failed = Signal(object)

    def load_model(self, request) -> None:
        self.record("load_model", request)

    def cancel_remote(self) -> None:
        self.record("cancel_remote")


class FakeModelPanel(Fake):
    """SidePanel's model face."""

    def show_model_loading(self, file_name: str, device: str) -> None:
        self.record("show_model_loading", file_name, device)

    def show_model(self, spec) -> None:
        self.record("show_model", spec)

    def show_model_error(self, message: str) -> None:
        self.record("show_model_error", message)

    def show_busy(self, text) -> None:
        self.record("show_busy", text)


class FakeLoaderStatus(FakeStatus):
    def show_loading(self, model_name: str) -> None:
        self.record("show_loading", model_name)

    def show_session(self, info, model_name: str) -> None:
        self.record("show_session", info, model_name)

    def show_failure(self, message: str) -> None:
        self.record("show_failure", message)


class FakeOthers(Fake):
    """The editor's stop, the tuner's model_ready and the reviewer's open and model identity."""

    model_path: Path | None = None
    model_sha256 = ""

    def stop(self) -> None:
        self.record("stop")

    def model_ready(self, sha256: str, spec) -> None:
        self.record("model_ready", sha256, spec)

    def open(self) -> None:
        self.record("open", self.model_path, self.model_sha256)


@pytest.fixture
def rig(qtbot):
    state, files, status, panel = ViewState(), FakeFiles(["data/a.png"]), FakeLoaderStatus(), FakeModelPanel()
    presenter, others, worker = FakePresenter(), FakeOthers(), FakeWorker()
    loaded, refreshed = [], []
    loader = ModelLoader(state, files=files, status=status, panel=panel, presenter=presenter, editor=others,
                         tuner=others, reviewer=others, worker=worker, runtime=lambda: "tensorrt=true",
                         loaded=lambda path, name: loaded.append((path, name)), refresh=lambda: refreshed.append(1))
    return SimpleNamespace(loader=loader, state=state, files=files, status=status, panel=panel, presenter=presenter,
                           others=others, worker=worker, loaded=loaded, refreshed=refreshed)


def summary(generation: int) -> ModelSummary:
    spec = SimpleNamespace(name="Lesions", path=MODEL)
    return ModelSummary(spec=spec, info="CPU session", sha256="12" * 32, generation=generation)


def test_opening_a_model_saves_an_edit_takes_the_old_overlay_off_and_asks_the_worker(rig):
    rig.loader.open(MODEL, "cuda")
    assert rig.others.calls == [("stop",)]
    assert rig.status.called("show_loading") == [("lesions",)]
    assert rig.panel.calls == [("show_model_loading", "lesions.onnx", "cuda")]
    assert rig.presenter.calls == [("model_switching", "Loading lesions.onnx…")]
    assert rig.worker.called("load_model") == [(LoadRequest(1, str(MODEL), "cuda", "tensorrt=true"),)]
    assert rig.state.model is None  # the old model's results are no longer wanted
    # a remote session's request in flight is given up before the new load is queued behind it
    assert [call[0] for call in rig.worker.calls] == ["cancel_remote", "load_model"]


def test_without_a_model_path_nothing_is_asked(rig):
    rig.loader.open()
    assert rig.worker.calls == [] and rig.others.calls == []


def test_a_ready_model_is_shown_remembered_and_every_picture_asked_again(qtbot, rig):
    rig.loader.open(MODEL, "cpu")
    ready = summary(rig.state.generation)
    with qtbot.waitSignal(rig.loader.model_changed) as changed:
        rig.worker.model_ready.emit(ready)
    assert changed.args == [ready] and rig.state.model is ready
    assert rig.loaded == [(MODEL, "Lesions")]
    assert rig.status.called("show_session") == [("CPU session", "Lesions")]
    assert rig.panel.calls[-2:] == [("show_model", ready.spec), ("show_busy", "Running Lesions…")]
    assert rig.others.calls[-2:] == [("model_ready", "12" * 32, ready.spec), ("open", MODEL, "12" * 32)]
    assert rig.files.statuses == {"data/a.png": "pending"} and rig.refreshed == [1]


def test_answers_about_a_model_since_replaced_are_ignored(rig):
    rig.loader.open(MODEL, "cpu")
    first = rig.state.generation
    rig.loader.open(Path("models") / "other.onnx")
    rig.others.calls.clear()
    rig.panel.calls.clear()
    rig.worker.model_ready.emit(summary(first))
    rig.worker.model_failed.emit(ModelFailed(first, "lesions.onnx: not an ONNX model"))
    assert rig.state.model is None and rig.loaded == [] and rig.refreshed == []
    assert rig.others.calls == [] and rig.panel.calls == [] and rig.status.messages == []


def test_a_failed_model_is_said_in_the_status_bar_and_the_panel_and_its_folder_only_at_debug(qtbot, rig, caplog):
    rig.loader.open(Path("/secret/patients") / "lesions.onnx", "cpu")
    caplog.set_level(logging.DEBUG)
    with qtbot.waitSignal(rig.loader.model_failed) as failed:
        rig.worker.model_failed.emit(ModelFailed(rig.state.generation, "lesions.onnx: not an ONNX model"))
    assert failed.args == ["lesions.onnx: not an ONNX model"]
    assert rig.status.called("show_failure") == [("lesions.onnx: not an ONNX model",)]
    assert rig.status.messages == ["Model error: lesions.onnx: not an ONNX model"]
    assert rig.panel.calls[-1] == ("show_model_error", "lesions.onnx: not an ONNX model")
    loud = [r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG]
    assert loud and not any("/secret" in line for line in loud)
