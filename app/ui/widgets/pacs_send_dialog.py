"""Results ▸ Send to PACS…: which node, which of the volume's exports, de-identified or not; the answer in one line.

A widget only (the PACS controller sends and sets the answer here); made on first use."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets.fit import FitLabel
from app.ui.widgets.pacs_dialog import ERROR_STYLE

CHOICES = (("dicom-seg", "DICOM SEG (referencing the series)", True),
           ("sc", "Secondary Capture series (overlay burned in, \"not for diagnosis\")", False),
           ("rtstruct", "RTSTRUCT (contours per class, for radiotherapy planning)", False))


class PacsSendDialog(QDialog):
    send_requested = Signal()  # node_text(), secret(), kinds(), anonymize()

    def __init__(self, *, kinds_available: tuple[str, ...], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Send to PACS")
        self.setMinimumWidth(640)
        layout = QVBoxLayout(self)
        self.subject = FitLabel(lines=3, hint_width=640)  # a long model name or UID wraps, never widening it
        layout.addWidget(self.subject)
        grid = QGridLayout()
        self.node = QComboBox()
        self.node.setEditable(True)
        self.node.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.node.setMinimumContentsLength(24)  # a long node name scrolls in the field, the dialog keeps its width
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.password.setPlaceholderText("from the keyring")
        grid.addWidget(QLabel("Node"), 0, 0)
        grid.addWidget(self.node, 0, 1)
        grid.addWidget(QLabel("Password"), 1, 0)
        grid.addWidget(self.password, 1, 1)
        grid.setColumnStretch(1, 1)
        layout.addLayout(grid)
        self.boxes: dict[str, QCheckBox] = {}
        for kind, text, checked in CHOICES:
            if kind in kinds_available:
                box = QCheckBox(text)
                box.setChecked(checked)
                layout.addWidget(box)
                self.boxes[kind] = box
        self.anonymize = QCheckBox("De-identified (pseudonymised; a research node only)")
        self.anonymize.setToolTip("PS3.15 Basic Profile and the workstation's keyed pseudonym, as seglens-cli run "
                                  "--anonymize; refused for a node not marked research: true")
        layout.addWidget(self.anonymize)
        self.message = FitLabel(lines=3, hint_width=640)
        layout.addWidget(self.message)
        row = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.send_requested)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        row.addWidget(self.progress, 1)
        row.addStretch(0)
        row.addWidget(self.send_button)
        row.addWidget(close)
        layout.addLayout(row)

    def set_nodes(self, names: list[str], current: str = "") -> None:
        self.node.clear()
        self.node.addItems(names)
        if current:
            self.node.setCurrentText(current)

    def set_subject(self, text: str) -> None:
        self.subject.setText(text)

    def node_text(self) -> str:
        return self.node.currentText().strip()

    def secret(self) -> str:
        return self.password.text()

    def kinds(self) -> tuple[str, ...]:
        return tuple(kind for kind, box in self.boxes.items() if box.isChecked())

    def wants_anonymized(self) -> bool:
        return self.anonymize.isChecked()

    def set_sending(self, on: bool) -> None:
        self.send_button.setEnabled(not on)
        self.progress.setVisible(on)
        if on:
            self.progress.setRange(0, 0)

    def set_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)

    def say(self, line: str, *, error: bool = False) -> None:
        self.message.setStyleSheet(ERROR_STYLE if error else "")
        self.message.setText(line)
