"""Model B failing on a picture (a NaN output): the viewer says what happened to B, and keeps A's result. Was: the
whole picture failed (A's overlay gone, the file marked failed for B's fault)."""

from __future__ import annotations

import math

from conftest import stripes
from PIL import Image

TIMEOUT = 20_000
CLASSES = "classes: [good, scratch, pit]\n"


def test_a_nan_model_b_is_named_with_its_error_and_a_stays_on_screen(qtbot, make_main_window, models, tmp_path):
    a = models("constant_map", "a", values=(0.0, 1.0, 0.0))  # everything class 1
    b = models("constant_map", "b", values=(math.nan, 1.0, 0.0))
    for model in (a, b):
        model.with_suffix(".yaml").write_text(CLASSES)
    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(stripes(40, 60)).save(folder / "s.png")
    window = make_main_window(a)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(b)
    view = window.state.shown
    assert view.result_b is None and view.agreement is None and int((view.result.mask == 1).sum()) == 40 * 60
    assert window.panel.decision.comparison_text() == (
        "model B b.onnx failed on this image: b.onnx: non-finite model output 'scores': 4096 NaN of 12288 values; "
        "the model is broken, so no decision is made from it")
    assert window.files.status(str(folder / "s.png")) != "error"  # the file is fine, and A ran on it


def test_compare_all_says_what_happened_to_model_b(qtbot, make_main_window, models, tmp_path):
    """Was: '0 images compared, 1 could not be read' for an image that reads fine and a model B that is broken."""
    a = models("constant_map", "a", values=(0.0, 1.0, 0.0))
    b = models("constant_map", "b", values=(math.nan, 1.0, 0.0))
    for model in (a, b):
        model.with_suffix(".yaml").write_text(CLASSES)
    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(stripes(40, 60)).save(folder / "s.png")
    (folder / "v.png").write_bytes(b"not an image")
    window = make_main_window(a)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    with qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(b)
    with qtbot.waitSignal(window.comparer.compare_finished, timeout=TIMEOUT) as finished:
        window.compare_all()
    completed, message = finished.args
    assert completed and message.startswith("0 images compared, 1 could not be read, 1 failed: ")
    assert message.endswith(f"{folder / 's.png'}: b.onnx: non-finite model output 'scores': 4096 NaN of 12288 "
                            "values; the model is broken, so no decision is made from it")
