"""The items the image viewer draws over the picture, built here once: the clipping frames the overlays sit in,
the split view's divider and side names, the brush ring of edit mode, and the patient-orientation letters painted
at the viewport's edges. ImageViewer (viewer.py) places and shows them; nothing here handles an event."""

from __future__ import annotations

from PySide6.QtCore import QRect
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QGraphicsDropShadowEffect,
    QGraphicsEllipseItem,
    QGraphicsItem,
    QGraphicsLineItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
)

from app.ui.widgets.lazy_qt import Qt


def clip_frame(scene: QGraphicsScene) -> QGraphicsRectItem:
    """A frame that clips its children (an overlay) to its rectangle: the whole image, or one side of the divider."""
    frame = QGraphicsRectItem()
    frame.setFlag(QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape, True)
    # a simple text item's pen is Qt.NoPen: QPen(Qt.PenStyle.NoPen) would make the Qt namespace's enums before the
    # window shows (~10 ms, app/ui/widgets/lazy_qt.py)
    frame.setPen(QGraphicsSimpleTextItem().pen())
    frame.setZValue(1)
    scene.addItem(frame)
    return frame


def split_items(scene: QGraphicsScene) -> tuple[QGraphicsLineItem, list[QGraphicsSimpleTextItem]]:
    """The split view's divider and its two side names (white on a shadow, unscaled by the zoom)."""
    divider = QGraphicsLineItem()
    divider_pen = QPen(QColor(255, 255, 255), 2)
    divider_pen.setCosmetic(True)
    divider.setPen(divider_pen)
    divider.setZValue(4)
    divider.hide()
    scene.addItem(divider)
    labels = []
    for _ in range(2):
        label = QGraphicsSimpleTextItem()
        label.setBrush(QColor(255, 255, 255))
        font = label.font()
        font.setBold(True)
        font.setPixelSize(13)
        label.setFont(font)
        shadow = QGraphicsDropShadowEffect()  # readable on bright images too
        shadow.setBlurRadius(4)
        shadow.setOffset(1, 1)
        shadow.setColor(QColor(0, 0, 0))
        label.setGraphicsEffect(shadow)
        label.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, True)
        label.setZValue(5)
        label.hide()
        scene.addItem(label)
        labels.append(label)
    return divider, labels


def brush_items(scene: QGraphicsScene) -> tuple[QGraphicsEllipseItem, QGraphicsEllipseItem]:
    """The brush ring at image scale: a light ring with a dark dash over it, seen on any image."""
    brush = QGraphicsEllipseItem()
    brush.setZValue(3)
    pen = QPen(QColor(255, 255, 255), 1.5)
    pen.setCosmetic(True)
    brush.setPen(pen)
    dark_ring = QGraphicsEllipseItem(brush)
    dark = QPen(QColor(0, 0, 0), 1.5, Qt.PenStyle.DashLine)
    dark.setCosmetic(True)
    dark_ring.setPen(dark)
    brush.hide()
    scene.addItem(brush)
    return brush, dark_ring


def paint_orientation(painter: QPainter, viewport: QRect, labels: dict[str, str]) -> None:
    """Patient directions ({"left": "R", "top": "A", ...}) at the edges of `viewport`, amber on a black shadow."""
    painter.save()
    painter.resetTransform()  # viewport coordinates: the letters stay at the edges whatever the zoom
    font = painter.font()
    font.setPixelSize(16)
    font.setBold(True)
    painter.setFont(font)
    box = viewport.adjusted(8, 6, -8, -6)
    places = {"left": Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
              "right": Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
              "top": Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignHCenter,
              "bottom": Qt.AlignmentFlag.AlignBottom | Qt.AlignmentFlag.AlignHCenter}
    for edge, align in places.items():
        text = labels.get(edge, "")
        for offset, color in (((1, 1), Qt.GlobalColor.black), ((0, 0), QColor(255, 214, 10))):
            painter.setPen(color)
            painter.drawText(box.translated(*offset), align, text)
    painter.restore()
