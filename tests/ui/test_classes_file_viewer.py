"""The viewer's top-k panel with a `classes_file`: short names (the whole synset line as tooltip), and the amber
`Uncertain` line when the sidecar's limits say so."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from PySide6.QtWidgets import QLabel

from app.ui.widgets.legend import TopK

TIMEOUT = 20_000
SYNSET = "".join(f"n{k:08d} name{k}, synonym\n" for k in range(1000))


@pytest.fixture
def red_image(tmp_path):
    image = np.zeros((40, 40, 3), np.uint8)
    image[..., 0] = 128  # the wide classifier's class round(999 · 128 / 255) = 501
    path = tmp_path / "red.png"
    Image.fromarray(image).save(path)
    return path


def shown_top_k(qtbot, make_main_window, models, red_image, sidecar: str) -> TopK:
    model = models("wide_classifier")
    (model.parent / "synset.txt").write_text(SYNSET)
    model.with_suffix(".yaml").write_text(sidecar)
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([red_image])
    return window.panel.findChild(TopK)


def labels(top_k: TopK) -> list[QLabel]:
    return [label for label in top_k.findChildren(QLabel) if label.text()]


def test_top_k_shows_short_names_with_the_full_name_as_tooltip(qtbot, make_main_window, models, red_image):
    top_k = shown_top_k(qtbot, make_main_window, models, red_image, "classes_file: synset.txt\n")
    qtbot.waitUntil(lambda: bool(labels(top_k)), timeout=TIMEOUT)
    first = labels(top_k)[0]
    assert first.text() == "name501"
    assert "n00000501 name501, synonym" in first.toolTip()
    assert not top_k.findChild(QLabel, "uncertain")


def test_an_uncertain_result_gets_the_amber_line(qtbot, make_main_window, models, red_image):
    sidecar = "classes_file: synset.txt\noutput:\n  min_confidence: 0.99\n"
    top_k = shown_top_k(qtbot, make_main_window, models, red_image, sidecar)
    qtbot.waitUntil(lambda: top_k.findChild(QLabel, "uncertain") is not None, timeout=TIMEOUT)
    line = top_k.findChild(QLabel, "uncertain")
    assert line.text().startswith("Uncertain: top-1 0.") and line.text().endswith(" < 0.99")
    assert "#ff9f0a" in line.styleSheet()
