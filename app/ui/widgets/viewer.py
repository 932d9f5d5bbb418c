"""ImageViewer: a QGraphicsView with the image and a separate overlay item; zoom, fit, 1:1, pan, the split view's
divider and edit mode's brush. The items it draws over the picture are built once, at the end of this file: the
clipping frames the overlays sit in, the divider and its side names, the brush ring, and the patient-orientation
letters painted at the viewport's edges (the three-plane view's panes paint theirs too).

Scene coordinates are full-resolution image pixels even when the display copy is downscaled (the items are
scaled up), so zoom levels and the 1:1 view mean the same thing for every image.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRect, QRectF, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QGraphicsDropShadowEffect,
    QGraphicsEllipseItem,
    QGraphicsItem,
    QGraphicsLineItem,
    QGraphicsPixmapItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QLabel,
)

from app.ui.widgets.detail import DetailItem
from app.ui.widgets.lazy_qt import Qt

if TYPE_CHECKING:
    from app.ui.widgets.instance_overlay import InstancesItem

NOTICE_FAILED = "QLabel { color: white; background: rgba(176, 0, 32, 225); padding: 6px 10px; border-radius: 4px; }"
NOTICE_WARNING = ("QLabel { color: #1c1c1e; background: rgba(255, 204, 0, 235); padding: 6px 10px; "
                  "border-radius: 4px; }")
NOTICE_MARGIN = 10  # px from the canvas's edges
ZOOM_STEP = 1.25
MIN_ZOOM, MAX_ZOOM = 0.02, 64.0
CLICK_SLOP = 3  # screen pixels a click may move and still be a click, not a pan


class ImageViewer(QGraphicsView):
    zoom_changed = Signal(float)
    window_dragged = Signal(float, float)  # dx, dy in screen pixels while the right button drags (window/level)
    # edit mode: the left button paints instead of panning (image coordinates), Ctrl+wheel sizes the brush
    edit_pressed = Signal(float, float, object)  # x, y, Qt.KeyboardModifiers
    edit_moved = Signal(float, float)
    edit_released = Signal()
    edit_right_pressed = Signal(float, float)  # the Smart tool's negative point (right_edits: window/level's else)
    brush_wheel = Signal(int)  # +1 / −1 per wheel notch
    slice_wheel = Signal(int)  # Ctrl + wheel outside edit mode: +1 / −1 slice of a volume
    clicked = Signal(float, float)  # a left click outside edit mode that did not pan: image x, y (an instance chosen)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        # as a property: setBackgroundBrush(QColor) makes the Qt namespace's enums before the window shows (lazy_qt)
        self.setProperty("backgroundBrush", QColor(32, 33, 36))
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, True)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self._image_item = QGraphicsPixmapItem()  # smooth from its first picture on (set_image)
        self._smoothing_set = False
        self.scene().addItem(self._image_item)
        self._detail = DetailItem()  # big images: full-resolution tiles once zoomed in past the overview copy
        self.scene().addItem(self._detail)
        # overlays sit in clipping frames: the whole image, or one side of the split view's divider each
        self._clip_a, self._clip_b = clip_frame(self.scene()), clip_frame(self.scene())
        self._overlay_item = QGraphicsPixmapItem(self._clip_a)
        self._outline_item = QGraphicsPixmapItem(self._clip_a)  # the mask's outlines over a heatmap, always opaque
        self._outline_item.setZValue(1)
        self._overlay_b_item = QGraphicsPixmapItem(self._clip_b)  # split view: the second model's overlay
        # the overlays keep Qt's default FastTransformation: crisp class edges
        self._split: str | None = None  # None, "raw" (raw | overlay) or "ab" (model A | model B)
        self._split_at = 0.5  # the divider, as a share of the image's width
        self._dragging_divider = False
        self._full_size: tuple[int, int] | None = None
        self._fit_mode = True
        self._right_drag: tuple[float, float] | None = None
        self._brush_radius = 0
        self._painting = False
        self.right_edits = False  # edit mode's right click goes to edit_right_pressed (the Smart tool)
        self._click_at: QPointF | None = None  # where the left button went down (a click, unless it panned)
        self._instances: InstancesItem | None = None  # an instance model's outlines and fills (instance_overlay)

    # the split view's divider and names and edit mode's brush ring, hidden until used, are made then: their pens'
    # and brushes' calls would make the Qt namespace's enums before the window shows (~10 ms, lazy_qt)
    @cached_property
    def _split_parts(self) -> tuple[QGraphicsLineItem, list[QGraphicsSimpleTextItem]]:
        return split_items(self.scene())

    @cached_property
    def _brush_parts(self) -> tuple[QGraphicsEllipseItem, QGraphicsEllipseItem]:
        return brush_items(self.scene())

    @property
    def _divider(self) -> QGraphicsLineItem:
        return self._split_parts[0]

    @property
    def _labels(self) -> list[QGraphicsSimpleTextItem]:
        return self._split_parts[1]

    @property
    def _brush(self) -> QGraphicsEllipseItem:
        return self._brush_parts[0]

    @property
    def _brush_dark(self) -> QGraphicsEllipseItem:
        return self._brush_parts[1]

    # -- content ---------------------------------------------------------------------------------------

    def set_image(self, image: QImage, full_size: tuple[int, int]) -> None:
        """Show `image` (possibly a downscaled copy) as an image of `full_size` = (width, height)."""
        size_changed = full_size != self._full_size
        self._full_size = full_size
        if not self._smoothing_set:  # here, not in __init__: a Qt enum before the window shows costs ~10 ms (lazy_qt)
            self._smoothing_set = True
            self._image_item.setTransformationMode(Qt.TransformationMode.SmoothTransformation)
        self._image_item.setPixmap(QPixmap.fromImage(image))
        self._image_item.setScale(full_size[0] / max(1, image.width()))
        self.clear_overlay()
        self.scene().setSceneRect(QRectF(0, 0, *full_size))
        self._layout_split()
        if size_changed or self._fit_mode:
            self.fit_to_window()

    def replace_image(self, image: QImage) -> None:
        """New pixels for the same image (another window/level): keeps zoom, pan and overlay."""
        self._image_item.setPixmap(QPixmap.fromImage(image))

    def set_overlay(self, image: QImage, outline: QImage | None = None) -> None:
        """The overlay (a mask or a heatmap) and, over a heatmap, the mask's outlines (None: none)."""
        for item, picture in ((self._overlay_item, image), (self._outline_item, outline)):
            item.setPixmap(QPixmap.fromImage(picture) if picture is not None else QPixmap())
            if self._full_size and picture is not None:
                item.setScale(self._full_size[0] / max(1, picture.width()))

    def clear_overlay(self) -> None:
        for item in (self._overlay_item, self._outline_item, self._overlay_b_item):
            item.setPixmap(QPixmap())
        self.set_instances(None)

    def set_instances(self, item: InstancesItem | None) -> None:
        """An instance model's overlay (widgets/instance_overlay.InstancesItem; None: none), at the overlay's
        opacity and visibility, clipped with the mask overlay."""
        if self._instances is not None and self._instances.scene() is self.scene():
            self.scene().removeItem(self._instances)
        self._instances = item
        if item is not None:
            item.setParentItem(self._clip_a)
            item.set_fill_opacity(self._overlay_item.opacity())
            item.setVisible(self._overlay_item.isVisible())

    @property
    def instances_item(self) -> InstancesItem | None:
        return self._instances

    def zoom_to(self, rect: QRectF, *, margin: float = 0.5) -> None:
        """Show `rect` (image pixels) with `margin` of its size around it, as large as the canvas allows."""
        grow = max(rect.width(), rect.height(), 16.0) * margin
        self._fit_mode = False
        self.fitInView(rect.adjusted(-grow, -grow, grow, grow), Qt.AspectRatioMode.KeepAspectRatio)
        self._update_smoothing()
        self._layout_split()
        self.zoom_changed.emit(self.zoom())

    def clear(self) -> None:
        self._image_item.setPixmap(QPixmap())
        self._detail.set_source(None, None, 1.0)
        self.clear_overlay()
        self._full_size = None
        self._layout_split()

    def has_image(self) -> bool:
        """Whether a picture is on the canvas."""
        return not self._image_item.pixmap().isNull()

    def image_size(self) -> tuple[int, int] | None:
        """The picture's own (width, height), None while the canvas is empty."""
        return self._full_size

    # -- the notice over the canvas ----------------------------------------------------------------------

    def set_notice(self, text: str, *, failed: bool = False) -> None:
        """A few lines over the top of the canvas: why the picture has no result and what to do (`failed`, red),
        or why it does not fit the model (amber); "" takes it away. Never part of the picture (render_scene)."""
        if not text and "_notice" not in self.__dict__:
            return  # made when first needed
        notice = self._notice
        notice.setText(text)
        notice.setToolTip(text)
        notice.setStyleSheet(NOTICE_FAILED if failed else NOTICE_WARNING)
        notice.setVisible(bool(text))
        self._place_notice()

    def notice_text(self) -> str:
        return self._notice.text() if "_notice" in self.__dict__ and not self._notice.isHidden() else ""

    @cached_property
    def _notice(self) -> QLabel:
        notice = QLabel(self.viewport())
        notice.setWordWrap(True)
        notice.setTextFormat(Qt.TextFormat.PlainText)
        notice.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)  # the canvas still pans under it
        notice.hide()
        return notice

    def _place_notice(self) -> None:
        """Across the top of the canvas, as tall as its lines."""
        if "_notice" not in self.__dict__ or self._notice.isHidden():
            return
        width = max(80, self.viewport().width() - 2 * NOTICE_MARGIN)
        self._notice.setFixedWidth(width)
        self._notice.setFixedHeight(self._notice.heightForWidth(width))
        self._notice.move(NOTICE_MARGIN, NOTICE_MARGIN)

    def set_overlay_opacity(self, opacity: float) -> None:
        self._overlay_item.setOpacity(max(0.0, min(1.0, opacity)))
        self._overlay_b_item.setOpacity(self._overlay_item.opacity())
        if self._instances is not None:
            self._instances.set_fill_opacity(self._overlay_item.opacity())
        self._restyle_detail()

    def set_overlay_visible(self, visible: bool) -> None:
        for item in (self._overlay_item, self._outline_item, self._overlay_b_item):
            item.setVisible(visible)
        if self._instances is not None:
            self._instances.setVisible(visible)
        self._restyle_detail()

    # -- big images --------------------------------------------------------------------------------------

    @property
    def detail(self) -> DetailItem:
        return self._detail

    def set_detail(self, pixels, mask, overview_scale: float, table: list[int] | None = None) -> None:
        """Full-resolution pixels and mask of a big image, drawn in tiles when zoomed in past the overview copy
        (None: no detail — a small image, or an overlay the tiles cannot draw: it then shows at overview
        resolution); `table` the mask's colour table."""
        self._detail.set_source(pixels, mask, overview_scale)
        self._detail_table = table
        self._restyle_detail()

    def _restyle_detail(self) -> None:
        self._detail.set_mask_style(getattr(self, "_detail_table", None), self._overlay_item.opacity(),
                                    self._overlay_item.isVisible())

    @property
    def overlay_item(self) -> QGraphicsPixmapItem:
        return self._overlay_item

    def render_scene(self) -> QImage:
        """The image with its overlay composited at full scene size (what the user sees, without zoom)."""
        width, height = self._full_size or (1, 1)
        target = QImage(width, height, QImage.Format.Format_RGB32)
        target.fill(QColor(0, 0, 0))
        painter = QPainter(target)
        self.scene().render(painter, QRectF(0, 0, width, height), QRectF(0, 0, width, height))
        painter.end()
        return target

    # -- split view ------------------------------------------------------------------------------------

    @property
    def split(self) -> str | None:
        return self._split

    @property
    def split_at(self) -> float:
        return self._split_at

    def set_split(self, mode: str | None, overlay_b: QImage | None = None, names: tuple[str, str] = ("", "")) -> None:
        """None: the overlay over the whole image; "raw": the raw image left of the divider, the overlay right of
        it; "ab": model A's overlay left, model B's (`overlay_b`) right, `names` written at the top of each side.
        Drag the divider with the left button."""
        self._split = mode
        for label, name in zip(self._labels, names, strict=True):
            label.setText(name)
        self._overlay_b_item.setPixmap(QPixmap.fromImage(overlay_b) if overlay_b is not None else QPixmap())
        if overlay_b is not None and self._full_size:
            self._overlay_b_item.setScale(self._full_size[0] / max(1, overlay_b.width()))
        self._overlay_b_item.setOpacity(self._overlay_item.opacity())
        self._layout_split()

    def set_split_at(self, share: float) -> None:
        self._split_at = min(max(share, 0.0), 1.0)
        self._layout_split()

    def _layout_split(self) -> None:
        width, height = self._full_size or (0, 0)
        x = self._split_at * width
        whole, left, right = QRectF(0, 0, width, height), QRectF(0, 0, x, height), QRectF(x, 0, width - x, height)
        self._clip_a.setRect({None: whole, "raw": right, "ab": left}[self._split])
        self._clip_b.setRect(right if self._split == "ab" else QRectF())
        self._clip_b.setVisible(self._split == "ab")
        self._divider.setLine(x, 0, x, height)
        self._divider.setVisible(self._split is not None and width > 0)
        left_label, right_label = self._labels
        left_label.setPos(max(0.0, x - 8 / max(self.zoom(), 1e-6)
                              - left_label.boundingRect().width() / max(self.zoom(), 1e-6)), 0)
        right_label.setPos(x + 8 / max(self.zoom(), 1e-6), 0)
        for label in self._labels:
            label.setVisible(self._split is not None and width > 0 and bool(label.text()))

    def _divider_event(self, event, kind: str) -> bool:
        """Left-drag on (or near) the divider moves it; True when the event was that."""
        if self._split is None or not self._full_size:
            return False
        x = self.mapToScene(event.position().toPoint()).x()
        if kind == "press" and event.button() == Qt.MouseButton.LeftButton:
            near = abs(x - self._split_at * self._full_size[0]) * self.zoom() <= 8  # 8 screen pixels
            self._dragging_divider = near
        elif kind == "release" and self._dragging_divider:
            self._dragging_divider = False
            event.accept()
            return True
        if not self._dragging_divider:
            return False
        self.set_split_at(x / self._full_size[0])
        event.accept()
        return True

    # -- edit mode -------------------------------------------------------------------------------------

    @property
    def editing(self) -> bool:
        return self._brush_radius > 0

    def set_editing(self, radius: int | None) -> None:
        """Edit mode with a brush of `radius` image pixels (None: back to viewing; the left button pans again)."""
        self._brush_radius = radius or 0
        self._painting = False
        self.setDragMode(QGraphicsView.DragMode.NoDrag if radius else QGraphicsView.DragMode.ScrollHandDrag)
        self.viewport().setMouseTracking(bool(radius))
        self.viewport().setCursor(Qt.CursorShape.CrossCursor if radius else Qt.CursorShape.OpenHandCursor)
        self._brush.setVisible(False)
        if radius:
            self.set_brush_radius(radius)

    def set_brush_radius(self, radius: int) -> None:
        self._brush_radius = max(1, radius)
        center = self._brush.rect().center()
        self._place_brush(center.x(), center.y())

    def _place_brush(self, x: float, y: float) -> None:
        r = self._brush_radius + 0.5
        self._brush.setRect(QRectF(x - r + 0.5, y - r + 0.5, 2 * r, 2 * r))
        self._brush_dark.setRect(self._brush.rect())

    def _edit_event(self, event, kind: str) -> bool:
        """Mouse events in edit mode: the left button paints (pressed / moved / released); True when taken."""
        if not self.editing or self._full_size is None:
            return False
        # the centre of the screen pixel under the mouse (its corner, at 100%, is an image pixel's edge: x - 0.5
        # then lies halfway between two pixels, and rounding half to even sent every odd column to its left)
        at = event.position()
        point = self.viewportTransform().inverted()[0].map(QPointF(math.floor(at.x()) + 0.5, math.floor(at.y()) + 0.5))
        x, y = point.x() - 0.5, point.y() - 0.5  # scene pixel centres are at +0.5
        if kind == "move":
            self._place_brush(round(x), round(y))
            self._brush.setVisible(not self.right_edits)  # the Smart tool has no brush
            if self._painting:
                self.edit_moved.emit(x, y)
            return self._painting
        if event.button() != Qt.MouseButton.LeftButton:
            taken = self.right_edits and kind == "press" and event.button() == Qt.MouseButton.RightButton
            if taken:
                self.edit_right_pressed.emit(x, y)
            return taken
        if kind == "press":
            self._painting = True
            self.edit_pressed.emit(x, y, event.modifiers())
        elif self._painting:
            self._painting = False
            self.edit_released.emit()
        event.accept()
        return True

    # -- zoom ------------------------------------------------------------------------------------------

    def zoom(self) -> float:
        return self.transform().m11()

    def fit_to_window(self) -> None:
        self._fit_mode = True
        if self._full_size:
            self.fitInView(self.sceneRect(), Qt.AspectRatioMode.KeepAspectRatio)
            self._update_smoothing()
            self._layout_split()
            self.zoom_changed.emit(self.zoom())

    def actual_size(self) -> None:
        self._fit_mode = False
        self.resetTransform()
        self._update_smoothing()
        self.zoom_changed.emit(1.0)

    def zoom_by(self, factor: float) -> None:
        target = max(MIN_ZOOM, min(MAX_ZOOM, self.zoom() * factor))
        factor = target / max(self.zoom(), 1e-9)
        if abs(factor - 1.0) < 1e-6:
            return
        self._fit_mode = False
        self.scale(factor, factor)
        self._update_smoothing()
        self.zoom_changed.emit(self.zoom())

    def mousePressEvent(self, event) -> None:
        if self._divider_event(event, "press") or self._edit_event(event, "press"):
            return
        if event.button() == Qt.MouseButton.RightButton:
            self._right_drag = (event.position().x(), event.position().y())
            event.accept()
            return
        self._click_at = event.position() if event.button() == Qt.MouseButton.LeftButton else None
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:
        if self._divider_event(event, "move") or self._edit_event(event, "move"):
            return
        if self._right_drag is not None:
            x, y = event.position().x(), event.position().y()
            self.window_dragged.emit(x - self._right_drag[0], y - self._right_drag[1])
            self._right_drag = (x, y)
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        if self._divider_event(event, "release") or self._edit_event(event, "release"):
            return
        if event.button() == Qt.MouseButton.RightButton and self._right_drag is not None:
            self._right_drag = None
            event.accept()
            return
        start, self._click_at = self._click_at, None
        if start is not None and (event.position() - start).manhattanLength() <= CLICK_SLOP:
            point = self.mapToScene(event.position().toPoint())
            self.clicked.emit(point.x(), point.y())
        super().mouseReleaseEvent(event)

    def wheelEvent(self, event) -> None:
        steps = event.angleDelta().y() / 120.0
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            if steps:  # brush size in edit mode, else through a volume's slices (wheel down = next slice)
                (self.brush_wheel if self.editing else self.slice_wheel).emit(
                    (1 if steps > 0 else -1) * (1 if self.editing else -1))
            event.accept()
            return
        if steps:
            self.zoom_by(ZOOM_STEP**steps)  # AnchorUnderMouse keeps the point under the cursor still
        event.accept()

    def set_orientation(self, labels: dict[str, str] | None) -> None:
        """Patient directions at the screen's edges ({"left": "R", "right": "L", "top": "A", "bottom": "P"}),
        painted over the picture; None for pictures without a geometry."""
        self._orientation = labels
        # the letters sit on the viewport: a scroll that moved the old pixels would smear them
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate if labels else
                                   QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.viewport().update()

    def drawForeground(self, painter: QPainter, rect) -> None:
        super().drawForeground(painter, rect)
        labels = getattr(self, "_orientation", None)
        if labels:
            paint_orientation(painter, self.viewport().rect(), labels)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place_notice()
        if self._fit_mode:
            self.fit_to_window()

    def _update_smoothing(self) -> None:
        """Smooth when zoomed out; show real pixels when zoomed in (what a reader wants to inspect)."""
        smooth = self.zoom() < 1.0
        self._smoothing_set = True
        self.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, smooth)
        mode = Qt.TransformationMode.SmoothTransformation if smooth else Qt.TransformationMode.FastTransformation
        self._image_item.setTransformationMode(mode)


# -- the items drawn over the picture (built once; ImageViewer places and shows them) -----------------------

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
