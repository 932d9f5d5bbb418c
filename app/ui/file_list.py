"""The file panel: inputs in natural order with a per-file status (pending / done / error)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QListWidget, QListWidgetItem

PATH_ROLE = Qt.ItemDataRole.UserRole
STATUS_ROLE = Qt.ItemDataRole.UserRole + 1
STATUS_COLORS = {"pending": QColor(140, 140, 140), "done": QColor(52, 199, 89), "error": QColor(255, 69, 58),
                 "running": QColor(10, 132, 255)}


def _dot(color: QColor) -> QIcon:
    pixmap = QPixmap(12, 12)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(color)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(1, 1, 10, 10)
    painter.end()
    return QIcon(pixmap)


class FileList(QListWidget):
    current_path_changed = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setUniformItemSizes(True)
        self.setAlternatingRowColors(True)
        self._icons = {status: _dot(color) for status, color in STATUS_COLORS.items()}
        self._rows: dict[str, int] = {}
        self._inputs: list = []
        self.currentRowChanged.connect(self._emit_current)

    def set_inputs(self, inputs: list) -> None:
        """Replace the list with `inputs` (app.io.discover.InputFile), all pending."""
        self.blockSignals(True)
        self.clear()
        self._rows.clear()
        self._inputs = list(inputs)
        for row, item in enumerate(inputs):
            entry = QListWidgetItem(self._icons["pending"], item.rel.as_posix())
            entry.setData(PATH_ROLE, str(item.path))
            entry.setData(STATUS_ROLE, "pending")
            entry.setToolTip(str(item.path))
            self.addItem(entry)
            self._rows[str(item.path)] = row
        self.blockSignals(False)

    def inputs(self) -> list:
        """The InputFiles shown, in order (they carry the relative paths that name exported files)."""
        return list(self._inputs)

    def paths(self) -> list[str]:
        return [self.item(row).data(PATH_ROLE) for row in range(self.count())]

    def current_path(self) -> str | None:
        item = self.currentItem()
        return item.data(PATH_ROLE) if item else None

    def status(self, path: str) -> str | None:
        row = self._rows.get(path)
        return None if row is None else self.item(row).data(STATUS_ROLE)

    def set_status(self, path: str, status: str, message: str = "") -> None:
        row = self._rows.get(path)
        if row is None:
            return
        entry = self.item(row)
        entry.setData(STATUS_ROLE, status)
        entry.setIcon(self._icons[status])
        entry.setToolTip(f"{path}\n{message}" if message else path)

    def step(self, delta: int) -> None:
        if self.count():
            self.setCurrentRow(max(0, min(self.count() - 1, self.currentRow() + delta)))

    def _emit_current(self, row: int) -> None:
        if row >= 0:
            self.current_path_changed.emit(self.item(row).data(PATH_ROLE))
