"""The right-hand panel: overlay controls, the class legend (segmentation) or top-k (classification)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPixmap
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QLabel,
    QProgressBar,
    QSlider,
    QVBoxLayout,
    QWidget,
)


def _swatch(color) -> QPixmap:
    pixmap = QPixmap(14, 14)
    pixmap.fill(QColor(*color) if color else QColor(0, 0, 0, 0))
    return pixmap


class OverlayControls(QGroupBox):
    opacity_changed = Signal(float)
    contour_changed = Signal(bool)
    visible_changed = Signal(bool)

    def __init__(self, parent=None) -> None:
        super().__init__("Overlay", parent)
        self.visible = QCheckBox("Show overlay  (O; hold Space to peek)")
        self.visible.setChecked(True)
        self.opacity = QSlider(Qt.Orientation.Horizontal)
        self.opacity.setRange(0, 100)
        self.opacity.setPageStep(10)
        self.opacity.setToolTip("Opacity ([ and ] keys)")
        self.opacity_label = QLabel()
        self.mode = QComboBox()
        self.mode.addItems(["Filled", "Contour"])
        self.mode.setToolTip("Filled regions or outlines (C key)")
        form = QFormLayout(self)
        form.addRow(self.visible)
        form.addRow("Opacity", self.opacity)
        form.addRow("", self.opacity_label)
        form.addRow("Mode", self.mode)
        self.opacity.valueChanged.connect(self._on_opacity)
        self.mode.currentIndexChanged.connect(lambda i: self.contour_changed.emit(i == 1))
        self.visible.toggled.connect(self.visible_changed.emit)

    def _on_opacity(self, value: int) -> None:
        self.opacity_label.setText(f"{value} %")
        self.opacity_changed.emit(value / 100.0)

    def set_opacity(self, opacity: float) -> None:
        self.opacity.setValue(round(opacity * 100))
        self._on_opacity(self.opacity.value())


class Legend(QGroupBox):
    """One row per class: visibility checkbox, colour, name, pixels and area share."""

    visibility_changed = Signal(set)  # the set of hidden class indices

    def __init__(self, parent=None) -> None:
        super().__init__("Classes", parent)
        self._grid = QGridLayout(self)
        self._grid.setColumnStretch(2, 1)
        self._boxes: list[QCheckBox] = []
        self._counts: list[QLabel] = []

    def set_classes(self, classes) -> None:
        while self._grid.count():
            widget = self._grid.takeAt(0).widget()
            if widget:
                widget.deleteLater()
        self._boxes, self._counts = [], []
        for index, info in enumerate(classes):
            box = QCheckBox()
            box.setChecked(info.color is not None)
            box.setEnabled(info.color is not None)
            box.setToolTip("Show this class" if info.color else "Background is not painted")
            box.toggled.connect(self._emit)
            swatch = QLabel()
            swatch.setPixmap(_swatch(info.color))
            count = QLabel("–")
            count.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            for column, widget in enumerate((box, swatch, QLabel(info.name), count)):
                self._grid.addWidget(widget, index, column)
            self._boxes.append(box)
            self._counts.append(count)

    def set_counts(self, counts, total: int) -> None:
        for index, label in enumerate(self._counts):
            pixels = int(counts[index]) if index < len(counts) else 0
            label.setText(f"{pixels:,} px  {100.0 * pixels / max(total, 1):.2f} %")

    def clear_counts(self) -> None:
        for label in self._counts:
            label.setText("–")

    def hidden(self) -> set[int]:
        return {i for i, box in enumerate(self._boxes) if box.isEnabled() and not box.isChecked()}

    def set_hidden(self, index: int, hidden: bool) -> None:
        self._boxes[index].setChecked(not hidden)

    def _emit(self) -> None:
        self.visibility_changed.emit(self.hidden())


class TopK(QGroupBox):
    """Classification: the best classes with their scores as bars."""

    def __init__(self, parent=None) -> None:
        super().__init__("Top classes", parent)
        self._layout = QGridLayout(self)

    def set_predictions(self, predictions) -> None:
        while self._layout.count():
            widget = self._layout.takeAt(0).widget()
            if widget:
                widget.deleteLater()
        for row, p in enumerate(predictions):
            name = QLabel(f"{p.name}")
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setValue(round(p.score * 1000))
            bar.setFormat(f"{p.score:.1%}")
            self._layout.addWidget(name, row, 0)
            self._layout.addWidget(bar, row, 1)


class ImageInfo(QGroupBox):
    """DICOM/16-bit facts: patient and study fields, the window, and a frame slider for multi-frame files."""

    frame_changed = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__("Image", parent)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.frame = QSlider(Qt.Orientation.Horizontal)
        self.frame_label = QLabel()
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(self.frame_label)
        layout.addWidget(self.frame)
        self.frame.valueChanged.connect(self._on_frame)
        self.hide()

    def show_info(self, info: dict | None, window: tuple | None, frame: int, frames: int) -> None:
        fields = dict(info or {})
        fields.pop("Frames", None)
        if window is not None:
            fields["Window"] = f"L {window[0]:g} / W {window[1]:g}  (right-drag to change)"
        self.text.setText("<br>".join(f"<b>{k}</b>: {v}" for k, v in fields.items()))
        self.frame.blockSignals(True)
        self.frame.setRange(0, max(0, frames - 1))
        self.frame.setValue(frame)
        self.frame.blockSignals(False)
        self.frame.setVisible(frames > 1)
        self.frame_label.setVisible(frames > 1)
        self.frame_label.setText(f"Frame {frame + 1} of {frames}")
        self.setVisible(bool(fields) or frames > 1)

    def _on_frame(self, value: int) -> None:
        self.frame_label.setText(f"Frame {value + 1} of {self.frame.maximum() + 1}")
        self.frame_changed.emit(value)


class SidePanel(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.controls = OverlayControls()
        self.legend = Legend()
        self.top_k = TopK()
        self.image_info = ImageInfo()
        self.model_label = QLabel("No model")
        self.model_label.setWordWrap(True)
        self.model_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.addWidget(self.model_label)
        layout.addWidget(self.controls)
        layout.addWidget(self.legend)
        layout.addWidget(self.top_k)
        layout.addWidget(self.image_info)
        layout.addStretch(1)
        self.top_k.hide()

    def show_task(self, task: str) -> None:
        is_classification = task == "classification"
        self.legend.setVisible(not is_classification)
        self.controls.setVisible(not is_classification)
        self.top_k.setVisible(is_classification)
