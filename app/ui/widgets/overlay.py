"""The single place where numpy masks become QImages.

A new mask is copied once into an 8-bit indexed QImage whose colour table holds each class's colour (alpha 0 for
background and hidden classes); its contour version is made and copied once too, the first time contours are asked
for. Both images are kept: toggling a class only rewrites the kept image's 256-entry colour table, filled ⇄ contour
picks the other kept image, and opacity is the overlay item's opacity. So no numpy pixel work happens on the GUI
thread after a mask's first conversion (Qt still turns the indexed image into a pixmap for painting, in C++).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import numpy as np
from PySide6.QtGui import QImage, qRgba

from app.io.render import class_colors


class OverlayImage:
    """Holds one mask (and its contour version) as indexed QImages and colours them for the current settings."""

    def __init__(self, mask: np.ndarray, classes: Sequence) -> None:
        self._mask = np.ascontiguousarray(mask, dtype=np.uint8)
        self._colors, self._painted = class_colors(classes)
        self._images: dict[bool, QImage] = {}  # contour? -> the labels, copied once into Qt's memory
        self._hidden: dict[bool, frozenset[int]] = {}  # contour? -> the hidden classes its colour table leaves out

    @property
    def shape(self) -> tuple[int, int]:
        return self._mask.shape

    def image(self, *, hidden: set[int] | frozenset[int] = frozenset(), contour: bool = False) -> QImage:
        """The kept Indexed8 QImage for the mode, its colour table set for `hidden` (opaque class colours,
        transparent elsewhere). The same QImage comes back for the same mode: hold it only as long as needed."""
        hidden = frozenset(hidden)
        image = self._images.get(contour)
        if image is None:
            labels = self._contour_labels() if contour else self._mask
            image = self._images[contour] = _qimage_copy(labels, QImage.Format.Format_Indexed8)
        if self._hidden.get(contour) != hidden:
            image.setColorTable(self.color_table(hidden))
            self._hidden[contour] = hidden
        return image

    def update_region(self, box: tuple[int, int, int, int]) -> QImage:
        """The mask changed inside `box` (x0, y0, x1, y1; an edit): copy those pixels into the filled image, drop
        the contour image (made again when asked for). Returns the filled image."""
        image = self.image(hidden=self._hidden.get(False, frozenset()))
        self._images.pop(True, None)
        self._hidden.pop(True, None)
        x0, y0, x1, y1 = box
        target = np.frombuffer(image.bits(), np.uint8).reshape(image.height(), image.bytesPerLine())
        target[y0:y1, x0:x1] = self._mask[y0:y1, x0:x1]
        return image

    def color_table(self, hidden: AbstractSet[int]) -> list[int]:
        table = []
        for label in range(256):
            r, g, b = (int(v) for v in self._colors[label])
            visible = self._painted[label] and label not in hidden
            table.append(qRgba(r, g, b, 255 if visible else 0))
        return table

    def _contour_labels(self) -> np.ndarray:
        """The mask where a pixel lies on its region's border (2 px), 0 elsewhere."""
        import cv2

        kernel = np.ones((3, 3), np.uint8)
        edges = cv2.compare(cv2.dilate(self._mask, kernel), cv2.erode(self._mask, kernel), cv2.CMP_NE)
        return np.where(edges > 0, self._mask, 0).astype(np.uint8)


class HeatmapImage:
    """A probability or uncertainty layer (uint8 levels 0–255 = 0–1) as an indexed QImage whose colour table is the
    fixed heatmap LUT (app.io.render.HEATMAP_LUT): the same probability is the same colour in every image."""

    def __init__(self, levels: np.ndarray) -> None:
        self._image = _qimage_copy(np.ascontiguousarray(levels, dtype=np.uint8), QImage.Format.Format_Indexed8)
        self._image.setColorTable(heatmap_table())

    def image(self) -> QImage:
        return self._image


DIFFERENCE_COLORS = ((0, 0, 0, 0), (52, 199, 89, 255), (255, 59, 48, 255), (10, 132, 255, 255),
                     (255, 204, 0, 255))  # TN (not painted), TP green, FP red, FN blue, another class yellow


def disagreement_colors() -> tuple[tuple[int, int, int, int], ...]:
    """Model A against model B (app.inference.decide.metrics.disagreement_map), the CLI's colours (app.io.render)."""
    from app.io.render import DISAGREEMENT_COLORS

    return ((0, 0, 0, 0), *((*DISAGREEMENT_COLORS[code], 255) for code in (1, 2, 3)))


class DifferenceImage:
    """Prediction against reference (app.inference.decide.metrics.difference_map) or model A against model B
    (`colors` = disagreement_colors()), one code per pixel, coloured; code 0 is not painted."""

    def __init__(self, codes: np.ndarray, colors=DIFFERENCE_COLORS) -> None:
        self._image = _qimage_copy(np.ascontiguousarray(codes, dtype=np.uint8), QImage.Format.Format_Indexed8)
        table = [qRgba(*color) for color in colors]
        self._image.setColorTable(table + [qRgba(0, 0, 0, 0)] * (256 - len(table)))

    def image(self) -> QImage:
        return self._image


def heatmap_table() -> list[int]:
    from app.io.render import HEATMAP_LUT

    return [qRgba(int(r), int(g), int(b), 255) for r, g, b in HEATMAP_LUT]


def indexed_qimage(labels: np.ndarray, table: list[int]) -> QImage:
    """uint8 labels → an indexed QImage that owns a copy, coloured by `table` (256 ARGB entries)."""
    image = _qimage_copy(np.ascontiguousarray(labels, dtype=np.uint8), QImage.Format.Format_Indexed8)
    image.setColorTable(table)
    return image


def image_to_qimage(pixels: np.ndarray) -> QImage:
    """uint8 gray or RGB array → a QImage that owns a copy of the pixels."""
    fmt = QImage.Format.Format_Grayscale8 if pixels.ndim == 2 else QImage.Format.Format_RGB888
    return _qimage_copy(pixels, fmt)


def _qimage_copy(pixels: np.ndarray, fmt: QImage.Format) -> QImage:
    """Copy the array into memory Qt allocates and owns.

    Wrapping a numpy buffer in a QImage (zero-copy) makes PySide manage the buffer's reference count, which has
    crashed the interpreter here ("deallocating None") when images are replaced quickly; one memcpy (~1 ms for
    1920×1080 RGB) buys an image whose lifetime Qt alone controls.
    """
    height, width = pixels.shape[:2]
    image = QImage(width, height, fmt)
    row_bytes = width * (pixels.shape[2] if pixels.ndim == 3 else 1)
    target = np.frombuffer(image.bits(), np.uint8).reshape(height, image.bytesPerLine())
    target[:, :row_bytes] = pixels.reshape(height, row_bytes)
    return image
