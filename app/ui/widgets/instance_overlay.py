"""The instance overlay: each instance filled in its class colour at the overlay's opacity (its mask, its box, or
its oriented box), outlined opaque, and labelled with its class and score; the one chosen in the list drawn
highlighted.

Each instance is turned into Qt shapes once, when the item is made: its mask's pixels (only inside its box, as the
record keeps them) become one small QImage, its outline one QPainterPath. A repaint (zoom, pan, opacity, a class
hidden) only draws those: no image-sized array is made, per instance or at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPainterPath, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsItem

from app.inference.model.instances import Instance
from app.ui.widgets.lazy_qt import Qt

OUTLINE_PX = 2.0  # screen pixels, whatever the zoom
HIGHLIGHT_PX = 4.0
LABEL_PX = 12  # the score label's font, in screen pixels
FALLBACK = (255, 255, 255)  # a class without a colour (never in a YOLO export: each class has one)


@dataclass(frozen=True)
class _Shape:
    """One instance as Qt draws it: its outline, and its fill (a mask's pixels at `at`, else the outline filled)."""

    instance: Instance
    outline: QPainterPath
    color: QColor
    label: str
    fill: QImage | None = None
    at: tuple[int, int] = (0, 0)  # where the fill's top-left pixel goes (its mask box's corner)


def score_label(instance: Instance) -> str:
    return f"{instance.class_name} {instance.score:.2f}"


def outline_path(instance: Instance) -> QPainterPath:
    """The instance's outline in image pixels: its mask's contours, its oriented box, or its box."""
    path = QPainterPath()
    if instance.mask is not None and instance.mask_box is not None:
        import cv2

        x0, y0 = instance.mask_box[0], instance.mask_box[1]
        contours, _ = cv2.findContours(instance.mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        for contour in contours:  # pixel centres: +0.5 puts the line through the edge pixels' middles
            path.addPolygon(QPolygonF([QPointF(x0 + x + 0.5, y0 + y + 0.5) for x, y in contour[:, 0]]))
            path.closeSubpath()
        return path
    if instance.rotated is not None:
        path.addPolygon(QPolygonF([QPointF(x, y) for x, y in rotated_corners(instance.rotated)]))
        path.closeSubpath()
        return path
    left, top, right, bottom = instance.box
    path.addRect(QRectF(left, top, right - left, bottom - top))
    return path


def rotated_corners(rotated: tuple[float, float, float, float, float]) -> list[tuple[float, float]]:
    """An oriented box's four corners (cx, cy, w, h, angle in radians)."""
    cx, cy, w, h, angle = rotated
    cos, sin = np.cos(angle), np.sin(angle)
    return [(float(cx + dx * cos - dy * sin), float(cy + dx * sin + dy * cos))
            for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2))]


def mask_image(mask: np.ndarray, color: tuple[int, int, int]) -> QImage:
    """A mask's pixels in `color` (opaque inside, clear outside), as a QImage of the mask's own size."""
    h, w = mask.shape
    rgba = np.zeros((h, w, 4), np.uint8)
    rgba[mask] = (*color, 255)
    return QImage(rgba.data, w, h, 4 * w, QImage.Format.Format_RGBA8888).copy()  # copy: Qt owns its pixels


def _shape(instance: Instance, color: tuple[int, int, int]) -> _Shape:
    fill, at = None, (0, 0)
    if instance.mask is not None and instance.mask_box is not None:
        fill, at = mask_image(instance.mask, color), (instance.mask_box[0], instance.mask_box[1])
    return _Shape(instance, outline_path(instance), QColor(*color), score_label(instance), fill, at)


class InstancesItem(QGraphicsItem):
    """The instances of one picture over it, in scene (image) pixels: all that the picture holds, those under the
    minimum score or of a hidden class left undrawn (a threshold drag repaints, it makes nothing anew)."""

    def __init__(self, instances: Sequence[Instance], colors: Sequence[tuple[int, int, int] | None],
                 image_hw: tuple[int, int], parent: QGraphicsItem | None = None) -> None:
        super().__init__(parent)
        self._shapes = [_shape(i, _color(colors, i.class_index)) for i in instances]
        self._rect = QRectF(0, 0, image_hw[1], image_hw[0])
        self._fill_opacity = 0.5
        self._filled = True  # the overlay's Filled mode; Contour: outlines only
        self._hidden: frozenset[int] = frozenset()
        self._min_score: float | None = None
        self._highlight: Instance | None = None
        self._rubber: QRectF | None = None  # the box being dragged (add or redraw an instance)
        self._stroke: tuple[QPainterPath, float] | None = None  # the brush stroke being painted, its width
        self.setZValue(2)  # over the mask overlay and its outlines

    @property
    def instances(self) -> tuple[Instance, ...]:
        """Every instance the item was made with, drawn or not."""
        return tuple(shape.instance for shape in self._shapes)

    def set_min_score(self, score: float | None) -> None:
        """Draw only the instances scoring at least `score` (None: all)."""
        self._min_score = score
        self.update()

    def _shown(self) -> list[_Shape]:
        low = self._min_score
        return [s for s in self._shapes if s.instance.class_index not in self._hidden
                and (low is None or s.instance.score >= low)]

    def boundingRect(self) -> QRectF:
        return self._rect

    def set_fill_opacity(self, opacity: float) -> None:
        self._fill_opacity = max(0.0, min(1.0, opacity))
        self.update()

    def set_filled(self, filled: bool) -> None:
        self._filled = filled
        self.update()

    def set_hidden(self, hidden: frozenset[int]) -> None:
        """The class indices not drawn (the legend's unticked classes)."""
        self._hidden = frozenset(hidden)
        self.update()

    def set_highlight(self, instance: Instance | None) -> None:
        self._highlight = instance
        self.update()

    def set_rubber(self, rect: QRectF | None) -> None:
        """The box the reader is dragging (image pixels), None when none."""
        self._rubber = rect
        self.update()

    def set_stroke(self, points: Sequence[tuple[float, float]], radius: float) -> None:
        """The brush stroke being painted (image pixels; none: no stroke), `radius` pixels wide each side."""
        if not points:
            self._stroke = None
        else:
            path = QPainterPath(QPointF(*points[0]))
            for point in points[1:]:
                path.lineTo(QPointF(*point))
            self._stroke = (path, 2 * radius + 1)
        self.update()

    @property
    def rubber(self) -> QRectF | None:
        return self._rubber

    @property
    def highlight(self) -> Instance | None:
        return self._highlight

    def instance_at(self, x: float, y: float) -> Instance | None:
        """The best-scoring shown instance whose outline holds (x, y) (image pixels), None where there is none."""
        point = QPointF(x, y)
        for shape in self._shown():  # best first
            if shape.outline.contains(point):
                return shape.instance
        return None

    def paint(self, painter: QPainter, option, widget=None) -> None:
        scale = max(painter.worldTransform().m11(), 1e-6)  # screen pixels per image pixel
        shown = self._shown()
        painter.setOpacity(self._fill_opacity if self._filled else 0.0)
        for shape in shown if self._filled else ():
            if shape.fill is not None:
                painter.drawImage(QPointF(*shape.at), shape.fill)
            else:
                painter.fillPath(shape.outline, shape.color)
        painter.setOpacity(1.0)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for shape in shown:
            painter.setPen(_pen(shape.color, OUTLINE_PX))
            painter.drawPath(shape.outline)
        chosen = next((s for s in shown if s.instance is self._highlight), None)
        if chosen is not None:
            painter.setPen(_pen(QColor(255, 255, 255), HIGHLIGHT_PX, dashed=True))
            painter.drawPath(chosen.outline)
        if self._rubber is not None:
            painter.setPen(_pen(QColor(255, 255, 255), OUTLINE_PX, dashed=True))
            painter.drawRect(self._rubber)
        if self._stroke is not None:  # image-scale width: what the brush covers
            painter.setOpacity(0.6)
            stroke = QPen(QColor(255, 255, 255), self._stroke[1], Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap,
                          Qt.PenJoinStyle.RoundJoin)
            painter.setPen(stroke)
            painter.drawPath(self._stroke[0])
            painter.setOpacity(1.0)
        self._paint_labels(painter, shown, scale)

    def _paint_labels(self, painter: QPainter, shown: list[_Shape], scale: float) -> None:
        """Each label over its instance's top-left corner, white on its class colour, LABEL_PX high on screen."""
        font = QFont(painter.font())
        font.setPixelSize(LABEL_PX)
        font.setBold(True)
        painter.save()
        painter.scale(1 / scale, 1 / scale)  # screen pixels: the label keeps its size at any zoom
        painter.setFont(font)
        metrics = painter.fontMetrics()
        for shape in shown:
            x0, y0 = shape.instance.box[0] * scale, shape.instance.box[1] * scale
            text_w, text_h = metrics.horizontalAdvance(shape.label) + 6, metrics.height()
            top = y0 - text_h if y0 - text_h >= 0 else y0
            back = QColor(shape.color)
            back.setAlpha(220)
            painter.fillRect(QRectF(x0, top, text_w, text_h), back)
            painter.setPen(QColor(0, 0, 0) if back.lightness() > 150 else QColor(255, 255, 255))
            painter.drawText(QRectF(x0 + 3, top, text_w, text_h), int(Qt.AlignmentFlag.AlignVCenter), shape.label)
        painter.restore()


def _color(colors: Sequence[tuple[int, int, int] | None], index: int) -> tuple[int, int, int]:
    color = colors[index] if 0 <= index < len(colors) else None
    return color if color is not None else FALLBACK


def _pen(color: QColor, width: float, *, dashed: bool = False) -> QPen:
    pen = QPen(color, width, Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
    pen.setCosmetic(True)
    return pen
