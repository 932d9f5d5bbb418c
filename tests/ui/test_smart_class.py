"""The Smart tool's class box follows the click that starts a prompt: on an object the model gave a class, that
class is chosen (Enter adds the proposal to the object clicked, not to whatever class the box last held); on the
background, and for the next points of the same prompt, the chosen class stays."""

from __future__ import annotations

import pytest
from conftest import stripes
from onnx_factory import class_metadata
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from ui.test_smart import TIMEOUT, click, smart_on

BACKGROUND, GREEN, BLUE = (15, 60), (90, 60), (160, 60)  # image pixels in stripes(120, 180): classes 0, 1, 2


@pytest.fixture
def window(qtbot, make_main_window, models, tmp_path):
    model = models("rgb_classes", metadata=class_metadata(["bg", "green", "blue"]))
    Image.fromarray(stripes(120, 180)).save(tmp_path / "parts.png")
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([tmp_path / "parts.png"])
    window.viewer.actual_size()
    return window


def test_the_class_box_starts_at_the_class_under_the_click(qtbot, window):
    smart, edit = smart_on(qtbot, window), window.panel.edit
    assert edit.label() == 1 and window.editor.mask[BLUE[1], BLUE[0]] == 2
    click(qtbot, window, *BLUE)
    assert edit.label() == 2  # the blue part clicked: blue chosen
    click(qtbot, window, *GREEN)  # a second point of the same prompt: the class stays
    assert edit.label() == 2
    QTest.keyClick(window, Qt.Key.Key_Escape)
    assert not smart.prompting
    click(qtbot, window, *GREEN)
    assert edit.label() == 1
    QTest.keyClick(window, Qt.Key.Key_Escape)
    click(qtbot, window, *BACKGROUND)  # nothing there to follow: the chosen class stays
    assert edit.label() == 1
