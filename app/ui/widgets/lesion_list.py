"""The lesion list: the volume's 3D connected components per class (app.inference.decide.lesions), each with its volume
in mL, the slices it spans and its extent in mm (its box in the tooltip), the connectivity stated; clicking a row asks
to go to the component's centroid (`chosen`). Made on first use (SidePanel.lesion_list), never before the window's
first paint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPalette, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QGroupBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
)

from app.ui.widgets.fit import FitLabel

if TYPE_CHECKING:
    from app.inference.decide.lesions import Lesion
    from app.inference.model.spec import ClassInfo

MAX_ROWS = 200  # the largest components; a noisy mask's thousands of specks would only bury them
COLUMNS = ("Component", "mL", "Slices", "Extent")
_LESION = Qt.ItemDataRole.UserRole


def _swatch(color) -> QPixmap:
    pixmap = QPixmap(10, 10)
    pixmap.fill(QColor(*color) if color else QColor(0, 0, 0, 0))
    return pixmap


def box_sides(lesion: Lesion, spacing: tuple[float, float, float] | None) -> list[float]:
    """The component's box sides along the slices, rows and columns: in mm, or in voxels without spacing."""
    sides = [float(end - start) for start, end in lesion.bbox]
    return sides if spacing is None else [n * step for n, step in zip(sides, spacing, strict=True)]


def box_text(lesion: Lesion, spacing: tuple[float, float, float] | None) -> str:
    """The box as `18 × 21 × 7.5 mm` (slices × rows × columns; a tenth of a mm below 10 mm), or in voxels."""
    sides = box_sides(lesion, spacing)
    return " × ".join(_mm(side) for side in sides) + (" mm" if spacing is not None else " voxels")


def _mm(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


class LesionList(QGroupBox):
    """One row per component, the classes' counts over them; `chosen(lesion)` when the reader clicks a row."""

    chosen = Signal(object)  # app.inference.decide.lesions.Lesion

    def __init__(self, parent=None) -> None:
        super().__init__("Lesions (3D components)", parent)
        self._summary = FitLabel(lines=3, hint_width=240)  # a long class name wraps, never widening the panel
        self._summary.setTextFormat(Qt.TextFormat.PlainText)
        self._show = QComboBox()  # one class's components only (the lesions under the anatomy's), or all
        self._show.setToolTip("List the components of one class, or of all")
        self._show.currentIndexChanged.connect(self._filter)
        self._tree = QTreeWidget()
        self._tree.setColumnCount(len(COLUMNS))
        self._tree.setHeaderLabels(list(COLUMNS))
        self._tree.setRootIsDecorated(False)
        self._tree.setUniformRowHeights(True)
        self._tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self._tree.setToolTip("Click a component: the crosshair and the slice go to its centre")
        self._tree.setMinimumHeight(120)
        self._tree.setMaximumHeight(240)
        palette = self._tree.palette()  # the row chosen stays marked while the reader looks at the panes
        for role in (QPalette.ColorRole.Highlight, QPalette.ColorRole.HighlightedText):
            palette.setColor(QPalette.ColorGroup.Inactive, role, palette.color(QPalette.ColorGroup.Active, role))
        self._tree.setPalette(palette)
        layout = QVBoxLayout(self)
        layout.addWidget(self._summary)
        layout.addWidget(self._show)
        layout.addWidget(self._tree)
        self._tree.itemClicked.connect(self._on_clicked)
        self._tree.itemActivated.connect(self._on_clicked)  # Enter on a row chosen with the arrow keys
        self._lesions: tuple[Lesion, ...] = ()

    def set_lesions(self, lesions: Sequence[Lesion], *, classes: Sequence[ClassInfo],
                    spacing: tuple[float, float, float] | None, connectivity: int) -> None:
        """Show `lesions` (each class's largest first) of a model with `classes` (records with .name and .color)."""
        from app.inference.decide.lesions import connectivity_text

        self._lesions = tuple(lesions)
        self._tree.clear()
        names = [info.name for info in classes]
        colors = [info.color for info in classes]
        shown = sorted(self._lesions, key=lambda x: -x.voxels)[:MAX_ROWS]
        for lesion in sorted(shown, key=lambda x: (x.label, x.index)):
            self._tree.addTopLevelItem(self._row(lesion, names, colors, spacing))
        for column in range(len(COLUMNS)):
            self._tree.resizeColumnToContents(column)
        self._offer_classes(names)
        counts = {value: sum(1 for x in self._lesions if x.label == value) for value in
                  sorted({x.label for x in self._lesions})}
        per_class = " · ".join(f"{_name(names, value)}: {n}" for value, n in counts.items()) or "none"
        hidden = len(self._lesions) - len(shown)
        more = f"\nThe {MAX_ROWS} largest listed; {hidden} smaller not." if hidden > 0 else ""
        self._summary.setText(f"{per_class}\n{connectivity_text(connectivity)}{more}")
        self.show()

    def _offer_classes(self, names: list[str]) -> None:
        """The class box: all classes, then each class with components; the reader's class kept when present."""
        wanted = self._show.currentData()
        self._show.blockSignals(True)
        self._show.clear()
        self._show.addItem("All classes", None)
        for value in sorted({x.label for x in self._lesions}):
            self._show.addItem(_name(names, value), value)
        index = self._show.findData(wanted) if wanted is not None else 0
        self._show.setCurrentIndex(max(0, index))
        self._show.blockSignals(False)
        self._show.setVisible(self._show.count() > 2)  # one class: nothing to choose
        self._filter()

    def show_class(self, value: int | None) -> None:
        """List only class `value`'s components (None: all), as the class box does."""
        self._show.setCurrentIndex(max(0, self._show.findData(value)) if value is not None else 0)

    def _filter(self, _index: int = 0) -> None:
        wanted = self._show.currentData()
        for i in range(self._tree.topLevelItemCount()):
            item = self._tree.topLevelItem(i)
            if item is not None:
                item.setHidden(wanted is not None and item.data(0, _LESION).label != wanted)

    def set_unavailable(self, why: str) -> None:
        """No components to list, and why (a 4D NIfTI)."""
        self._lesions = ()
        self._tree.clear()
        self._show.hide()
        self._summary.setText(why)
        self.show()

    def rows(self) -> list[tuple[str, ...]]:
        """The rows as shown (tests, screenshots): one tuple of the columns' texts per component."""
        items = [self._tree.topLevelItem(i) for i in range(self._tree.topLevelItemCount())]
        return [tuple(item.text(c) for c in range(len(COLUMNS))) for item in items
                if item is not None and not item.isHidden()]

    def summary_text(self) -> str:
        return self._summary.text()

    def click_row(self, row: int) -> None:
        """Choose row `row` of those shown as a click would."""
        items = [self._tree.topLevelItem(i) for i in range(self._tree.topLevelItemCount())]
        shown = [item for item in items if item is not None and not item.isHidden()]
        item = shown[row] if 0 <= row < len(shown) else None
        if item is not None:
            self._tree.setCurrentItem(item)
            item.setSelected(True)
            self._on_clicked(item)

    def _row(self, lesion: Lesion, names: list[str], colors: list, spacing) -> QTreeWidgetItem:
        (k0, k1), (r0, r1), (c0, c1) = lesion.bbox
        ml = f"{lesion.ml:.2f}" if lesion.ml is not None else f"{lesion.voxels} vox"
        slices = f"{k0 + 1}–{k1}" if k1 - k0 > 1 else f"{k0 + 1}"
        extent = _mm(max(box_sides(lesion, spacing))) + (" mm" if spacing is not None else " vox")
        item = QTreeWidgetItem([f"{_name(names, lesion.label)} {lesion.index}", ml, slices, extent])
        color = colors[lesion.label] if lesion.label < len(colors) else None
        item.setIcon(0, _swatch(color))
        for column in (1, 2, 3):
            item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        tip = (f"{lesion.voxels:,} voxels; its box {box_text(lesion, spacing)} (slices × rows × columns), slices "
               f"{k0 + 1}–{k1}, rows {r0 + 1}–{r1}, columns {c0 + 1}–{c1} (1-based). Extent: the box's longest side")
        for column in range(len(COLUMNS)):
            item.setToolTip(column, tip)
        item.setData(0, _LESION, lesion)
        return item

    def _on_clicked(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        lesion = item.data(0, _LESION)
        if lesion is not None:
            self.chosen.emit(lesion)


def _name(names: list[str], value: int) -> str:
    return names[value] if 0 <= value < len(names) else f"label {value}"
