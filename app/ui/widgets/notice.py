"""The status bar's message area: the whole message, cut at its end between words to the room the permanent widgets
leave (the full text in its tooltip), and an "Open folder" button when the message is about files written to a folder.

QStatusBar's own temporary message is painted under the permanent widgets and simply cut off
(`Run on all done: 8 ok, 0 failed — /ho`); this one is a normal widget, so the layout gives it what is left.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from app.ui.widgets.lazy_qt import Qt, set_enum

if TYPE_CHECKING:
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QFontMetrics


TOKEN_CHARS = 20  # a first word longer than this is a token (a path, a UID), not a word of the message


class _ElidedLabel(QLabel):
    """One line of text, its last words left out when it does not fit (the start says what happened)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._full = ""
        set_enum(self, "textFormat", "PlainText")
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # takes what is left
        self.setMinimumWidth(60)

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._elide()

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        line = " ".join(self._full.split())  # one line: a message may carry a newline from an error
        if not line:  # as the window first shows: Qt.TextElideMode would make the Qt namespace's enums (lazy_qt)
            self.setText("")
            return
        self.setText(elided_at_a_word(line, self.fontMetrics(), max(0, self.width())))


def elided_at_a_word(line: str, metrics: QFontMetrics, width: int) -> str:
    """`line` whole when it fits in `width` pixels, else its first whole words and " …": cut at the end and between
    words, never inside one (a UID or a path elided in its middle, `1.2.826.0…4253`, read as another one). The last
    resort, when a first token (a path, a UID: over TOKEN_CHARS characters) wider than half the room would leave
    none of the message: that token cut in its middle to half the room, the message's first words after it. A line
    that still does not fit is cut at its end."""
    if metrics.horizontalAdvance(line) <= width:
        return line
    words = line.split(" ")
    kept = _whole_words(words, metrics, width)
    first = words[0]
    too_long = len(first) > TOKEN_CHARS and metrics.horizontalAdvance(first) > width // 2
    if too_long and len(words) > 1 and " " not in kept:
        words[0] = metrics.elidedText(first, Qt.TextElideMode.ElideMiddle, width // 2)
        kept = _whole_words(words, metrics, width)
    return f"{kept} …" if kept else metrics.elidedText(line, Qt.TextElideMode.ElideRight, width)


def _whole_words(words: list[str], metrics: QFontMetrics, width: int) -> str:
    """The first of `words` that fit in `width` pixels with " …" after them ("" when the first does not)."""
    kept = ""
    for word in words:
        longer = f"{kept} {word}" if kept else word
        if metrics.horizontalAdvance(f"{longer} …") > width:
            break
        kept = longer
    return kept


class Notice(QWidget):
    """`show_message(text, timeout_ms, folder=…)`; a message with a folder stays until the next one."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.label = _ElidedLabel()
        self.open_button = QPushButton("Open folder")
        self.open_button.setFlat(True)
        self.open_button.hide()  # its pointing-hand cursor is set when it first shows (a Qt enum, lazy_qt)
        self.open_button.clicked.connect(self.open_folder)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.open_button)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._folder: Path | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.clear)

    def show_message(self, text: str, timeout_ms: int = 0, *, folder: str | Path | None = None) -> None:
        """Show `text` for `timeout_ms` (0: until the next message); `folder`: the folder "Open folder" opens."""
        self.label.set_full_text(text)
        self._folder = Path(folder) if folder else None
        if self._folder is not None and self.open_button.cursor().shape() != Qt.CursorShape.PointingHandCursor:
            self.open_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.open_button.setVisible(self._folder is not None)
        self.open_button.setToolTip(f"Open {self._folder} in the file manager" if self._folder else "")
        self._timer.stop()
        if timeout_ms > 0 and self._folder is None and text:
            self._timer.start(timeout_ms)

    def text(self) -> str:
        return self.label.full_text()

    def clear(self) -> None:
        self.show_message("")

    def folder_url(self) -> QUrl | None:
        """The URL "Open folder" opens (a file: URL), None when the message names no folder."""
        from PySide6.QtCore import QUrl  # when asked: these two Qt types cost ~1 ms before the window shows

        return QUrl.fromLocalFile(str(self._folder)) if self._folder is not None else None

    def open_folder(self) -> None:
        url = self.folder_url()
        if url is not None:
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)  # the desktop's file manager
