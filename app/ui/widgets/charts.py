"""Two small painted widgets, no plotting library: the heatmap's colour bar and the folder's score histogram.

The colour bar is the fixed 0–1 scale of every probability or uncertainty layer (the LUT the overlay uses), with
the pixel threshold marked on it. The histogram shows the image scores of a folder after Run on all, with the
verdict's score limit as a line the reader drags: files at or beyond it are NG (red bars), the others OK. A model
with a REVIEW band (`verdict.review_if`) has its review limit drawn too, dashed and fixed: bars between the two limits
are REVIEW amber. The dragged line stays the fail limit (the one the reader tunes; the band's lower edge is the
calibrated one, moved by `seglens-cli calibrate` or the sidecar).
"""

from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

BAR_HEIGHT = 14
OK_COLOR, NG_COLOR = QColor(52, 199, 89), QColor(255, 69, 58)
REVIEW_COLOR = QColor(255, 159, 10)  # amber, as the legend's uncertain: neither the OK green nor the NG red


def _text_color(widget: QWidget) -> QColor:
    return widget.palette().color(widget.foregroundRole())


class ColourBar(QWidget):
    """The heatmap scale 0 → 1 with ticks, and the threshold (None: no marker)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._marker: float | None = None
        self._gradient: QImage | None = None
        self.setMinimumHeight(BAR_HEIGHT + 18)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_marker(self, value: float | None) -> None:
        self._marker = value
        self.update()

    def marker(self) -> float | None:
        return self._marker

    def _lut_image(self) -> QImage:
        if self._gradient is None:
            from app.ui.widgets.overlay import heatmap_table

            image = QImage(256, 1, QImage.Format.Format_RGB32)
            for x, rgba in enumerate(heatmap_table()):
                image.setPixel(x, 0, rgba)
            self._gradient = image
        return self._gradient

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        left, width = 6.0, max(1.0, self.width() - 12.0)
        painter.drawImage(QRectF(left, 2, width, BAR_HEIGHT), self._lut_image())
        painter.setPen(_text_color(self))
        for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
            x = left + tick * width
            painter.drawLine(QPointF(x, BAR_HEIGHT + 2), QPointF(x, BAR_HEIGHT + 5))
            painter.drawText(QRectF(x - 20, BAR_HEIGHT + 4, 40, 14), Qt.AlignmentFlag.AlignCenter, f"{tick:g}")
        if self._marker is not None:
            x = left + min(max(self._marker, 0.0), 1.0) * width
            painter.setPen(QPen(QColor(255, 255, 255), 2))
            painter.drawLine(QPointF(x, 0), QPointF(x, BAR_HEIGHT + 4))
            painter.setPen(QPen(QColor(0, 0, 0), 1))
            painter.drawLine(QPointF(x - 2, 0), QPointF(x - 2, BAR_HEIGHT + 4))
        painter.end()


class ScoreHistogram(QWidget):
    """Image scores of a folder in bins over [0, 1] (wider when a score lies outside), the score limit as a line
    that can be dragged when `draggable`; bars at or beyond the limit are NG red, those above the review limit (a
    dashed line that does not move) REVIEW amber, the others OK green."""

    limit_moved = Signal(float)  # while dragging
    BINS = 40

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._scores: list[float] = []
        self._limit: float | None = None
        self._review: float | None = None  # the band's lower limit (verdict.review_if's score rule), None: no band
        self._inclusive = True
        self._draggable = False
        self._dragging = False
        self._range = (0.0, 1.0)
        self.setMinimumHeight(90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_scores(self, scores: list[float], limit: float | None, *, inclusive: bool = True,
                   draggable: bool = False, review: float | None = None) -> None:
        """The folder's `scores`, the fail `limit` (dragged when `draggable`) and the `review` limit (None: no band)."""
        self._scores = [s for s in scores if math.isfinite(s)]  # a NaN has no bin (int(nan) raises in paint)
        self._limit, self._inclusive, self._draggable = limit, inclusive, draggable and limit is not None
        self._review = review
        low = min([0.0, *self._scores])
        high = max([1.0, *self._scores])
        self._range = (low, high)
        self.setCursor(Qt.CursorShape.SizeHorCursor if self._draggable else Qt.CursorShape.ArrowCursor)
        self.update()

    def set_limit(self, limit: float | None) -> None:
        self._limit = limit
        self.update()

    def limit(self) -> float | None:
        return self._limit

    def lines(self) -> list[tuple[str, float]]:
        """The limits drawn, lowest first: ("review", limit) for the band's lower edge, ("ng", limit) the fail one."""
        drawn = [("review", self._review), ("ng", self._limit)]
        return sorted(((kind, value) for kind, value in drawn if value is not None), key=lambda line: line[1])

    def bin_state(self, index: int) -> str:
        """What the bar of bin `index` is painted as: "ng", "review" or "ok" (by the bin's centre)."""
        low, high = self._range
        centre = low + (index + 0.5) * (high - low) / self.BINS
        if self._limit is not None and centre >= self._limit:
            return "ng"
        return "review" if self._review is not None and centre > self._review else "ok"

    def counts(self) -> list[int]:
        """Scores per bin (what is painted)."""
        low, high = self._range
        counts = [0] * self.BINS
        for score in self._scores:
            index = int((score - low) / max(high - low, 1e-12) * self.BINS)
            counts[min(max(index, 0), self.BINS - 1)] += 1
        return counts

    def _plot(self) -> QRectF:
        return QRectF(6, 4, max(1.0, self.width() - 12.0), max(1.0, self.height() - 22.0))

    def _x(self, value: float) -> float:
        plot, (low, high) = self._plot(), self._range
        return plot.left() + (value - low) / max(high - low, 1e-12) * plot.width()

    def value_at(self, x: float) -> float:
        plot, (low, high) = self._plot(), self._range
        fraction = min(max((x - plot.left()) / plot.width(), 0.0), 1.0)
        return low + fraction * (high - low)

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        plot, (low, high) = self._plot(), self._range
        painter.fillRect(plot, self.palette().color(self.backgroundRole()).darker(108))
        counts = self.counts()
        tallest = max(counts) or 1
        step = plot.width() / self.BINS
        colors = {"ng": NG_COLOR, "review": REVIEW_COLOR, "ok": OK_COLOR}
        for index, count in enumerate(counts):
            if not count:
                continue
            height = count / tallest * plot.height()
            bar = QRectF(plot.left() + index * step + 1, plot.bottom() - height, max(1.0, step - 2), height)
            painter.fillRect(bar, colors[self.bin_state(index)])
        painter.setPen(_text_color(self))
        for tick in (low, (low + high) / 2, high):
            painter.drawText(QRectF(self._x(tick) - 24, plot.bottom() + 2, 48, 14), Qt.AlignmentFlag.AlignCenter,
                             f"{tick:.2g}")
        if self._review is not None:  # dashed: a limit drawn, not one to drag
            x = self._x(self._review)
            painter.setPen(QPen(REVIEW_COLOR, 2, Qt.PenStyle.DashLine))
            painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
        if self._limit is not None:
            x = self._x(self._limit)
            painter.setPen(QPen(_text_color(self), 2))
            painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
            if self._draggable:
                handle = QPolygonF([QPointF(x - 5, plot.top()), QPointF(x + 5, plot.top()), QPointF(x, plot.top() + 7)])
                painter.setBrush(_text_color(self))
                painter.drawPolygon(handle)
        painter.end()

    def mousePressEvent(self, event) -> None:
        if self._draggable and event.button() == Qt.MouseButton.LeftButton:
            self._dragging = True
            self._drag_to(event.position().x())
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:
        if self._dragging:
            self._drag_to(event.position().x())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        self._dragging = False
        super().mouseReleaseEvent(event)

    def _drag_to(self, x: float) -> None:
        value = round(self.value_at(x), 3)
        if value != self._limit:
            self._limit = value
            self.update()
            self.limit_moved.emit(value)
