"""What crosses the thread boundary is one typed frozen record (docs/architecture.md, "The seams": the worker
records): every signal of the inference and display workers, every worker slot, and every controller signal
that goes to a worker carries one app.ui.state.messages record — no positional ints, paths and objects, no
tuples indexed by number, no plain dicts. Was: `Signal(list, str, list, object, object)`, `Signal(int, object)`,
`VolumeView.fill_requested = Signal(object, object, object)`."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QMetaMethod, QObject

from app.ui.controllers.comparer import Comparer
from app.ui.controllers.loader import ModelLoader
from app.ui.controllers.pictures import Pictures
from app.ui.controllers.presenter import Presenter
from app.ui.controllers.reporter import ReportExporter
from app.ui.controllers.run_all import RunOnAll
from app.ui.controllers.tuner import Tuner
from app.ui.controllers.volume_view import VolumeView
from app.ui.state import messages
from app.ui.workers.windowing import WindowingWorker
from app.ui.workers.worker import InferenceWorker

TIMEOUT = 20_000
WORKERS = (InferenceWorker, WindowingWorker)
# the controllers' signals that are connected to a worker's slot
TO_WORKERS = {Pictures: "view_requested", ModelLoader: "load_requested", Comparer: "model_b_requested",
              RunOnAll: "requested", ReportExporter: "report_requested", Tuner: "retune_requested",
              Presenter: "window_requested", VolumeView: "fill_requested"}


def _methods(cls: type[QObject], kind: QMetaMethod.MethodType) -> dict[str, list[str]]:
    """name → parameter types of the signals or slots `cls` itself declares."""
    meta = cls.staticMetaObject
    found = {}
    for index in range(meta.methodOffset(), meta.methodCount()):
        method = meta.method(index)
        if method.methodType() == kind:
            found[bytes(method.name()).decode()] = [bytes(t).decode() for t in method.parameterTypes()]
    return found


@pytest.mark.parametrize("cls", WORKERS, ids=lambda c: c.__name__)
def test_each_worker_signal_and_slot_takes_one_record(cls):
    signals = _methods(cls, QMetaMethod.MethodType.Signal)
    slots = _methods(cls, QMetaMethod.MethodType.Slot)
    assert signals and {name: types for name, types in {**signals, **slots}.items() if types != ["PyObject"]} == {}


def test_each_controller_signal_to_a_worker_takes_one_record():
    compare_all = _methods(Comparer, QMetaMethod.MethodType.Signal)["compare_all_requested"]
    wrong = {f"{cls.__name__}.{name}": types for cls, name in TO_WORKERS.items()
             if (types := _methods(cls, QMetaMethod.MethodType.Signal)[name]) != ["PyObject"]}
    assert wrong == {} and compare_all == ["PyObject"]


def _is_record(value) -> bool:
    return (dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen
            and type(value).__module__ == messages.__name__)


def test_what_the_worker_sends_back_is_a_frozen_messages_record(qtbot, make_main_window, ct_model, tmp_path):
    from tests.dicom_factory import write_series

    write_series(tmp_path / "ct", slices=4, suffix="")
    win = make_main_window(ct_model, load=False)
    sent: list[tuple[str, tuple]] = []
    for name in _methods(InferenceWorker, QMetaMethod.MethodType.Signal):
        getattr(win.worker, name).connect(lambda *args, name=name: sent.append((name, args)))
    with qtbot.waitSignal(win.model_changed, timeout=TIMEOUT):
        win.open_model()
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "ct"])
    qtbot.waitUntil(lambda: "all 4 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    with qtbot.waitSignal(win.run_all_finished, timeout=TIMEOUT):
        win.run_all(None)
    names = {name for name, _ in sent}
    assert {"model_ready", "result_ready", "volume_counted", "batch_finished"} <= names
    assert [(name, args) for name, args in sent if len(args) != 1 or not _is_record(args[0])] == []
    result = next(args[0] for name, args in sent if name == "result_ready")
    assert result.request_id > 0 and result.generation == next(a[0] for n, a in sent if n == "model_ready").generation
