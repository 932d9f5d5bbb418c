"""The viewer says when the picture does not fit the model: an amber line in the panel (app.inference.image.fit), gone
for a picture that fits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from PySide6.QtWidgets import QLabel

from app.ui.widgets.legend import UNCERTAIN_COLOR

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 20_000


def test_a_photo_under_the_ct_demo_gets_an_amber_line(qtbot, make_main_window, tmp_path):
    y, x = np.mgrid[0:60, 0:80]
    Image.fromarray(np.stack([x * 3 % 256, y * 4 % 256, (x + y) % 256], -1).astype(np.uint8)).save(
        tmp_path / "photo.png")
    window = make_main_window(REPO / "models" / "ct_demo.onnx")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([tmp_path / "photo.png"])
    text = window.panel.misfit_text()
    assert text.splitlines() == [
        "⚠ a colour image into ct_demo.onnx, a gray (1-channel) model: its colours are lost",
        "⚠ ct_demo.onnx expects CT (input.modality) but this is an 8-bit PNG photo, not a CT scan"]
    assert UNCERTAIN_COLOR in window.panel.findChild(QLabel, "misfit").styleSheet()
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([REPO / "resources" / "samples" / "ct" / "IM0016"])
    assert window.panel.misfit_text() == ""
