"""Fitting a small screen (1280×720, or 1920×1080 at 150 %): texts that never set their window's size, and windows
sized to the screen they open on.

`FitLabel`: a label whose text wraps inside the label's box, at a word or anywhere inside a long word (a UID, a path,
a model's file name), in at most `lines` lines, the last one elided with "…"; the whole text is its tooltip
whenever it does not fit. `text()` is the whole text, as set. The label asks for the width of its text on one line
(`hint_width` at most) and accepts any narrower width; its height is that of the lines it shows now. Style sheets (a
background, padding) work as on any QLabel: what is shown is plain text laid out inside the label's contents
rectangle.

`size_on_screen(window, wanted)`: a window's first size, `wanted` where the screen has room, else the screen's
available area less a window frame (never below the window's own minimum).
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtGui import QFont, QFontMetrics, QTextLayout, QTextOption
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from app.ui.widgets.lazy_qt import Qt, set_enum  # the side panel's label is made before the first paint

MIN_CHARS = 8  # the narrowest the label goes: a few characters and the ellipsis
FRAME = QSize(16, 40)  # a window's borders and title bar, which the available area must hold too


class FitLabel(QLabel):
    def __init__(self, text: str = "", *, lines: int = 1, hint_width: int = 480, elide: str = "ElideRight",
                 parent: QWidget | None = None) -> None:
        """`elide`: where a text too long is cut (Qt.TextElideMode's key: ElideRight, ElideMiddle for a path)."""
        super().__init__(parent)
        self._full, self._lines, self._hint_width, self._elide = "", max(1, lines), hint_width, elide
        self._own_tip = ""
        set_enum(self, "textFormat", "PlainText")
        self.setWordWrap(False)  # the lines are made here, to the label's width
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self._refit()
        self.updateGeometry()

    def text(self) -> str:
        """The whole text, as set (what is shown may be wrapped and elided)."""
        return self._full

    def shown_text(self) -> str:
        """What is on screen now: the lines as wrapped, the last one elided when the text did not fit."""
        return super().text()

    def setToolTip(self, tip: str) -> None:
        self._own_tip = tip
        self._refit()

    def sizeHint(self) -> QSize:
        metrics = self.fontMetrics()
        widest = max((metrics.horizontalAdvance(line) for line in _paragraphs(self._full)), default=0)
        return QSize(min(widest, self._hint_width) + self._padding_width() + 2, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        narrowest = self.fontMetrics().averageCharWidth() * MIN_CHARS + self._padding_width()
        return QSize(min(narrowest, self.sizeHint().width()), super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._refit()

    def _padding_width(self) -> int:
        return self.width() - self.contentsRect().width() + 2 * self.margin()  # frame, padding, margins

    def _refit(self) -> None:
        width = max(self.contentsRect().width() - 2 * self.margin(), 1)
        if not self._full:  # nothing to lay out (and no Qt enum made before the first paint)
            shown, cut = "", False
        else:
            shown, cut = _fit(self._full, self.font(), width, self._lines, getattr(Qt.TextElideMode, self._elide))
        if shown != super().text():
            super().setText(shown)
            self.updateGeometry()  # the number of lines, and so the height, may have changed
        whole = self._full if cut and self._full != self._own_tip else ""
        super().setToolTip("\n".join(part for part in (whole, self._own_tip) if part))


def _paragraphs(text: str) -> list[str]:
    return text.split("\n") if text else []


def _fit(text: str, font: QFont, width: int, lines: int, elide: Qt.TextElideMode) -> tuple[str, bool]:
    """`text` wrapped to `width` pixels (at words, or anywhere in a long word), at most `lines` lines, the last
    elided when there is more; and whether it was."""
    metrics = QFontMetrics(font)
    if lines == 1:
        shown = metrics.elidedText(text.replace("\n", " "), elide, width)
        return shown, shown != text
    paragraphs = _paragraphs(text)
    wrapped: list[tuple[str, str]] = []  # each line, and the text from its start to the end
    for index, paragraph in enumerate(paragraphs):
        after = " ".join(paragraphs[index + 1:])
        starts = _wrap(paragraph, font, width) if paragraph else [0]
        for start, end in zip(starts, [*starts[1:], len(paragraph)], strict=True):
            wrapped.append((paragraph[start:end].rstrip(), " ".join(filter(None, (paragraph[start:], after)))))
    if len(wrapped) <= lines:
        return "\n".join(line for line, _ in wrapped), False
    kept = [line for line, _ in wrapped[:lines - 1]]
    kept.append(metrics.elidedText(wrapped[lines - 1][1], elide, width))
    return "\n".join(kept), True


def _wrap(paragraph: str, font: QFont, width: int) -> list[int]:
    """Where each line of `paragraph` starts, wrapped to `width` pixels."""
    layout = QTextLayout(paragraph, font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    layout.setTextOption(option)
    layout.beginLayout()
    found = []
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        found.append(line.textStart())
    layout.endLayout()
    return found or [0]


def size_on_screen(window: QWidget, wanted: QSize) -> None:
    """Resize `window` to `wanted`, within the available area of its screen (its parent's, for a dialog not yet
    shown) less a frame."""
    anchor = window.parentWidget() or window
    room = anchor.screen().availableGeometry().size() - FRAME
    window.resize(wanted.boundedTo(room).expandedTo(window.minimumSizeHint()))
