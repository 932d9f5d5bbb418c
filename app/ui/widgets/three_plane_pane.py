"""One pane of the three-plane view: a slice picture and its mask overlay at the volume's true proportions, the
linked crosshair, the plane's name and slice, and the patient-orientation letters; its own zoom and pan.

Scene coordinates are millimetres (each voxel drawn `voxel_mm` wide and tall), so an anisotropic volume's coronal
and sagittal panes come out at the patient's proportions rather than squashed by the slice step. The pane only
says what the reader did (`clicked`, `stepped`, `window_dragged`, `hovered`, `fit_asked`); ThreePlaneView
decides what that means for the other panes.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPen, QPixmap, QTransform
from PySide6.QtWidgets import QApplication, QGraphicsPixmapItem, QGraphicsScene, QGraphicsView, QLineEdit

from app.ui.widgets.viewer import paint_orientation

CROSS_COLOR = QColor(80, 200, 255, 210)  # light blue: apart from the amber letters and the usual class colours
CROSS_GAP = 7  # screen pixels left open around the point, so the voxel under the crosshair stays visible
ZOOM_STEP = 1.25
MIN_ZOOM, MAX_ZOOM = 0.05, 64.0
_BACK = {Qt.Key.Key_Up, Qt.Key.Key_Left, Qt.Key.Key_PageUp}  # the previous slice, as PgUp in the one-pane view
_FORWARD = {Qt.Key.Key_Down, Qt.Key.Key_Right, Qt.Key.Key_PageDown}


class PlanePane(QGraphicsView):
    clicked = Signal(int, int)  # the picture's voxel (x, y) the left button pressed or dragged onto
    stepped = Signal(int)  # −1 / +1 slice: keys or the wheel while the mouse is over this pane
    window_dragged = Signal(float, float)  # dx, dy in screen pixels while the right button drags (window/level)
    hovered = Signal()  # the mouse came over this pane
    fit_asked = Signal()  # a double click: this pane alone, or back to all three

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setBackgroundBrush(QColor(0, 0, 0))
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        # letters, title and crosshair are painted on the viewport: a scroll that moved old pixels would smear them
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMinimumSize(120, 120)
        self._image_item = QGraphicsPixmapItem()
        self._overlay_item = QGraphicsPixmapItem()
        self._overlay_item.setZValue(1)
        for item in (self._image_item, self._overlay_item):
            item.setTransformationMode(Qt.TransformationMode.FastTransformation)  # real voxels, crisp class edges
            self.scene().addItem(item)
        self._voxel = (1.0, 1.0)  # mm per voxel across, down
        self._size = (0, 0)  # the picture's voxels (width, height)
        self._cross: tuple[int, int] | None = None
        self._letters: dict[str, str] | None = None
        self._title = ""
        self._fit_mode = True
        self._pressed: Qt.MouseButton | None = None
        self._last: QPointF | None = None

    # -- content ---------------------------------------------------------------------------------------

    def set_geometry(self, size: tuple[int, int], voxel_mm: tuple[float, float],
                     letters: dict[str, str] | None) -> None:
        """A new volume: its picture's voxels (width, height), each voxel's (width, height) in mm, the letters."""
        self._size, self._letters = size, letters
        scale = min(voxel_mm) or 1.0  # scene units of the finest in-plane spacing keep zoom 1 ≈ one voxel
        self._voxel = (voxel_mm[0] / scale, voxel_mm[1] / scale)
        transform = QTransform.fromScale(*self._voxel)
        for item in (self._image_item, self._overlay_item):
            item.setTransform(transform)
        self.scene().setSceneRect(QRectF(0, 0, size[0] * self._voxel[0], size[1] * self._voxel[1]))
        self.fit()

    def set_picture(self, image: QImage, overlay: QImage | None) -> None:
        self._image_item.setPixmap(QPixmap.fromImage(image))
        self.set_overlay(overlay)

    def set_overlay(self, overlay: QImage | None) -> None:
        self._overlay_item.setPixmap(QPixmap.fromImage(overlay) if overlay is not None else QPixmap())

    def set_overlay_opacity(self, opacity: float) -> None:
        self._overlay_item.setOpacity(max(0.0, min(1.0, opacity)))

    def set_overlay_visible(self, visible: bool) -> None:
        self._overlay_item.setVisible(visible)

    def set_cross(self, x: int, y: int, title: str) -> None:
        """The crosshair on voxel (x, y) of the picture, and the pane's title ("Axial  12 / 40")."""
        self._cross, self._title = (x, y), title
        self.viewport().update()

    @property
    def letters(self) -> dict[str, str] | None:
        return self._letters

    @property
    def title(self) -> str:
        return self._title

    def cross_position(self) -> QPointF | None:
        """Where the crosshair's voxel centre is, in viewport pixels (None before a volume)."""
        return None if self._cross is None else self.position_of(*self._cross)

    def position_of(self, x: int, y: int) -> QPointF:
        """The centre of the picture's voxel (x, y) in viewport pixels."""
        return QPointF(self.mapFromScene(QPointF((x + 0.5) * self._voxel[0], (y + 0.5) * self._voxel[1])))

    def picture_rect(self) -> QRectF:
        """The picture's rectangle in viewport pixels (its on-screen proportions)."""
        return self.mapFromScene(self.sceneRect()).boundingRect().toRectF()

    # -- zoom ------------------------------------------------------------------------------------------

    def zoom(self) -> float:
        return self.transform().m11()

    def fit(self) -> None:
        self._fit_mode = True
        if self._size[0] and self._size[1]:
            self.fitInView(self.sceneRect(), Qt.AspectRatioMode.KeepAspectRatio)
            self._smooth()

    def zoom_by(self, factor: float) -> None:
        target = max(MIN_ZOOM, min(MAX_ZOOM, self.zoom() * factor))
        factor = target / max(self.zoom(), 1e-9)
        if abs(factor - 1.0) > 1e-6:
            self._fit_mode = False
            self.scale(factor, factor)
            self._smooth()

    def _smooth(self) -> None:
        """Smooth when zoomed out (no aliasing of thin structures); real voxels when zoomed in. The overlay stays
        crisp: a blurred class edge reads as a partial-volume probability it is not."""
        smooth = self.zoom() < 1.0
        self.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, smooth)
        self._image_item.setTransformationMode(Qt.TransformationMode.SmoothTransformation if smooth
                                               else Qt.TransformationMode.FastTransformation)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._fit_mode:
            self.fit()

    # -- events ----------------------------------------------------------------------------------------

    def voxel_at(self, position: QPointF) -> tuple[int, int]:
        """The picture's voxel (x, y) under viewport `position` (may lie outside the picture): the voxel drawn at
        the centre of the screen pixel there (its corner named the voxel before it below 100 %, as the viewer's edit
        mode did; mapToScene takes no QPointF in PySide6: the inverted viewport transform maps it)."""
        pixel = QPointF(math.floor(position.x()) + 0.5, math.floor(position.y()) + 0.5)
        scene = self.viewportTransform().inverted()[0].map(pixel)
        return math.floor(scene.x() / self._voxel[0]), math.floor(scene.y() / self._voxel[1])

    def mousePressEvent(self, event) -> None:
        self._pressed, self._last = event.button(), event.position()
        if event.button() == Qt.MouseButton.LeftButton and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.clicked.emit(*self.voxel_at(event.position()))
        event.accept()

    def mouseMoveEvent(self, event) -> None:
        if self._pressed is None or self._last is None:
            return super().mouseMoveEvent(event)
        position = event.position()
        dx, dy = position.x() - self._last.x(), position.y() - self._last.y()
        self._last = position
        if self._pressed == Qt.MouseButton.RightButton:
            self.window_dragged.emit(dx, dy)
        elif self._pressed == Qt.MouseButton.MiddleButton or event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - round(dx))  # pan
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - round(dy))
            self._fit_mode = False
        elif self._pressed == Qt.MouseButton.LeftButton:
            self.clicked.emit(*self.voxel_at(position))  # dragging the crosshair through the volume
        event.accept()

    def mouseReleaseEvent(self, event) -> None:
        self._pressed = self._last = None
        event.accept()

    def mouseDoubleClickEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.fit_asked.emit()
        event.accept()

    def wheelEvent(self, event) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.zoom_by(ZOOM_STEP**steps)  # AnchorUnderMouse keeps the point under the cursor still
        elif steps:
            self.stepped.emit(-1 if steps > 0 else 1)  # wheel down = next slice, as Ctrl + wheel in one pane
        event.accept()

    def event(self, event) -> bool:
        # the window's Left / Right / PgUp / PgDn shortcuts step images and slices of the one-pane view; over a pane
        # these keys step this pane's slice, so the pane claims them before the shortcuts see them
        if event.type() == QEvent.Type.ShortcutOverride and _slice_key(event) is not None:
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event) -> None:
        step = _slice_key(event)
        if step is None:
            super().keyPressEvent(event)
            return
        self.stepped.emit(step)
        event.accept()

    def enterEvent(self, event) -> None:
        super().enterEvent(event)
        # keys follow the mouse between panes; not out of a text box the reader is typing in
        if not isinstance(QApplication.focusWidget(), QLineEdit):
            self.setFocus(Qt.FocusReason.MouseFocusReason)
        self.hovered.emit()

    # -- painting --------------------------------------------------------------------------------------

    def drawForeground(self, painter: QPainter, rect) -> None:
        super().drawForeground(painter, rect)
        cross = self.cross_position()
        painter.save()
        painter.resetTransform()
        if cross is not None:
            _paint_cross(painter, cross, self.viewport().rect().width(), self.viewport().rect().height())
        if self._title:
            font = painter.font()
            font.setPixelSize(13)
            font.setBold(True)
            painter.setFont(font)
            box = self.viewport().rect().adjusted(8, 6, -8, -6)
            for offset, color in (((1, 1), QColor(0, 0, 0)), ((0, 0), QColor(235, 235, 235))):
                painter.setPen(color)
                painter.drawText(box.translated(*offset), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop,
                                 self._title)
        painter.restore()
        if self._letters:  # the top letter below the title: in a narrow pane they would overlap
            paint_orientation(painter, self.viewport().rect().adjusted(0, 18 if self._title else 0, 0, 0),
                              self._letters)


def _slice_key(event) -> int | None:
    """−1 / +1 for a slice-stepping key pressed without a modifier (Shift allowed), else None."""
    if event.modifiers() & ~Qt.KeyboardModifier.ShiftModifier & ~Qt.KeyboardModifier.KeypadModifier:
        return None
    key = event.key()
    return -1 if key in _BACK else 1 if key in _FORWARD else None


def _paint_cross(painter: QPainter, at: QPointF, width: int, height: int) -> None:
    """Two lines through `at` across the whole pane, open for CROSS_GAP pixels around it, on a dark outline."""
    x, y = at.x(), at.y()
    segments = (((0, y), (x - CROSS_GAP, y)), ((x + CROSS_GAP, y), (width, y)),
                ((x, 0), (x, y - CROSS_GAP)), ((x, y + CROSS_GAP), (x, height)))
    for pen in (QPen(QColor(0, 0, 0, 150), 3), QPen(CROSS_COLOR, 1)):
        painter.setPen(pen)
        for (x0, y0), (x1, y1) in segments:
            painter.drawLine(QPointF(x0, y0), QPointF(x1, y1))
