"""Failures where the reader looks: a picture the server gave up on keeps its image and says so on the canvas and in
the status bar (with what to do), the remote badge stays in its failed state until a request is answered, the
previous picture's overlay never lies over the next one while the server is retried, a long server name never
widens the window past a 1280 px screen, a picture that does not fit its model shows with the warning over it, and
choosing a token in the remote dialog says nothing of the keyring before the reader asks it to remember anything.

The server is tests/remote_mocks.py's MockServer (busy: the next N requests answer UNAVAILABLE)."""

from __future__ import annotations

from pathlib import Path

import keyring
import keyring.backends.fail
import numpy as np
import pytest
from PIL import Image
from remote_mocks import MockServer
from waiting import round_trip

from app.inference.model.session import RemoteInfo, SessionInfo
from app.io.discover import InputFile
from app.runs.folder.writer import Outcome, RunSummary
from app.ui import actions
from app.ui.state.messages import BatchFinished, BatchProgress, ViewFailed
from app.ui.state.remote_messages import RemoteRetrying
from app.ui.widgets.status import REMOTE_STYLE
from ui.test_remote_device import NUCLEI, SAMPLES, TOKEN, WAIT, _dialog, _show, store  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
LONG_HOST = "inference-gpu-cluster-07.radiology-department.hospital-network.example.org:8001"


@pytest.fixture
def server():
    with MockServer(NUCLEI, name="nuclei", token=TOKEN, device="CPU") as mock:
        yield mock


@pytest.fixture
def window(make_main_window):
    return make_main_window(NUCLEI, device="cpu")


def _on_the_server(qtbot, window, server) -> str:
    """The server's model as the device; its badge's text."""
    dialog = _dialog(window, server.grpc_url)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    return window.status.provider.text()


def _has_image(window, size: tuple[int, int]) -> bool:
    """The viewer holds a picture of `size` (width, height) on its canvas."""
    return window.viewer.has_image() and window.viewer.image_size() == size


def _given_up(qtbot, window, server) -> tuple[str, Path]:
    """The server's model as the device, then a picture the server is busy for on every try (1 + 3 retries):
    (the badge's calm text, the picture) once the picture is given up on."""
    calm = _on_the_server(qtbot, window, server)
    server.state.busy = 4
    sample = SAMPLES / "nuclei_02_dense.png"
    with qtbot.waitSignal(window.image_failed, timeout=WAIT):
        window.add_paths([sample])
    return calm, sample


def test_a_picture_the_server_gave_up_on_keeps_its_image_and_says_so_on_the_canvas(qtbot, window, server):
    _, sample = _given_up(qtbot, window, server)
    assert _has_image(window, Image.open(sample).size), "the canvas went blank after the failure"
    host = server.grpc_url.removeprefix("grpc://")
    notice = window.viewer.notice_text()
    assert f"remote {host}/nuclei" in notice and "(tried 4 times)" in notice
    assert "Model ▸ Device" in notice  # what to do
    assert window.viewer.overlay_item.pixmap().isNull()  # no result: no overlay
    shown = _show(qtbot, window, SAMPLES / "nuclei_01.png")  # the server answers again: the notice goes
    assert shown.result.mask is not None and window.viewer.notice_text() == ""


def test_when_the_retries_are_spent_the_status_bar_says_what_failed_and_what_to_do(qtbot, window, server):
    window.resize(1280, 720)
    _given_up(qtbot, window, server)
    host = server.grpc_url.removeprefix("grpc://")
    message = window.status.currentMessage()
    sample = "nuclei_02_dense.png"
    assert message == f"Error: {sample}: no result from {host} after 4 tries — check the server or use a local " \
                      "device (Model ▸ Device)"
    label = window.status.notice.label  # at 1280 px, what to do is not cut off
    qtbot.waitUntil(lambda: label.text() == message, timeout=5000)


def test_the_badge_stays_failed_until_the_server_answers(qtbot, window, server):
    calm, _ = _given_up(qtbot, window, server)
    round_trip(qtbot, through=window.worker)  # whatever the worker sent after the failure is handled
    badge = window.status.provider
    assert badge.text().startswith("⚠ ") and badge.styleSheet() != REMOTE_STYLE, badge.text()
    assert "tried 4 times" in badge.toolTip()
    _show(qtbot, window, SAMPLES / "nuclei_01.png")  # answered: calm again
    qtbot.waitUntil(lambda: badge.text() == calm, timeout=WAIT)
    assert badge.styleSheet() == REMOTE_STYLE


def test_while_the_server_is_retried_the_previous_overlay_is_not_over_the_next_picture(qtbot, window, server):
    first = SAMPLES / "nuclei_01.png"
    _on_the_server(qtbot, window, server)
    _show(qtbot, window, first)
    assert not window.viewer.overlay_item.pixmap().isNull()
    server.state.busy = 2  # the next picture's first two tries
    after = SAMPLES / "nuclei_02_dense.png"
    window.files.setCurrentRow(-1)
    window.add_paths([after])
    qtbot.waitUntil(lambda: window.status.provider.text().startswith("⚠ "), timeout=WAIT)
    # the badge says the server is retried: the first picture's overlay is not on the canvas any more
    assert window.viewer.overlay_item.pixmap().isNull(), "the first picture's overlay is over the next picture"
    assert _has_image(window, Image.open(after).size)
    assert "retrying" in window.viewer.notice_text()
    qtbot.waitUntil(lambda: window.state.on_screen is not None and window.state.on_screen.path == after,
                    timeout=WAIT)
    assert not window.viewer.overlay_item.pixmap().isNull() and window.viewer.notice_text() == ""


def test_a_run_on_all_turns_the_badge_failed_and_calm_again_by_its_inputs(qtbot, window):
    status = window.status
    remote = RemoteInfo("10.0.0.5:8001", "nuclei", "", "onnxruntime_onnx")
    status.show_session(SessionInfo("remote", "remote", ("remote",), remote=remote), "Nuclei")
    calm = status.provider.text()
    gave_up = _progress("a.png", error="a.png: remote 10.0.0.5:8001/nuclei: no answer within 30 s (tried 4 times)")
    unreadable = _progress("b.png", error="b.png: not an image")
    ran = _progress("c.png", result=object())
    status.answered(gave_up)
    assert status.provider.text() == "⚠ remote: no result"
    status.answered(unreadable)  # not the server's failure, nor its answer
    assert status.provider.text() == "⚠ remote: no result"
    status.answered(BatchFinished(RunSummary()))  # the run's end is no input's answer
    assert status.provider.text() == "⚠ remote: no result"
    status.answered(ran)
    assert status.provider.text() == calm and status.provider.styleSheet() == REMOTE_STYLE


def _progress(name: str, *, error: str | None = None, result: object = None) -> BatchProgress:
    """A Run on all's input as the worker reports it: its outcome (a result, or the one-line error)."""
    return BatchProgress(Outcome(0, InputFile(Path(name), Path(name)), result, error), RunSummary())  # type: ignore[arg-type]


def test_a_long_server_name_failing_never_widens_the_window_past_the_screen(qtbot, window):
    _show(qtbot, window, SAMPLES / "nuclei_01.png")
    window.resize(1280, 720)
    qtbot.waitUntil(lambda: window.width() == 1280)
    remote = RemoteInfo(LONG_HOST, "nuclei-segmentation-large", "", "onnxruntime_onnx", server_device="CUDA (GPU 0)")
    status = window.status
    status.show_session(SessionInfo("remote", "remote", ("remote",), remote=remote), "Nuclei (demo, fluorescence)")
    where = f"remote {LONG_HOST}/nuclei-segmentation-large"
    status.show_retrying(RemoteRetrying(f"{where}: no answer within 30 s — retrying in 4 s (attempt 3 of 4)"))
    failure = f"/data/a.png: {where}: no answer within 30 s (tried 4 times)"
    status.answered(ViewFailed(7, "/data/a.png", failure))
    for _ in range(3):
        qtbot.wait(10)  # the layout's posted requests
    assert window.minimumSizeHint().width() <= 1280 and window.minimumWidth() <= 1280
    assert window.width() <= 1280, f"the window was widened to {window.width()} px"
    assert status.provider.text().startswith("⚠ ") and where in status.provider.toolTip()


@pytest.fixture
def photo(tmp_path) -> Path:
    y, x = np.mgrid[0:60, 0:80]
    path = tmp_path / "photo.png"
    Image.fromarray(np.stack([x * 3 % 256, y * 4 % 256, (x + y) % 256], -1).astype(np.uint8)).save(path)
    return path


def test_a_gray_model_on_a_colour_photo_shows_it_with_the_warning_over_it(qtbot, make_main_window, photo):
    window = make_main_window(REPO / "models" / "ct_demo.onnx")  # it runs, and means nothing
    with qtbot.waitSignal(window.overlay_shown, timeout=WAIT):
        window.add_paths([photo])
    assert _has_image(window, (80, 60))
    assert "a colour image into ct_demo.onnx, a gray (1-channel) model" in window.viewer.notice_text()


def test_a_3d_model_on_a_photo_shows_the_photo_with_why_over_it(qtbot, make_main_window, photo):
    window = make_main_window(REPO / "models" / "ct3d_demo.onnx")  # it cannot run on one picture
    with qtbot.waitSignal(window.image_failed, timeout=WAIT):
        window.add_paths([photo])
    assert _has_image(window, (80, 60)), "the canvas went blank"
    assert "ct3d_demo.onnx is a 3D model: open a volume" in window.viewer.notice_text()


def test_choosing_a_token_says_nothing_of_the_keyring_before_it_is_asked_to_remember(qtbot, window, server):
    keyring.set_keyring(keyring.backends.fail.Keyring())
    controller = actions.remote_controller(window)
    dialog = controller.open_dialog()
    dialog.url.setText(server.grpc_url)
    dialog.model.setText("nuclei")
    with qtbot.waitSignal(controller.probe.secret_found, timeout=WAIT):
        dialog.auth.setCurrentIndex(dialog.auth.findData("bearer"))
    round_trip(qtbot, through=controller.probe)
    assert dialog.answer.text() == "", dialog.answer.text()
    dialog.remember.setChecked(True)  # now the keyring is asked for something: it says it cannot
    assert "keyring" in dialog.answer.text()
