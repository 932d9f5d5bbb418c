"""The slice bar under the image for volumes (DICOM series, multi-frame DICOM, NIfTI): a slider, the slice number
and its position along the normal in mm, the spacing, and what is wrong with the series (a gap, a split)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QSlider, QVBoxLayout, QWidget

from app.ui.widgets.fit import FitLabel
from app.ui.widgets.lazy_qt import set_enum

if TYPE_CHECKING:
    from app.io.volumes import Volume


class SliceBar(QWidget):
    slice_changed = Signal(int)  # the slice the reader moved to (0-based)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.slider = QSlider()
        set_enum(self.slider, "orientation", "Horizontal")
        self.slider.setToolTip("Slice (PgUp / PgDn, or Ctrl + mouse wheel)")
        # the slice, its position and the series' facts: elided, whole on hover; the warnings wrap in 3 lines
        self.label = FitLabel(hint_width=520)
        self.label.setMinimumWidth(220)
        self.warnings = FitLabel(lines=3, hint_width=640)
        self.warnings.setStyleSheet("color: #ff9f0a;")
        row = QHBoxLayout()
        row.addWidget(self.slider, 1)
        row.addWidget(self.label)
        column = QVBoxLayout(self)
        column.setContentsMargins(6, 2, 6, 2)
        column.addLayout(row)
        column.addWidget(self.warnings)
        self._volume: Volume | None = None
        self.slider.valueChanged.connect(self._on_value)
        self.hide()

    def show_volume(self, volume, index: int) -> None:
        """Show `volume` at slice `index` (None: hide the bar, the picture is not a volume)."""
        self._volume = volume
        if volume is None:
            self.hide()
            return
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, volume.depth - 1))
        self.slider.setValue(index)
        self.slider.blockSignals(False)
        self._describe(index)
        self.warnings.setText("\n".join(f"⚠ {w}" for w in volume.warnings))
        self.warnings.setVisible(bool(volume.warnings))
        self.show()

    def index(self) -> int:
        return self.slider.value()

    def _on_value(self, value: int) -> None:
        self._describe(value)
        self.slice_changed.emit(value)

    def _describe(self, index: int) -> None:
        volume = self._volume
        if volume is None:  # hidden: no volume shown (a value set while hidden has nothing to describe)
            return
        parts = [f"Slice {index + 1} / {volume.depth}"]
        position = volume.slice_position_mm(index)
        if position is not None:
            parts.append(f"{position:.1f} mm")
        if volume.spacing is not None:
            parts.append(f"step {volume.spacing[0]:.2g} mm")
        convention = view_convention(volume.orientation_labels())
        if convention:
            parts.append(convention)
        self.label.setText("  ·  ".join(parts))


def view_convention(labels: dict[str, str] | None) -> str:
    """How the slice is shown, said in words: the patient's right on the screen's left is the radiological
    convention (axial DICOM as stored); the other way round, the neurological one (common in NIfTI)."""
    if not labels:
        return ""
    left = labels.get("left", "")[:1]
    if left == "R":
        return "radiological view (patient's right on the left)"
    if left == "L":
        return "neurological view (patient's right on the right)"
    return ""
