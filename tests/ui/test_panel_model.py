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
