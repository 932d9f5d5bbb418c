"""The Review group of the side panel: the image's state, note, who and when; accept / reject / next unreviewed."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFormLayout, QGridLayout, QGroupBox, QLabel, QLineEdit, QPushButton, QWidget

STATE_COLORS = {"unreviewed": "#8e8e93", "accepted": "#34c759", "rejected": "#ff3b30", "corrected": "#0a84ff"}


class ReviewPanel(QGroupBox):
    state_requested = Signal(str)
    note_changed = Signal(str)
    next_requested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__("Review", parent)
        self._state = QLabel()
        self._who = QLabel()
        self._who.setTextFormat(Qt.TextFormat.PlainText)
        self._note = QLineEdit()
        self._note.setPlaceholderText("note (Enter to keep)")
        self._counts = QLabel()
        self._counts.setWordWrap(True)
        buttons = QWidget()
        grid = QGridLayout(buttons)
        grid.setContentsMargins(0, 0, 0, 0)
        for column, (text, state) in enumerate((("Accept (A)", "accepted"), ("Reject (R)", "rejected"))):
            button = QPushButton(text)
            button.clicked.connect(lambda _checked=False, s=state: self.state_requested.emit(s))
            grid.addWidget(button, 0, column)
        following = QPushButton("Next unreviewed (U)")
        following.clicked.connect(self.next_requested)
        grid.addWidget(following, 1, 0, 1, 2)
        self._form = form = QFormLayout(self)
        form.addRow("State", self._state)
        form.addRow("", self._who)
        form.addRow("Note", self._note)
        form.addRow(buttons)
        form.addRow(self._counts)
        self._note.editingFinished.connect(lambda: self.note_changed.emit(self._note.text()))
        self.hide()

    def show_review(self, review, foreign: int, counts: dict | None = None) -> None:
        """The current image's review (None: unreviewed, or no log), the rows of other models kept aside, totals."""
        self.setVisible(counts is not None)
        state = review.state if review is not None else "unreviewed"
        self._state.setText(f"<b style='color:{STATE_COLORS.get(state, '#8e8e93')}'>{state}</b>")
        self._who.setText(f"{review.who} · {review.when}" if review is not None and review.who else "")
        self._form.setRowVisible(self._who, bool(self._who.text()))
        self._note.setText(review.note if review is not None else "")
        parts = [f"{n} {s}" for s, n in (counts or {}).items() if n]
        if foreign:
            parts.append(f"{foreign} review(s) made with another model kept aside, not shown")
        self._counts.setText(" · ".join(parts))
        self._form.setRowVisible(self._counts, bool(parts))

    def state_text(self) -> str:
        return self._state.text()
