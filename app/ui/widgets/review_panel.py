"""The Review group of the side panel: the image's state, note, who and when; result correct / result wrong / next
unreviewed, and where the reviews are kept when that is not beside the images."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFormLayout, QGridLayout, QGroupBox, QLabel, QLineEdit, QPushButton, QWidget

from app.spelling import counted

STATE_COLORS = {"unreviewed": "#8e8e93", "accepted": "#34c759", "rejected": "#ff3b30", "corrected": "#0a84ff"}
# the reviewer judges the model's result, not the part (app.runs.review.log.STATE_NAMES says the same in the report)
BUTTONS = (("Result correct (A)", "accepted", "The model's result is right (A), then the next unreviewed image"),
           ("Result wrong (R)", "rejected", "The model's result is wrong (R), then the next unreviewed image; "
                                            "E corrects the mask instead"))


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
        self._note.setObjectName("note")
        self._note.setPlaceholderText("note (Enter to keep)")
        self._counts = QLabel()
        self._counts.setWordWrap(True)
        buttons = QWidget()
        grid = QGridLayout(buttons)
        grid.setContentsMargins(0, 0, 0, 0)
        for column, (text, state, tip) in enumerate(BUTTONS):
            button = QPushButton(text)
            button.setToolTip(tip)
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
        self._where = QLabel()  # where the reviews are kept, when not beside the images
        self._where.setWordWrap(True)
        self._where.setTextFormat(Qt.TextFormat.PlainText)
        self._where.setStyleSheet("color: #8e8e93")
        form.addRow(self._where)
        form.setRowVisible(self._where, False)
        self._note.editingFinished.connect(lambda: self.note_changed.emit(self._note.text()))
        self.hide()

    def show_review(self, review, foreign: int, counts: dict | None = None) -> None:
        """The current image's review (None: unreviewed, or no log), the rows of other models kept aside, totals."""
        self.setVisible(counts is not None)
        if counts is None:  # no review log (no model yet, or none opened): hidden, and nothing to name — the
            # review module would load OpenCV and the inference stack on the GUI thread while the model loads
            for line in (self._state, self._who, self._note, self._counts):
                line.setText("")
            return
        from app.runs.review.log import STATE_NAMES

        state = review.state if review is not None else "unreviewed"
        name = STATE_NAMES.get(state, state)
        self._state.setText(f"<b style='color:{STATE_COLORS.get(state, '#8e8e93')}'>{name}</b>")
        self._who.setText(f"{review.who} · {review.when}" if review is not None and review.who else "")
        self._form.setRowVisible(self._who, bool(self._who.text()))
        self._note.setText(review.note if review is not None else "")
        parts = [f"{n} {STATE_NAMES.get(s, s)}" for s, n in (counts or {}).items() if n]
        if foreign:
            parts.append(f"{counted(foreign, 'review')} made with another model kept aside, not shown")
        self._counts.setText(" · ".join(parts))
        self._form.setRowVisible(self._counts, bool(parts))

    def show_location(self, folder: Path | None) -> None:
        """The review folder, when it is not beside the images (the bundled samples, a read-only folder); None:
        beside them, as usual (nothing to say)."""
        self._form.setRowVisible(self._where, folder is not None)
        if folder is not None:
            shown = re.sub(r"([/\\_])", "\\1\u200b", str(folder))  # a long path wraps in the narrow panel
            self._where.setText(f"Saved in your user data folder, not beside the images (they are part of SegLens "
                                f"or read-only): {shown}")
            self._where.setToolTip(str(folder))

    def location_text(self) -> str:
        return self._where.text() if self._form.isRowVisible(self._where) else ""

    def state_text(self) -> str:
        return self._state.text()
