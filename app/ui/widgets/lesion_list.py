"""The lesion list: the volume's 3D connected components per class (app.inference.lesions), each with its volume in
mL, the slices it spans and its size in mm, the connectivity stated; clicking a row asks to go to the component's
centroid (`chosen`). Made on first use (SidePanel.lesion_list), never before the window's first paint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QGroupBox, QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout

if TYPE_CHECKING:
    from app.inference.lesions import Lesion

MAX_ROWS = 200  # the largest components; a noisy mask's thousands of specks would only bury them
COLUMNS = ("Component", "mL", "Slices", "Size (mm)")
_LESION = Qt.ItemDataRole.UserRole


def _swatch(color) -> QPixmap:
    pixmap = QPixmap(10, 10)
    pixmap.fill(QColor(*color) if color else QColor(0, 0, 0, 0))
    return pixmap


def size_mm(lesion: Lesion, spacing: tuple[float, float, float] | None) -> str:
    """The component's box in mm along the slices, rows and columns (`18 × 21 × 7.5`: a tenth of a mm below
    10 mm); in voxels without spacing (`6 × 24 × 22 vox`)."""
    sides = [end - start for start, end in lesion.bbox]
    if spacing is None:
        return " × ".join(str(n) for n in sides) + " vox"
    return " × ".join(_mm(n * step) for n, step in zip(sides, spacing, strict=True))


def _mm(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


class LesionList(QGroupBox):
    """One row per component, the classes' counts over them; `chosen(lesion)` when the reader clicks a row."""

    chosen = Signal(object)  # app.inference.lesions.Lesion

    def __init__(self, parent=None) -> None:
        super().__init__("Lesions (3D components)", parent)
        self._summary = QLabel()
        self._summary.setWordWrap(True)
        self._summary.setTextFormat(Qt.TextFormat.PlainText)
        self._tree = QTreeWidget()
        self._tree.setColumnCount(len(COLUMNS))
        self._tree.setHeaderLabels(list(COLUMNS))
        self._tree.setRootIsDecorated(False)
        self._tree.setUniformRowHeights(True)
        self._tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self._tree.setToolTip("Click a component: the crosshair and the slice go to its centre")
        self._tree.setMinimumHeight(120)
        self._tree.setMaximumHeight(240)
        layout = QVBoxLayout(self)
        layout.addWidget(self._summary)
        layout.addWidget(self._tree)
        self._tree.itemClicked.connect(self._on_clicked)
        self._tree.itemActivated.connect(self._on_clicked)  # Enter on a row chosen with the arrow keys
        self._lesions: tuple[Lesion, ...] = ()

    def set_lesions(self, lesions: Sequence[Lesion], *, classes: Sequence, spacing: tuple[float, float, float] | None,
                    connectivity: int) -> None:
        """Show `lesions` (each class's largest first) of a model with `classes` (records with .name and .color)."""
        from app.inference.lesions import connectivity_text

        self._lesions = tuple(lesions)
        self._tree.clear()
        names = [getattr(info, "name", str(i)) for i, info in enumerate(classes)]
        colors = [getattr(info, "color", None) for info in classes]
        shown = sorted(self._lesions, key=lambda x: -x.voxels)[:MAX_ROWS]
        for lesion in sorted(shown, key=lambda x: (x.label, x.index)):
            self._tree.addTopLevelItem(self._row(lesion, names, colors, spacing))
        for column in range(len(COLUMNS)):
            self._tree.resizeColumnToContents(column)
        counts = {value: sum(1 for x in self._lesions if x.label == value) for value in
                  sorted({x.label for x in self._lesions})}
        per_class = " · ".join(f"{_name(names, value)}: {n}" for value, n in counts.items()) or "none"
        hidden = len(self._lesions) - len(shown)
        more = f"\nThe {MAX_ROWS} largest listed; {hidden} smaller not." if hidden > 0 else ""
        self._summary.setText(f"{per_class}\n{connectivity_text(connectivity)}{more}")
        self.show()

    def set_unavailable(self, why: str) -> None:
        """No components to list, and why (a 4D NIfTI)."""
        self._lesions = ()
        self._tree.clear()
        self._summary.setText(why)
        self.show()

    def rows(self) -> list[tuple[str, ...]]:
        """The rows as shown (tests, screenshots): one tuple of the columns' texts per component."""
        items = [self._tree.topLevelItem(i) for i in range(self._tree.topLevelItemCount())]
        return [tuple(item.text(c) for c in range(len(COLUMNS))) for item in items if item is not None]

    def summary_text(self) -> str:
        return self._summary.text()

    def click_row(self, row: int) -> None:
        """Choose row `row` as a click would."""
        item = self._tree.topLevelItem(row)
        if item is not None:
            self._tree.setCurrentItem(item)
            self._on_clicked(item)

    def _row(self, lesion: Lesion, names: list[str], colors: list, spacing) -> QTreeWidgetItem:
        (k0, k1), (r0, r1), (c0, c1) = lesion.bbox
        ml = f"{lesion.ml:.2f}" if lesion.ml is not None else f"{lesion.voxels} vox"
        slices = f"{k0 + 1}–{k1}" if k1 - k0 > 1 else f"{k0 + 1}"
        item = QTreeWidgetItem([f"{_name(names, lesion.label)} {lesion.index}", ml, slices, size_mm(lesion, spacing)])
        color = colors[lesion.label] if lesion.label < len(colors) else None
        item.setIcon(0, _swatch(color))
        for column in (1, 2):
            item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        item.setToolTip(0, f"{lesion.voxels:,} voxels; slices {k0 + 1}–{k1}, rows {r0 + 1}–{r1}, "
                           f"columns {c0 + 1}–{c1} (1-based, as the slice bar)")
        item.setData(0, _LESION, lesion)
        return item

    def _on_clicked(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        lesion = item.data(0, _LESION)
        if lesion is not None:
            self.chosen.emit(lesion)


def _name(names: list[str], value: int) -> str:
    return names[value] if 0 <= value < len(names) else f"label {value}"
