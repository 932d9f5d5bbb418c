"""The Edit mask group of the side panel: class, tool, brush size, undo/redo, save and done (shown in edit mode)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGridLayout, QGroupBox, QLabel, QPushButton, QSlider, QWidget

TOOLS = (("brush", "Brush"), ("eraser", "Eraser"), ("fill", "Fill"))
HINT = ("Left-drag paints the class · Shift: eraser · Ctrl+click: fill the region · Ctrl+wheel or Ctrl+[ ]: brush "
        "size · "
        "Ctrl+Z / Ctrl+Shift+Z: undo / redo · Ctrl+S: save · E: done")


class EditPanel(QGroupBox):
    radius_changed = Signal(int)
    undo_requested = Signal()
    redo_requested = Signal()
    save_requested = Signal()
    done_requested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__("Edit mask", parent)
        self._class = QComboBox()
        self._tool = QComboBox()
        for _, name in TOOLS:
            self._tool.addItem(name)
        self._size = QSlider(Qt.Orientation.Horizontal)
        self._size.setRange(1, 200)
        self._size.setValue(8)
        self._size_label = QLabel()
        buttons = QWidget()
        grid = QGridLayout(buttons)
        grid.setContentsMargins(0, 0, 0, 0)
        self._undo, self._redo = QPushButton("Undo"), QPushButton("Redo")
        self._save, self._done = QPushButton("Save"), QPushButton("Done")
        for index, button in enumerate((self._undo, self._redo, self._save, self._done)):
            grid.addWidget(button, index // 2, index % 2)  # two by two: four in a row do not fit the panel
        hint = QLabel(HINT)
        hint.setWordWrap(True)
        form = QFormLayout(self)
        form.addRow("Class", self._class)
        form.addRow("Tool", self._tool)
        form.addRow("Brush", self._size)
        form.addRow("", self._size_label)
        form.addRow(buttons)
        form.addRow(hint)
        self._size.valueChanged.connect(self._on_size)
        self._undo.clicked.connect(self.undo_requested)
        self._redo.clicked.connect(self.redo_requested)
        self._save.clicked.connect(self.save_requested)
        self._done.clicked.connect(self.done_requested)
        self._on_size(self._size.value())
        self.set_history(False, False)
        self.hide()

    def set_classes(self, classes) -> None:
        """The classes to paint (label = index); the first foreground class is selected."""
        current = self._class.currentIndex()
        self._class.clear()
        for info in classes:
            self._class.addItem(info.name)
        self._class.setCurrentIndex(current if 0 < current < len(classes) else min(1, len(classes) - 1))

    def label(self) -> int:
        return max(0, self._class.currentIndex())

    def tool(self) -> str:
        return TOOLS[self._tool.currentIndex()][0]

    def set_tool(self, tool: str) -> None:
        self._tool.setCurrentIndex([key for key, _ in TOOLS].index(tool))

    def radius(self) -> int:
        return self._size.value()

    def set_radius(self, radius: int) -> None:
        self._size.setValue(radius)

    def set_history(self, can_undo: bool, can_redo: bool) -> None:
        self._undo.setEnabled(can_undo)
        self._redo.setEnabled(can_redo)

    def _on_size(self, value: int) -> None:
        self._size_label.setText(f"radius {value} px (image pixels)")
        self.radius_changed.emit(value)
