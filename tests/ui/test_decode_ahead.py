"""The picture that waits for the model at start-up is decoded on the worker as soon as the session is built, while
the window answers `model_ready` with its request (docs/PERFORMANCE.md, "Start-up after issue 24"): decoded once,
shown as before, and a failure still said by the request."""

from __future__ import annotations

import traceback

import numpy as np
import pytest
from conftest import stripes
from PIL import Image

from app.inference.image import pipeline

TIMEOUT = 20_000


@pytest.fixture
def decodes(monkeypatch):
    """(path, decoded inside load_model?) of every pipeline.decode call."""
    calls: list[tuple[str, bool]] = []
    real = pipeline.decode

    def counted(path, *, frame=0):
        ahead = any(f.name == "load_model" for f in traceback.extract_stack())
        calls.append((str(path), ahead))
        return real(path, frame=frame)

    monkeypatch.setattr(pipeline, "decode", counted)
    return calls


def test_the_waiting_picture_is_decoded_once_with_the_model_and_shown_as_before(qtbot, make_main_window, models,
                                                                                tmp_path, decodes):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    Image.fromarray(stripes(60, 90)).save(first)
    Image.fromarray(stripes(30, 45)).save(second)
    win = make_main_window(models("rgb_classes"), load=False)
    win.add_paths([first, second])
    win.files.setCurrentRow(1)  # the reader moved on while the model loads: the last one selected is what waits
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT, check_params_cb=lambda p: p == str(second)):
        win.open_model()
    assert decodes == [(str(second), True)]  # not again for its request, and `a.png` not at all
    view = win.cached_view(second)
    assert np.array_equal(view.display_pixels, stripes(30, 45))
    assert view.result.timings["decode"] > 0  # the time it took is still reported
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT, check_params_cb=lambda p: p == str(first)):
        win.files.setCurrentRow(0)  # later pictures are decoded by their requests
    assert decodes[1:] == [(str(first), False)]


def test_a_waiting_picture_that_cannot_be_read_fails_with_the_same_line(qtbot, make_main_window, models, tmp_path,
                                                                       decodes):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"this is text, not a PNG")
    win = make_main_window(models("rgb_classes"), load=False)
    win.add_paths([broken])
    with qtbot.waitSignal(win.image_failed, timeout=TIMEOUT) as waiting:
        win.open_model()
    with qtbot.waitSignal(win.image_failed, timeout=TIMEOUT) as again:  # asked for with the model ready
        win.show_path(str(broken))
    assert [ahead for _, ahead in decodes] == [True, False, False]
    assert waiting.args[1] == again.args[1] and "broken.png" in waiting.args[1]
