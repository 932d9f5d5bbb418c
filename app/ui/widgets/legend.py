"""What a result says of the model's classes: the class legend (segmentation: a row per class with its pixels, and
the whole volume's mL) and the top classes (classification), with the plain-text rule their labels follow."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QPixmap
from PySide6.QtWidgets import QCheckBox, QGridLayout, QGroupBox, QLabel, QProgressBar

from app.spelling import counted
from app.ui.widgets.fit import FitLabel
from app.ui.widgets.lazy_qt import Qt

if TYPE_CHECKING:
    from PySide6.QtWidgets import QLayoutItem

UNCERTAIN_COLOR = "#ff9f0a"  # amber: neither the OK green nor the NG red


def plain(value: object) -> str:
    """Text from a file (DICOM fields, a model's name, a path) as text inside our rich-text labels: `<img>` or a
    link in a patient field is shown as typed, never rendered or fetched."""
    import html  # here, not at the top: ~1.6 ms before the window shows, for labels filled after it

    return html.escape(str(value))


def plain_label(text: str) -> QLabel:
    """A label that shows `text` (a class name from the model's metadata) as typed, whatever it holds; a long one
    wraps in the narrow panel (three lines at most, the whole on hover) instead of widening the window."""
    return FitLabel(text, lines=3, hint_width=220)


def _swatch(color) -> QPixmap:
    pixmap = QPixmap(14, 14)
    pixmap.fill(QColor(*color) if color else QColor(0, 0, 0, 0))
    return pixmap


class Legend(QGroupBox):
    """One row per class: visibility checkbox, colour, name, pixels and area share."""

    visibility_changed = Signal(object)  # frozenset of hidden class indices

    def __init__(self, parent=None) -> None:
        super().__init__("Classes", parent)
        self._grid = QGridLayout(self)
        self._grid.setColumnStretch(2, 1)
        self._boxes: list[QCheckBox] = []
        self._counts: list[QLabel] = []
        self._volumes: dict[int, QLabel] = {}  # per painted class: its mL over the whole volume (volumes only)
        self._volume_rows: list[QLabel] = []
        self._volume_note = QLabel(self)  # a child until set_classes puts one in the grid: never a top-level window
        self._volume_note.hide()

    def set_classes(self, classes) -> None:
        while self._grid.count():
            widget = cast("QLayoutItem", self._grid.takeAt(0)).widget()  # there: count() > 0
            if widget:
                widget.deleteLater()
        self._volume_note.deleteLater()  # the one from before: in the grid (deleted above) or __init__'s
        self._boxes, self._counts, self._volumes = [], [], {}
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
            for column, widget in enumerate((box, swatch, plain_label(info.name), count)):
                self._grid.addWidget(widget, index, column)
            self._boxes.append(box)
            self._counts.append(count)
        # a volume's classes in mL, under the image's counts (a fifth column would not fit the panel)
        self._volume_note = QLabel()
        self._volume_note.setWordWrap(True)
        self._volume_note.hide()
        self._grid.addWidget(self._volume_note, len(classes), 0, 1, 4)
        self._volume_rows = []
        for index, info in enumerate(classes):
            if info.color is None:  # the background's "volume" is mostly air: not shown, so no label is made
                continue
            volume = QLabel()
            volume.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            volume.setToolTip("Volume of this class over the whole series (voxels × slice step × pixel spacing)")
            self._volumes[index] = volume
            swatch, name = QLabel(), plain_label(info.name)
            swatch.setPixmap(_swatch(info.color))
            row = len(classes) + 1 + len(self._volume_rows) // 3
            for column, widget in ((1, swatch), (2, name), (3, volume)):
                self._grid.addWidget(widget, row, column)
                widget.hide()
                self._volume_rows.append(widget)

    def set_counts(self, counts, total: int) -> None:
        for index, label in enumerate(self._counts):
            pixels = int(counts[index]) if index < len(counts) else 0
            label.setText(f"{pixels:,} px  {100.0 * pixels / max(total, 1):.2f} %")

    def set_instance_counts(self, counts) -> None:
        """An instance model's objects per class (`counts[i]`: class i's), shown instead of pixels."""
        for index, label in enumerate(self._counts):
            label.setText(counted(int(counts[index]) if index < len(counts) else 0, "instance"))

    def set_volume(self, millilitres, done: int, total: int, voxels=None) -> None:
        """Per-class volume over the whole series (`millilitres` per label value; None: the files carry no
        spacing, so voxels are shown), `done` of `total` slices counted so far."""
        for index, label in self._volumes.items():
            if millilitres is not None:
                label.setText(f"{float(millilitres[index]):,.2f} mL" if index < len(millilitres) else "–")
            else:
                label.setText(f"{int(voxels[index]):,} vox" if voxels is not None and index < len(voxels) else "–")
        for widget in self._volume_rows:
            widget.show()
        counting = f"counting… {done} / {total} slices" if done < total else f"all {counted(total, 'slice')}"
        self._volume_note.setText(f"Whole volume: {counting}" +
                                  ("" if millilitres is not None else " (no voxel size in the files: voxels)"))
        self._volume_note.show()

    def set_volume_failed(self, why: str) -> None:
        """The whole-volume count failed (`why`: `slice 3 of 40 failed: …`): said instead of any figure, since
        the slices counted before it are not the volume's."""
        for label in self._volumes.values():
            label.setText("–")
        for widget in self._volume_rows:
            widget.hide()
        self._volume_note.setText(f"Whole volume: not counted — {why}")
        self._volume_note.show()

    def clear_volume(self) -> None:
        for widget in self._volume_rows:
            widget.hide()
        self._volume_note.hide()

    def clear_counts(self) -> None:
        for label in self._counts:
            label.setText("–")

    def count_text(self, index: int) -> str:
        """Class `index`'s pixels and share as shown (`1,234 px  5.00 %`, `–` without a result)."""
        return self._counts[index].text()

    def volume_text(self) -> str:
        """The whole-volume line (`Whole volume: all 40 slices`, or why it was not counted); "" while hidden."""
        return "" if self._volume_note.isHidden() else self._volume_note.text()

    def volume_figures(self) -> dict[int, str]:
        """Each painted class's whole-volume figure on screen (`12.50 mL`); empty while none is shown."""
        if not self._volume_rows or self._volume_rows[0].isHidden():
            return {}
        return {index: label.text() for index, label in self._volumes.items()}

    def hidden(self) -> frozenset[int]:
        return frozenset(i for i, box in enumerate(self._boxes) if box.isEnabled() and not box.isChecked())

    def set_hidden(self, index: int, hidden: bool) -> None:
        self._boxes[index].setChecked(not hidden)

    def _emit(self) -> None:
        self.visibility_changed.emit(self.hidden())


class TopK(QGroupBox):
    """Classification: the best classes (short names, the whole name as tooltip) with their scores as bars, and an
    amber line when the result is uncertain (`Uncertain: top-1 0.41 < 0.50`)."""

    def __init__(self, parent=None) -> None:
        super().__init__("Top classes", parent)
        self._layout = QGridLayout(self)
        self._rows: list[tuple[str, str]] = []

    def rows(self) -> list[tuple[str, str]]:
        """The classes shown, best first: (short name, score as its bar says it)."""
        return list(self._rows)

    def set_predictions(self, predictions, uncertain: str = "") -> None:
        """Show best-first `predictions` (name, score); `uncertain`: the line saying why they are uncertain."""
        from app.inference.model.labels import display_name  # here: the window shows before any classifier result

        while self._layout.count():
            widget = cast("QLayoutItem", self._layout.takeAt(0)).widget()  # there: count() > 0
            if widget:
                widget.deleteLater()
        for row, p in enumerate(predictions):
            name = plain_label(display_name(p.name))
            name.setToolTip(f"<qt>{plain(p.name)}</qt>")  # rich text, escaped: a name is shown as typed
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setValue(round(p.score * 1000))
            bar.setFormat(f"{p.score:.1%}")
            self._layout.addWidget(name, row, 0)
            self._layout.addWidget(bar, row, 1)
        self._rows = [(display_name(p.name), f"{p.score:.1%}") for p in predictions]
        if uncertain:
            line = plain_label(uncertain)
            line.setObjectName("uncertain")
            line.setStyleSheet(f"color: {UNCERTAIN_COLOR}; font-weight: bold")
            self._layout.addWidget(line, len(predictions), 0, 1, 2)
