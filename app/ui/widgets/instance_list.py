"""The instance list: an instance model's objects in the picture shown, best score first — class, score, area in
pixels (and in mm² when the pixel size is known) and box — with the tools that correct them: delete the one chosen
(Delete), draw a new one as a box, paint it with the brush or let the Smart tool find it (a click or a box: S) in
the class picked, draw the chosen one again. A row
click asks to zoom to that instance (`chosen`). Made on first use (SidePanel.instance_list), never before the
window's first paint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPalette, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QGridLayout,
    QGroupBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
)

from app.spelling import counted
from app.ui.widgets.fit import FitLabel

if TYPE_CHECKING:
    from app.inference.model.instances import Instance
    from app.inference.model.spec import ClassInfo

COLUMNS = ("Instance", "Score", "px", "mm²", "Box")  # px, mm²: its area; box: x,y w×h
_INSTANCE = Qt.ItemDataRole.UserRole


def area_mm2(instance: Instance, pixel_mm: tuple[float, float] | None) -> float | None:
    """The instance's area in mm² from its pixels and the pixel size (rows, columns in mm); None without one."""
    return None if pixel_mm is None else instance.area_px * pixel_mm[0] * pixel_mm[1]


def box_text(instance: Instance) -> str:
    """The box as `x,y w×h` in whole image pixels (its top-left corner, its size)."""
    x0, y0, x1, y1 = (round(v) for v in instance.box)
    return f"{x0},{y0} {x1 - x0}×{y1 - y0}"


def _swatch(color) -> QPixmap:
    pixmap = QPixmap(10, 10)
    pixmap.fill(QColor(*color) if color else QColor(0, 0, 0, 0))
    return pixmap


class InstanceList(QGroupBox):
    """One row per instance shown; the correcting tools under it."""

    chosen = Signal(object)  # Instance: zoom to it, highlight it
    delete_requested = Signal(object)  # Instance
    add_requested = Signal(int)  # class index: draw a box of that class
    paint_requested = Signal(int)  # class index: paint an instance of that class with the brush
    smart_requested = Signal(int)  # class index: the Smart tool makes an instance of that class from a click or box
    redraw_requested = Signal(object)  # Instance: draw its box again

    def __init__(self, parent=None) -> None:
        super().__init__("Instances", parent)
        self._summary = FitLabel(lines=3, hint_width=240)
        self._summary.setTextFormat(Qt.TextFormat.PlainText)
        self._tree = QTreeWidget()
        self._tree.setColumnCount(len(COLUMNS))
        self._tree.setHeaderLabels(list(COLUMNS))
        for column, tip in enumerate(("Class and number", "The model's score (1.00: drawn by you)",
                                      "Area in image pixels", "Area in mm² (the pixel size the files give)",
                                      "Box: its top-left corner x,y and its width × height, in image pixels")):
            header = self._tree.headerItem()
            header.setToolTip(column, tip)
        self._tree.setRootIsDecorated(False)
        self._tree.setUniformRowHeights(True)
        self._tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self._tree.setToolTip("Click an instance: the view zooms to it. Delete removes the one chosen")
        self._tree.setMinimumHeight(120)
        self._tree.setMaximumHeight(240)
        palette = self._tree.palette()  # the row chosen stays marked while the reader looks at the picture
        for role in (QPalette.ColorRole.Highlight, QPalette.ColorRole.HighlightedText):
            palette.setColor(QPalette.ColorGroup.Inactive, role, palette.color(QPalette.ColorGroup.Active, role))
        self._tree.setPalette(palette)
        self._tree.itemClicked.connect(self._on_clicked)
        self._tree.itemActivated.connect(self._on_clicked)
        self._class = QComboBox()
        self._class.setToolTip("The class of the instance a new box draws")
        self._delete, self._add, self._redraw = (QPushButton("Delete"), QPushButton("Add box"),
                                                 QPushButton("Redraw"))
        self._paint = QPushButton("Paint")
        self._paint.setToolTip("Paint a new instance of the class picked with the brush (Ctrl+wheel: its size)")
        self._paint.clicked.connect(lambda: self.paint_requested.emit(max(0, self._class.currentIndex())))
        self._smart = QPushButton("Smart")
        self._smart.setToolTip("Smart tool (S): click an object, or drag a box around it — a new instance of the "
                               "class picked, its shape the prompt model's mask")
        self._smart.clicked.connect(lambda: self.smart_requested.emit(self.class_index()))
        self._delete.setToolTip("Delete the instance chosen in the list (Delete: Review ▸ Delete instance)")
        self._add.setToolTip("Drag a box on the picture: a new instance of the class picked beside")
        self._redraw.setToolTip("Drag a new box for the instance chosen in the list")
        self._delete.clicked.connect(self.delete_chosen)
        self._add.clicked.connect(lambda: self.add_requested.emit(max(0, self._class.currentIndex())))
        self._redraw.clicked.connect(self._redraw_chosen)
        tools = QGridLayout()
        tools.addWidget(self._delete, 0, 0)
        tools.addWidget(self._redraw, 0, 1, 1, 2)
        tools.addWidget(self._class, 1, 0, 1, 3)
        tools.addWidget(self._add, 2, 0)
        tools.addWidget(self._paint, 2, 1)
        tools.addWidget(self._smart, 2, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(self._summary)
        layout.addWidget(self._tree)
        layout.addLayout(tools)
        self._instances: tuple[Instance, ...] = ()

    def set_classes(self, classes: Sequence[ClassInfo]) -> None:
        self._class.clear()
        for info in classes:
            self._class.addItem(_swatch(info.color), info.name)

    def set_instances(self, instances: Sequence[Instance], *, classes: Sequence[ClassInfo],
                      pixel_mm: tuple[float, float] | None, note: str = "") -> None:
        """Show `instances` (best first) of a model with `classes`; `pixel_mm` the pixel size (rows, columns in mm)
        when known; `note` a line under the counts (the threshold in force, a correction)."""
        chosen = self.chosen_instance()
        self._instances = tuple(instances)
        self._tree.clear()
        numbers: dict[int, int] = {}
        for instance in self._instances:
            numbers[instance.class_index] = numbers.get(instance.class_index, 0) + 1
            item = self._row(instance, numbers[instance.class_index], classes, pixel_mm)
            self._tree.addTopLevelItem(item)
            if instance is chosen:
                item.setSelected(True)
                self._tree.setCurrentItem(item)
        self._tree.setColumnHidden(COLUMNS.index("mm²"), pixel_mm is None)
        for column in range(len(COLUMNS)):
            self._tree.resizeColumnToContents(column)
        counts = " · ".join(f"{_name(classes, index)}: {n}" for index, n in sorted(numbers.items()))
        self._summary.setText("\n".join(line for line in (counted(len(self._instances), "instance"), counts, note)
                                         if line))
        self.show()

    def rows(self) -> list[tuple[str, ...]]:
        """The rows as shown (tests, screenshots): the columns' texts per instance, the mm² column only when shown."""
        columns = [c for c in range(len(COLUMNS)) if not self._tree.isColumnHidden(c)]
        items = [self._tree.topLevelItem(i) for i in range(self._tree.topLevelItemCount())]
        return [tuple(item.text(c) for c in columns) for item in items if item is not None]

    def summary_text(self) -> str:
        return self._summary.text()

    def class_index(self) -> int:
        """The class picked for a new instance (the first when none is)."""
        return max(0, self._class.currentIndex())

    def chosen_instance(self) -> Instance | None:
        item = self._tree.currentItem()
        return item.data(0, _INSTANCE) if item is not None and item.isSelected() else None

    def click_row(self, row: int) -> None:
        """Choose row `row` as a click would."""
        item = self._tree.topLevelItem(row)
        if item is not None:
            self._tree.setCurrentItem(item)
            item.setSelected(True)
            self._on_clicked(item)

    def select(self, instance: Instance | None) -> None:
        """Mark `instance`'s row chosen (None: none), without asking to zoom."""
        self._tree.clearSelection()
        for row in range(self._tree.topLevelItemCount()):
            item = self._tree.topLevelItem(row)
            if item is not None and instance is not None and item.data(0, _INSTANCE) is instance:
                self._tree.setCurrentItem(item)
                item.setSelected(True)
                self._tree.scrollToItem(item)

    def delete_chosen(self) -> None:
        instance = self.chosen_instance()
        if instance is not None:
            self.delete_requested.emit(instance)

    def _redraw_chosen(self) -> None:
        instance = self.chosen_instance()
        if instance is not None:
            self.redraw_requested.emit(instance)

    def _row(self, instance: Instance, number: int, classes: Sequence[ClassInfo],
             pixel_mm: tuple[float, float] | None) -> QTreeWidgetItem:
        mm2 = area_mm2(instance, pixel_mm)
        item = QTreeWidgetItem([f"{_name(classes, instance.class_index)} {number}", f"{instance.score:.2f}",
                                f"{instance.area_px:,}", f"{mm2:.2f}" if mm2 is not None else "",
                                box_text(instance)])
        color = classes[instance.class_index].color if instance.class_index < len(classes) else None
        item.setIcon(0, _swatch(color))
        for column in (1, 2, 3):
            item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        x0, y0, x1, y1 = instance.box
        shape = "mask" if instance.mask is not None else "oriented box" if instance.rotated is not None else "box"
        tip = (f"{instance.class_name}, score {instance.score:.3f}; {instance.area_px:,} pixels of its {shape}"
               + (f" ({mm2:.3f} mm²)" if mm2 is not None else "") +
               f"; box x {x0:.1f}–{x1:.1f}, y {y0:.1f}–{y1:.1f} (image pixels)")
        for column in range(len(COLUMNS)):
            item.setToolTip(column, tip)
        item.setData(0, _INSTANCE, instance)
        return item

    def _on_clicked(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        instance = item.data(0, _INSTANCE)
        if instance is not None:
            self.chosen.emit(instance)


def _name(classes: Sequence[ClassInfo], index: int) -> str:
    return classes[index].name if 0 <= index < len(classes) else f"class {index}"
