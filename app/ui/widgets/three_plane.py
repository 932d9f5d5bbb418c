"""The three-plane view of a volume: axial, coronal and sagittal panes side by side (or one of them alone), each
with the image through the shared display window, the mask overlay in the class colours, its orientation letters
and the volume's true proportions, and one crosshair linking them: a click in one pane moves the others there; the
keys and the wheel step the slice of the pane under the mouse.

Fed plain data (`PlaneVolume`: the native image and label volumes `[D, H, W]`, spacing, affine, window, colours),
never a file or a model: a 2D model's filled volume and a 3D model's result arrive the same way. A pane's picture
is a numpy view of the native arrays (three_plane_axes.PlaneAxes.view); only that slice is windowed and copied
into a QImage, and only the panes whose slice changed are redrawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPalette, qRgba
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.io.window import apply_window
from app.ui.widgets.overlay import image_to_qimage, indexed_qimage
from app.ui.widgets.three_plane_axes import PLANES, PlaneAxes, plane_axes
from app.ui.widgets.three_plane_pane import PlanePane

Point = tuple[int, int, int]  # (k, row, col) in the native volume
HINT = "Click: crosshair · wheel: slice · Ctrl+wheel: zoom · right-drag: window (hover for more)"
TIP = ("Click or drag with the left button: move the crosshair (the other panes follow)\n"
       "Wheel, ↑ ↓ ← →, PgUp / PgDn: the slice of the pane under the mouse\n"
       "Ctrl + wheel: zoom this pane · Shift + drag or the middle button: pan\n"
       "Right-drag: window / level (shared by the panes) · double-click: this pane alone, or all three again")


# without geometry the panes are the stored slices and the two reslices across them: no anatomy is claimed
_UNPLACED = {"axial": "Slices as stored", "coronal": "Across rows", "sagittal": "Across columns"}


@dataclass(frozen=True)
class PlaneVolume:
    """What the view shows, as plain arrays."""

    image: np.ndarray  # [D, H, W]: real units (HU, counts) as float32, or uint8 grey levels
    labels: np.ndarray | None  # [D, H, W] uint8 class values; None: no mask
    spacing: tuple[float, float, float] | None  # mm along D, H, W (Volume.spacing); None: square voxels
    affine: np.ndarray | None  # (column i, row j, slice k) → RAS+ mm (Volume.affine); None: as stored, no letters
    window: tuple[float, float] | None  # (center, width) for `image`; None: shown as its uint8 levels
    colors: np.ndarray  # [256, 4] uint8 RGBA per label value, alpha 0 for those not painted
    names: tuple[str, ...] = ()  # class names by label value, for the point's read-out
    invert: bool = False  # MONOCHROME1: high values dark
    unit: str = ""  # of `image`'s values, for the read-out ("HU" for CT)


def label_colors(classes: Sequence, hidden: frozenset[int] = frozenset()) -> np.ndarray:
    """[256, 4] RGBA for `classes` (records with a `.color`): the overlay's colours (app.io.render.class_colors),
    background and `hidden` classes transparent."""
    from app.io.render import class_colors

    rgb, painted = class_colors(classes)
    alpha = np.where(painted, 255, 0).astype(np.uint8)
    alpha[list(hidden)] = 0
    return np.concatenate([rgb, alpha[:, None]], axis=1)


class ThreePlaneView(QWidget):
    point_changed = Signal(int, int, int)  # k, row, col: the crosshair moved (a click, a key, set_point)
    window_dragged = Signal(float, float)  # right-drag in a pane: the window's owner changes the window

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.panes = {name: PlanePane() for name in PLANES}
        self._volume: PlaneVolume | None = None
        self._axes: dict[str, PlaneAxes] = plane_axes(None)
        self._point: Point = (0, 0, 0)
        self._window: tuple[float, float] | None = None
        self._opacity, self._overlay_visible, self._contour = 0.5, True, False
        self._table: list[int] = []
        self._drawn: dict[str, tuple] = {}  # pane → what its picture was drawn from (skip redrawing the same)
        self._hovered: str | None = None
        self._only: str | None = None
        self.info = QLabel()
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note = QLabel()  # why the mask shown is not (yet) the current one
        self.note.setStyleSheet("color: #ff9f0a;")
        self.note.setWordWrap(True)
        self.note.hide()
        self._layout(self._mode_buttons())
        for name, pane in self.panes.items():
            pane.clicked.connect(lambda x, y, n=name: self._on_click(n, x, y))
            pane.stepped.connect(lambda delta, n=name: self.step(n, delta))
            pane.hovered.connect(lambda n=name: setattr(self, "_hovered", n))
            pane.fit_asked.connect(lambda n=name: self.show_only(None if self._only else n))
            pane.window_dragged.connect(self.window_dragged)

    def _mode_buttons(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setContentsMargins(6, 2, 6, 2)
        self._modes = QButtonGroup(self)
        for text, only in (("Three planes", None), ("Axial", "axial"), ("Coronal", "coronal"),
                           ("Sagittal", "sagittal")):
            button = QToolButton()
            button.setText(text)
            button.setCheckable(True)
            button.setChecked(only is None)
            button.setProperty("only", only)
            button.clicked.connect(lambda _checked=False, o=only: self.show_only(o))
            self._modes.addButton(button)
            row.addWidget(button)
        hint = QLabel(HINT)
        hint.setStyleSheet("color: #9a9a9a;")
        hint.setToolTip(TIP)
        # the hint never widens the view: on a small screen it is cut, the side panel is not pushed off
        hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        hint.setMinimumWidth(0)
        row.addWidget(hint, 1)
        return row

    def _layout(self, buttons: QHBoxLayout) -> None:
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addLayout(buttons)
        box = QWidget()  # a thin dark seam between the panes, not a bright line beside dark pictures
        box.setAutoFillBackground(True)
        palette = box.palette()
        palette.setColor(QPalette.ColorRole.Window, QColor(60, 62, 66))
        box.setPalette(palette)
        panes = QHBoxLayout(box)
        panes.setContentsMargins(0, 0, 0, 0)
        panes.setSpacing(2)
        for pane in self.panes.values():
            panes.addWidget(pane, 1)
        column.addWidget(box, 1)
        self.note.setContentsMargins(8, 2, 8, 0)
        column.addWidget(self.note)
        self.info.setContentsMargins(8, 2, 8, 2)
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        column.addWidget(self.info)

    # -- content ---------------------------------------------------------------------------------------

    def set_volume(self, volume: PlaneVolume, point: Point | None = None) -> None:
        """Show `volume` with the crosshair at `point` (default: the volume's centre)."""
        if volume.image.ndim != 3 or (volume.labels is not None and volume.labels.shape != volume.image.shape):
            raise ValueError(f"image {volume.image.shape} and labels "
                             f"{None if volume.labels is None else volume.labels.shape} must be one [D, H, W]")
        self._volume, self._window = volume, volume.window
        self._axes = plane_axes(volume.affine)
        self._table = [qRgba(*(int(v) for v in rgba)) for rgba in volume.colors]
        self._drawn.clear()
        shape = volume.image.shape
        for name, pane in self.panes.items():
            axes = self._axes[name]
            pane.set_geometry(axes.screen_size(shape), axes.voxel_mm(volume.spacing), axes.letters(volume.affine))
        self._point = self._clamp(point or (shape[0] // 2, shape[1] // 2, shape[2] // 2))
        self._refresh()
        self.point_changed.emit(*self._point)

    def set_labels(self, labels: np.ndarray | None) -> None:
        """A new label volume for the volume shown (another threshold, a 3D model's result)."""
        if self._volume is not None:
            from dataclasses import replace

            self._volume = replace(self._volume, labels=labels)
            self._drawn.clear()
            self._refresh()

    def set_note(self, text: str) -> None:
        """An amber line over the read-out ("" to clear): the mask is being made again, say."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    @property
    def volume(self) -> PlaneVolume | None:
        return self._volume

    @property
    def point(self) -> Point:
        return self._point

    def set_point(self, k: int, row: int, col: int) -> None:
        """Move the crosshair to voxel (k, row, col) (clamped inside the volume); every pane follows."""
        point = self._clamp((k, row, col))
        if self._volume is None or point == self._point:
            return
        self._point = point
        self._refresh()
        self.point_changed.emit(*point)

    def step(self, plane: str, delta: int) -> None:
        """The slice of pane `plane` (and so the crosshair) `delta` steps along its native axis."""
        moved = list(self._point)
        moved[self._axes[plane].normal] += delta
        self.set_point(*moved)

    def step_hovered(self, delta: int) -> None:
        """PgUp / PgDn from anywhere in the window: the pane under the mouse (else the axial one) steps."""
        self.step(self._hovered or self._only or "axial", delta)

    # -- style -----------------------------------------------------------------------------------------

    def set_window(self, window: tuple[float, float] | None) -> None:
        if window != self._window:
            self._window = window
            self._refresh()

    @property
    def display_window(self) -> tuple[float, float] | None:
        """The (center, width) the panes are drawn through (None: uint8 levels as they are)."""
        return self._window

    def set_style(self, *, opacity: float, visible: bool, contour: bool, colors: np.ndarray | None = None) -> None:
        """The overlay as the side panel says: its opacity, shown or not, filled or outlines, the colours (hidden
        classes transparent)."""
        self._opacity, self._overlay_visible = opacity, visible
        for pane in self.panes.values():
            pane.set_overlay_opacity(opacity)
            pane.set_overlay_visible(visible)
        table = self._table if colors is None else [qRgba(*(int(v) for v in rgba)) for rgba in colors]
        if contour != self._contour or table != self._table:
            self._contour, self._table = contour, table
            self._refresh()

    def fit(self) -> None:
        """Every pane back to its whole picture (after a zoom or a pan)."""
        for pane in self.panes.values():
            pane.fit()

    def peek(self, visible: bool) -> None:
        """The overlay hidden for a moment (Space held) or back as the style says, which is kept."""
        for pane in self.panes.values():
            pane.set_overlay_visible(visible and self._overlay_visible)

    def show_only(self, plane: str | None) -> None:
        """One pane alone, as large as the view (None: all three side by side)."""
        self._only = plane
        for name, pane in self.panes.items():
            pane.setVisible(plane is None or name == plane)
        for button in self._modes.buttons():
            button.setChecked(button.property("only") == plane)

    @property
    def only(self) -> str | None:
        return self._only

    # -- drawing ---------------------------------------------------------------------------------------

    def _clamp(self, point: Sequence[int]) -> Point:
        if self._volume is None:
            return 0, 0, 0
        d, h, w = self._volume.image.shape
        return (min(max(int(point[0]), 0), d - 1), min(max(int(point[1]), 0), h - 1),
                min(max(int(point[2]), 0), w - 1))

    def _on_click(self, plane: str, x: int, y: int) -> None:
        if self._volume is not None:
            self.set_point(*self._axes[plane].from_screen(self._point, x, y, self._volume.image.shape))

    def _refresh(self) -> None:
        volume = self._volume
        if volume is None:
            return
        shape = volume.image.shape
        for name, pane in self.panes.items():
            axes = self._axes[name]
            index = self._point[axes.normal]
            drawn = (index, self._window, self._contour, id(volume.labels), tuple(self._table))
            if self._drawn.get(name) != drawn:
                self._drawn[name] = drawn
                pane.set_picture(self._picture(axes, index), self._overlay(axes, index))
            x, y = axes.to_screen(self._point, shape)
            plane = name.capitalize() if volume.affine is not None else _UNPLACED[name]
            pane.set_cross(x, y, f"{plane}  {index + 1} / {shape[axes.normal]}")
        self.info.setText(self._read_out())

    def _picture(self, axes: PlaneAxes, index: int):
        volume = self._volume
        assert volume is not None
        plane = axes.view(volume.image, index)
        if self._window is not None:
            levels = apply_window(plane, *self._window, invert=volume.invert)
        else:
            levels = plane.astype(np.uint8) if plane.dtype != np.uint8 else plane
        return image_to_qimage(np.ascontiguousarray(levels))

    def _overlay(self, axes: PlaneAxes, index: int):
        labels = self._volume.labels if self._volume is not None else None
        if labels is None:
            return None
        plane = np.ascontiguousarray(axes.view(labels, index))
        return indexed_qimage(_contours(plane) if self._contour else plane, self._table)

    def _read_out(self) -> str:
        """The point in words: voxel, patient position (mm), value and class."""
        volume = self._volume
        assert volume is not None
        k, row, col = self._point
        parts = [f"Slice {k + 1} · row {row + 1} · column {col + 1}"]
        if volume.affine is not None:
            ras = (volume.affine @ np.array([col, row, k, 1.0]))[:3]
            parts.append("  ".join(f"{(plus if v >= 0 else minus)} {abs(v):.1f}"
                                   for v, plus, minus in zip(ras, "RAS", "LPI", strict=True)) + " mm")
        parts.append(f"{float(volume.image[k, row, col]):g} {volume.unit}".rstrip() if volume.unit
                     else f"value {float(volume.image[k, row, col]):g}")
        if volume.labels is not None:
            label = int(volume.labels[k, row, col])
            name = volume.names[label] if label < len(volume.names) else f"class {label}"
            parts.append(name if label else "background")
        return "   ·   ".join(parts)


def _contours(labels: np.ndarray) -> np.ndarray:
    """The labels where a voxel lies on its region's border, 0 elsewhere (as the one-pane overlay's contours)."""
    import cv2

    kernel = np.ones((3, 3), np.uint8)
    edges = cv2.compare(cv2.dilate(labels, kernel), cv2.erode(labels, kernel), cv2.CMP_NE)
    return np.where(edges > 0, labels, 0).astype(np.uint8)
