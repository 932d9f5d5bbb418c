"""Big images at full resolution, tile by tile: the viewer's level of detail for images larger than one display copy.

An image longer than MAX_DISPLAY_SIDE is shown through a downscaled copy (one QPixmap: Qt caps a QImage at 2^31
bytes and GPUs cap texture sizes). Zoomed in beyond that copy's resolution, this item paints the *full-resolution*
pixels and mask over it, only where the view is exposed, in 512-px tiles made on demand from the numpy arrays and
kept in a small LRU cache (a 1:1 view of a 1600×900 viewport touches ~12 tiles; each costs one copy of ≤ 0.8 MB).
Zoomed out, it paints nothing and the overview copy shows. The mask tiles are indexed images with the overlay's
colour table, so a class toggle or the opacity slider applies here as well.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

if TYPE_CHECKING:  # numpy is imported by the first tile: built with the window, this item would load it (~60–90
    # ms) before the window shows (tests/ui/test_startup_imports.py)
    import numpy as np

    from app.inference.image.labelmap import LabelMap

TILE = 512
CACHE_TILES = 96  # ~75 MB of RGB tiles at most


class DetailItem(QGraphicsItem):
    def __init__(self) -> None:
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)  # exposedRect
        self.setZValue(1.5)  # over the overview image and its overlay, under the divider and the brush
        self._pixels: np.ndarray | None = None
        self._mask: np.ndarray | LabelMap | None = None  # a LabelMap makes each tile's labels on demand
        self._scale = 1.0  # full-resolution pixels per overview pixel: detail is drawn above zoom 1/scale
        self._table: list[int] = []
        self._mask_opacity = 0.5
        self._mask_shown = True
        self._tiles: OrderedDict[tuple[str, int, int], QImage] = OrderedDict()
        self.painted_tiles = 0  # tiles drawn by the last paint (tests, benchmark)

    def set_source(self, pixels: np.ndarray | None, mask: np.ndarray | LabelMap | None,
                   overview_scale: float) -> None:
        """The full-resolution pixels (uint8 gray or RGB) and label mask — an array, or a result's LabelMap whose
        full-resolution labels are made tile by tile (`region`); None: nothing to add (small images).
        The same arrays again keep the tiles made so far."""
        if pixels is self._pixels and mask is self._mask and overview_scale == self._scale:
            return
        self.prepareGeometryChange()
        self._pixels, self._mask, self._scale = pixels, mask, overview_scale
        self._tiles.clear()
        self.update()

    def set_mask_style(self, table: list[int] | None, opacity: float, shown: bool) -> None:
        """The overlay's colour table (None: no mask drawn at detail), opacity and visibility."""
        if table is not None and table != self._table:
            self._table = table
            self._tiles = OrderedDict((k, v) for k, v in self._tiles.items() if k[0] != "mask")
        self._mask_opacity, self._mask_shown = opacity, shown and table is not None
        self.update()

    @property
    def active(self) -> bool:
        return self._pixels is not None

    def boundingRect(self) -> QRectF:
        if self._pixels is None:
            return QRectF()
        height, width = self._pixels.shape[:2]
        return QRectF(0, 0, width, height)

    def paint(self, painter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        self.painted_tiles = 0
        if self._pixels is None or painter.worldTransform().m11() * self._scale <= 1.0:
            return  # the overview copy is as sharp as the screen can show
        height, width = self._pixels.shape[:2]
        inverse, invertible = painter.worldTransform().inverted()
        exposed = option.exposedRect.intersected(self.boundingRect())
        if invertible and painter.device() is not None:  # never more than the paint device shows
            exposed = exposed.intersected(inverse.mapRect(QRectF(0, 0, painter.device().width(),
                                                                 painter.device().height())))
        rows = range(int(exposed.top()) // TILE, min((int(exposed.bottom()) // TILE) + 1, -(-height // TILE)))
        cols = range(int(exposed.left()) // TILE, min((int(exposed.right()) // TILE) + 1, -(-width // TILE)))
        for ty in rows:
            for tx in cols:
                target = QRectF(tx * TILE, ty * TILE, min(TILE, width - tx * TILE), min(TILE, height - ty * TILE))
                painter.drawImage(target, self.tile("pixels", tx, ty))
                if self._mask_shown and self._mask is not None:
                    painter.setOpacity(self._mask_opacity)
                    painter.drawImage(target, self.tile("mask", tx, ty))
                    painter.setOpacity(1.0)
                self.painted_tiles += 1

    def tile(self, kind: str, tx: int, ty: int) -> QImage:
        """Tile (`tx`, `ty`) of the full-resolution "pixels" or "mask", made on first use and kept (the newest
        CACHE_TILES)."""
        key = (kind, tx, ty)
        image = self._tiles.get(key)
        if image is not None:
            self._tiles.move_to_end(key)
            return image
        import numpy as np

        from app.ui.widgets.overlay import image_to_qimage, indexed_qimage

        source = self._pixels if kind == "pixels" else self._mask
        if isinstance(source, np.ndarray):
            block = np.ascontiguousarray(source[ty * TILE : (ty + 1) * TILE, tx * TILE : (tx + 1) * TILE])
        else:
            labels = cast("LabelMap", source)  # a mask tile is asked for only with a mask shown
            block = np.ascontiguousarray(labels.region(ty * TILE, (ty + 1) * TILE, tx * TILE, (tx + 1) * TILE))
        image = image_to_qimage(block) if kind == "pixels" else indexed_qimage(block, self._table)
        self._tiles[key] = image
        while len(self._tiles) > CACHE_TILES:
            self._tiles.popitem(last=False)
        return image
