"""The prompt worker (issue 28, contract 4) on its own thread, without a window: every signal and slot takes one
typed frozen record of app.ui.state.prompt_messages; a prefetch encodes the next picture with the key and pixels
the editor later sends (so it is not encoded again); ONNX Runtime's RunOptions.terminate cancels an encoder run
(nothing cached, nothing counted); a foreground request stops a prefetch of many pictures."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image
from PySide6.QtCore import QMetaMethod, QObject, QThread, Signal
from waiting import until

from app.errors import InferenceError
from app.inference.prompt.model import Point, load_prompt_model
from app.ui.controllers.smart import Smart, shown_image
from app.ui.state import prompt_messages
from app.ui.state.prompt_messages import DecodeRequest, PrefetchImage, PrefetchRequest, PromptLoad
from app.ui.state.view_state import LatestRequest
from app.ui.workers.prompt_worker import PromptWorker, prefetch_image
from app.ui.workers.threads import stop_thread
from ui.controllers.fakes import seg_view

TIMEOUT = 20_000


def _methods(cls: type[QObject], kind: QMetaMethod.MethodType) -> dict[str, list[str]]:
    meta = cls.staticMetaObject
    return {bytes(meta.method(i).name()).decode(): [bytes(t).decode() for t in meta.method(i).parameterTypes()]
            for i in range(meta.methodOffset(), meta.methodCount()) if meta.method(i).methodType() == kind}


def test_each_prompt_worker_signal_and_slot_and_each_request_signal_takes_one_record():
    signal, slot = QMetaMethod.MethodType.Signal, QMetaMethod.MethodType.Slot
    both = {**_methods(PromptWorker, signal), **_methods(PromptWorker, slot)}
    assert len(both) == 11 and {name: types for name, types in both.items() if types != ["PyObject"]} == {}
    requests = {name: types for name, types in _methods(Smart, QMetaMethod.MethodType.Signal).items()
                if name.endswith("_requested")}
    assert len(requests) == 4 and all(types == ["PyObject"] for types in requests.values())


class Driver(QObject):
    load = Signal(object)
    decode = Signal(object)
    prefetch = Signal(object)


@pytest.fixture
def worker(qtbot):
    latest, latest_prefetch = LatestRequest(), LatestRequest()
    worker = PromptWorker(latest=latest, latest_prefetch=latest_prefetch)
    thread = QThread()
    thread.setObjectName("prompt-test")
    worker.moveToThread(thread)
    driver = Driver()
    driver.load.connect(worker.load)
    driver.decode.connect(worker.decode)
    driver.prefetch.connect(worker.prefetch)
    sent = []
    for name in _methods(PromptWorker, QMetaMethod.MethodType.Signal):
        getattr(worker, name).connect(lambda *args, name=name: sent.append((name, args)))
    thread.start()
    with qtbot.waitSignal(worker.ready, timeout=TIMEOUT):
        driver.load.emit(PromptLoad(1, "prompt_demo"))
    yield worker, driver, latest, latest_prefetch, sent
    stop_thread(thread, timeout_ms=10_000, give_up_ms=30_000)
    worker.deleteLater()
    assert all(len(args) == 1 and dataclasses.is_dataclass(args[0]) and
               type(args[0]).__dataclass_params__.frozen and type(args[0]).__module__ == prompt_messages.__name__
               for _, args in sent)


def picture(path, value: int) -> np.ndarray:
    image = np.full((90, 120), 200, np.uint8)
    image[30:60, 40:80] = value
    Image.fromarray(image).save(path)
    return image


def test_a_prefetched_picture_is_the_one_the_editor_sends_and_is_not_encoded_again(qtbot, worker, tmp_path):
    worker, driver, latest, latest_prefetch, _ = worker
    pixels = picture(tmp_path / "b.png", 20)
    assert worker.model.encoder_runs == 0  # the warm-up is not counted
    with qtbot.waitSignal(worker.prefetched, timeout=TIMEOUT) as done:
        driver.prefetch.emit(PrefetchRequest(latest_prefetch.issue(), (PrefetchImage(str(tmp_path / "b.png")),)))
    assert done.args[0].encode_ms > 0 and worker.model.encoder_runs == 1
    # the editor's request for it, made as the Smart tool makes it from the picture shown
    view = seg_view(str(tmp_path / "b.png"), mask=np.zeros((90, 120), np.uint8))
    view = dataclasses.replace(view, display_pixels=pixels)
    image = shown_image(view, None)
    assert image.key == done.args[0].key
    np.testing.assert_array_equal(prefetch_image(PrefetchImage(str(tmp_path / "b.png"))).pixels, image.pixels)
    with qtbot.waitSignal(worker.proposal, timeout=TIMEOUT) as proposal:
        driver.decode.emit(DecodeRequest(latest.issue(), image, (Point(60, 45),)))
    assert proposal.args[0].encode_ms < done.args[0].encode_ms and proposal.args[0].mask[45, 60]
    assert worker.model.encoder_runs == 1  # not encoded again
    with qtbot.waitSignal(worker.prefetched, timeout=TIMEOUT) as again:  # nor decoded again
        driver.prefetch.emit(PrefetchRequest(latest_prefetch.issue(), (PrefetchImage(str(tmp_path / "b.png")),)))
    assert again.args[0].encode_ms == 0.0 and worker.model.encoder_runs == 1


def test_run_options_terminate_cancels_an_encoder_run_and_nothing_is_cached():
    session = load_prompt_model("prompt_demo", "cpu")
    image = np.zeros((64, 64), np.uint8)
    options = ort.RunOptions()
    options.terminate = True
    with pytest.raises(InferenceError, match="prompt_demo_encoder.onnx: inference failed"):
        session.embed(image, key="a", run_options=options)
    assert session.encoder_runs == 0 and not session.cached("a")
    session.embed(image, key="a", run_options=ort.RunOptions())
    assert session.encoder_runs == 1 and session.cached("a")


def _until_quiet(qtbot, worker, driver, latest, image, sent) -> None:
    """Ping the worker (a prompt on the picture shown, its embedding cached) until a round trip brings no prefetch
    signal: each step of a prefetch posts the next behind what is queued, and each that encodes says so, so a
    quiet round trip means the steps queued before it have run and none went on."""
    def quiet_round_trip() -> bool:
        before = len(sent)
        with qtbot.waitSignal(worker.proposal, timeout=TIMEOUT):
            driver.decode.emit(DecodeRequest(latest.issue(), image, (Point(10, 10),)))
        return not [name for name, _ in sent[before:] if name == "prefetched"]

    until(quiet_round_trip, what="a round trip to the prompt worker with no prefetch in it", within_s=TIMEOUT / 1000)


def test_a_foreground_request_stops_a_prefetch_of_many_pictures(qtbot, worker, tmp_path):
    worker, driver, latest, latest_prefetch, sent = worker
    items = []
    for value in range(8):
        picture(tmp_path / f"p{value}.png", 10 + 10 * value)
        items.append(PrefetchImage(str(tmp_path / f"p{value}.png")))
    with qtbot.waitSignal(worker.prefetched, timeout=TIMEOUT):
        driver.prefetch.emit(PrefetchRequest(latest_prefetch.issue(), tuple(items)))
    # what the Smart tool does on a click: queued prefetches replaced, the encoder run in flight cancelled
    latest_prefetch.issue()
    worker.cancel_prefetch()
    image = prompt_messages.PromptImage(prompt_messages.PromptKey("shown.png"), np.full((90, 120), 90, np.uint8))
    with qtbot.waitSignal(worker.proposal, timeout=TIMEOUT):
        driver.decode.emit(DecodeRequest(latest.issue(), image, (Point(10, 10),)))
    _until_quiet(qtbot, worker, driver, latest, image, sent)  # nothing more comes
    encoded = [args[0] for name, args in sent if name == "prefetched" and args[0].encode_ms > 0]
    assert 1 <= len(encoded) <= 2 and worker.model.encoder_runs <= 3  # ≤ 2 prefetched + the shown picture
    assert all(args[0].message in ("", "cancelled") for name, args in sent if name == "prefetched")
