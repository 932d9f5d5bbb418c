"""RunBanner: a long run's progress drawn over the canvas ("3D model: patch 12 / 48 · Cancel"), at the bottom of the
picture it is about (the top is the viewer's notice's), so a reader paging through the volume sees how far the
model is and can stop it there; once stopped, it offers to run it again ("3D model: cancelled · Run again"). It
places itself over its parent (the viewer) and follows the parent's size; it starts nothing (its buttons are
intents)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

BOTTOM = 30  # px from the canvas's bottom edge: above the orientation letter there


class RunBanner(QFrame):
    cancel_requested = Signal()
    rerun_requested = Signal()  # Run again, after the run was stopped

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("runBanner")
        self.setStyleSheet("#runBanner { background: rgba(20, 20, 22, 200); border-radius: 6px; }"
                           "#runBanner QLabel { color: white; }"
                           "#runBanner QPushButton { color: #8ab4f8; border: none; text-decoration: underline; }")
        self._text = QLabel()
        self._cancel = QPushButton("Cancel")
        self._cancel.clicked.connect(self._clicked)
        self._stopped = False
        self._say_button()
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 4, 10, 4)
        row.addWidget(self._text)
        row.addWidget(QLabel("·"))
        row.addWidget(self._cancel)
        parent.installEventFilter(self)
        self.hide()

    def show_progress(self, text: str) -> None:
        """The run's progress in `text`, over the canvas (shown if hidden), with Cancel."""
        self._show(text, stopped=False)

    def show_stopped(self, text: str) -> None:
        """The run was stopped (`text` says so), with Run again."""
        self._show(text, stopped=True)

    def _show(self, text: str, *, stopped: bool) -> None:
        if stopped != self._stopped:
            self._stopped = stopped
            self._say_button()
        self._text.setText(text)
        self.adjustSize()
        self._place()
        self.show()
        self.raise_()

    def text(self) -> str:
        return self._text.text()

    def cancel_text(self) -> str:
        return self._cancel.text()

    def _say_button(self) -> None:
        self._cancel.setText("Run again" if self._stopped else "Cancel")
        self._cancel.setToolTip("Run the model over this volume again" if self._stopped else
                                "Stop the model's run over this volume (the image stays; no result is shown)")

    def _clicked(self) -> None:
        (self.rerun_requested if self._stopped else self.cancel_requested).emit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.parent() and event.type() == QEvent.Type.Resize:
            self._place()
        return False

    def _place(self) -> None:
        parent = self.parentWidget()
        if parent is not None:
            self.move(max(0, (parent.width() - self.width()) // 2), max(0, parent.height() - BOTTOM - self.height()))
