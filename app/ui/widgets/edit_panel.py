"""The Edit mask group of the side panel: class, tool, brush size, undo/redo, save and done (shown in edit mode);
with the Smart tool, the prompt model, the proposal's predicted IoU and, in a volume, Propagate ▲ / ▼ / Stop."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGridLayout, QGroupBox, QLabel, QPushButton, QSlider, QWidget

TOOLS = (("brush", "Brush"), ("eraser", "Eraser"), ("fill", "Fill"), ("smart", "Smart (click / box)"))
PROMPT_MODELS = (("prompt_demo", "prompt_demo (bundled)"), ("grabcut", "grabCut (boxes, no model)"))
OTHER_MODEL = "Other prompt model…"
SMART_HINT = ("Click: + point · right or Alt+click: − point · drag: box · Enter: add to the class · Shift+Enter: "
              "replace the class in the box · Esc: discard · Backspace: last point · S: Smart tool")
HINT = ("Left-drag paints the class · Shift: eraser · Ctrl+click: fill the region · Ctrl+wheel or Ctrl+[ ]: brush "
        "size · "
        "Ctrl+Z / Ctrl+Shift+Z: undo / redo · Ctrl+S: save · E: done")


class EditPanel(QGroupBox):
    radius_changed = Signal(int)
    undo_requested = Signal()
    redo_requested = Signal()
    save_requested = Signal()
    done_requested = Signal()
    tool_changed = Signal(str)
    class_changed = Signal(int)  # the class to paint (the Smart tool's preview is drawn in its colour)
    prompt_model_chosen = Signal(str)  # "prompt_demo", "grabcut" or a sidecar's path
    propagate_requested = Signal(int)  # +1: the next slices, −1: the previous ones
    stop_requested = Signal()

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
        self._hint = hint = QLabel(HINT)
        hint.setWordWrap(True)
        self._smart = self._smart_rows()
        form = QFormLayout(self)
        form.addRow("Class", self._class)
        form.addRow("Tool", self._tool)
        form.addRow("Brush", self._size)
        form.addRow("", self._size_label)
        form.addRow(self._smart)
        form.addRow(buttons)
        form.addRow(hint)
        self._tool.currentIndexChanged.connect(self._on_tool)
        self._class.currentIndexChanged.connect(lambda _index: self.class_changed.emit(self.label()))
        self._size.valueChanged.connect(self._on_size)
        self._undo.clicked.connect(self.undo_requested)
        self._redo.clicked.connect(self.redo_requested)
        self._save.clicked.connect(self.save_requested)
        self._done.clicked.connect(self.done_requested)
        self._on_size(self._size.value())
        self.set_history(False, False)
        self._smart.hide()
        self.hide()

    def _smart_rows(self) -> QWidget:
        """The Smart tool's rows: the prompt model, what it is (or why it is grabCut), the IoU, propagation."""
        rows = QWidget()
        grid = QGridLayout(rows)
        grid.setContentsMargins(0, 0, 0, 0)
        self._model = QComboBox()
        for _, name in PROMPT_MODELS:
            self._model.addItem(name)
        self._model.addItem(OTHER_MODEL)
        self._model.activated.connect(self._on_model)
        self._model_line, self._iou = QLabel(), QLabel("no proposal")
        self._model_line.setWordWrap(True)
        self._up, self._down, self._stop = QPushButton("Propagate ▲"), QPushButton("Propagate ▼"), QPushButton("Stop")
        self._propagation_line = QLabel()
        self._propagation_line.setWordWrap(True)
        grid.addWidget(QLabel("Prompt model"), 0, 0, 1, 2)
        grid.addWidget(self._model, 1, 0, 1, 2)
        grid.addWidget(self._model_line, 2, 0, 1, 2)
        grid.addWidget(self._iou, 3, 0, 1, 2)
        grid.addWidget(self._up, 4, 0)
        grid.addWidget(self._down, 4, 1)
        grid.addWidget(self._stop, 5, 0)
        grid.addWidget(self._propagation_line, 6, 0, 1, 2)
        self._up.clicked.connect(lambda: self.propagate_requested.emit(-1))  # ▲: towards the first slice
        self._down.clicked.connect(lambda: self.propagate_requested.emit(1))
        self._stop.clicked.connect(self.stop_requested)
        self.show_propagation(False)
        return rows

    # -- the Smart tool --------------------------------------------------------------------------------

    def prompt_model(self) -> str:
        """The prompt model chosen: "prompt_demo", "grabcut" or a sidecar's path."""
        index = self._model.currentIndex()
        return PROMPT_MODELS[index][0] if index < len(PROMPT_MODELS) else str(self._model.currentData() or "")

    def choose_prompt_model(self, model: str) -> None:
        """Select `model` (a bundled name, "grabcut" or a sidecar path) and ask for it."""
        keys = [key for key, _ in PROMPT_MODELS]
        if model in keys:
            self._model.setCurrentIndex(keys.index(model))
        else:
            self._model.setItemData(len(PROMPT_MODELS), model)
            self._model.setItemText(len(PROMPT_MODELS), model.replace("\\", "/").rsplit("/", 1)[-1])
            self._model.setCurrentIndex(len(PROMPT_MODELS))
        self.prompt_model_chosen.emit(model)

    def show_prompt_model(self, name: str, note: str) -> None:
        self._model_line.setText(f"{name}: {note}" if note else name)

    def show_iou(self, iou: float | None) -> None:
        """The proposal's predicted IoU (nan: grabCut has none; None: no proposal)."""
        text = "no proposal" if iou is None else "proposal (grabCut: no IoU)" if iou != iou else \
            f"proposal: predicted IoU {iou:.2f}"
        self._iou.setText(text)

    def show_propagation(self, available: bool, *, running: bool = False, text: str = "") -> None:
        """Propagate ▲ / ▼ (a proposal was accepted on a volume's slice), Stop while it runs, and what it did."""
        for button in (self._up, self._down):
            button.setVisible(available or running)
            button.setEnabled(available and not running)
        self._stop.setVisible(running)
        self._propagation_line.setText(text)
        self._propagation_line.setVisible(bool(text))

    def _on_tool(self, index: int) -> None:
        smart = TOOLS[index][0] == "smart"
        self._smart.setVisible(smart)
        self._hint.setText(SMART_HINT if smart else HINT)
        self.tool_changed.emit(TOOLS[index][0])

    def _on_model(self, index: int) -> None:
        if index < len(PROMPT_MODELS):
            self.prompt_model_chosen.emit(PROMPT_MODELS[index][0])
            return
        from PySide6.QtWidgets import QFileDialog

        path, _ = QFileDialog.getOpenFileName(self, "Prompt model (the sidecar of an encoder/decoder pair)", "",
                                              "Prompt model sidecar (*.yaml *.yml)")
        if path:
            self.choose_prompt_model(path)
        else:  # cancelled: back to the model in use
            self._model.setCurrentIndex(0 if self._model.itemData(len(PROMPT_MODELS)) is None else len(PROMPT_MODELS))

    def set_classes(self, classes) -> None:
        """The classes to paint (label = index); the first foreground class is selected."""
        current = self._class.currentIndex()
        self._class.clear()
        for info in classes:
            self._class.addItem(info.name)
        self._class.setCurrentIndex(current if 0 < current < len(classes) else min(1, len(classes) - 1))

    def label(self) -> int:
        return max(0, self._class.currentIndex())

    def choose_label(self, label: int) -> None:
        """Choose class `label` (the Smart tool: the class under a prompt's first click); one the box lacks: none."""
        if 0 <= label < self._class.count():
            self._class.setCurrentIndex(label)

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
