"""The side panel's model line says the model's task as `seglens-cli models` does: an anomaly model (a map and an
image score) is "anomaly", not the "segmentation" its map is run as."""

from __future__ import annotations

from app.inference.model.builder import load_spec
from app.ui.widgets.panels import SidePanel


def _line(qtbot, spec) -> str:
    panel = SidePanel()
    qtbot.addWidget(panel)
    panel.show_model(spec)
    return panel._model_label.text().replace("\u200b", "")


def test_an_anomaly_model_is_called_anomaly(qtbot, models):
    model = models("anomaly_named")
    assert f"<br>anomaly · {model.name}" in _line(qtbot, load_spec(model))


def test_a_segmentation_model_is_still_called_segmentation(qtbot, models):
    model = models("binary_logits")
    assert f"<br>segmentation · {model.name}" in _line(qtbot, load_spec(model))


def test_the_image_facts_show_the_window_rounded_as_the_status_bar_does(qtbot):
    """A NIfTI's automatic window read "L -213.958 / W 1572.08"; a small window keeps its digits."""
    from app.ui.widgets.panels import ImageInfo

    info = ImageInfo()
    qtbot.addWidget(info)
    info.show_info({}, (-213.958, 1572.08), 0, 1)
    assert "L -214 / W 1572" in info.text.text()
    info.show_info({}, (0.35, 0.8), 0, 1)
    assert "L 0.35 / W 0.8" in info.text.text()
