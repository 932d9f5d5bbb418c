"""The Station view's strip: the last NG and REVIEW frames, newest on the left, each a thumbnail with its overlay
and its verdict and id under it. Bounded (`keep`): the oldest goes as a new one comes, its pixmap with it, so a
shift's strip holds the same memory as a minute's. Clicking one asks for it to be opened (`opened(path)`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QListView, QListWidget, QListWidgetItem

from app.ui.widgets.overlay import image_to_qimage

if TYPE_CHECKING:
    from app.ui.state.station_messages import StationThumb

THUMB = QSize(144, 81)  # 16:9, as a line camera's frame mostly is; small enough for a 720-line screen
PATH_ROLE = Qt.ItemDataRole.UserRole
TEXT_COLORS = {"NG": QColor(255, 105, 97), "REVIEW": QColor(255, 179, 64)}  # the banner's, lighter on the dark strip


class ThumbStrip(QListWidget):
    opened = Signal(object)  # the Path of the clicked frame's file, or None when no file was kept for it

    def __init__(self, *, keep: int = 24, parent=None) -> None:
        super().__init__(parent)
        self.keep = keep
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(False)
        self.setMovement(QListView.Movement.Static)
        self.setIconSize(THUMB)
        self.setGridSize(QSize(THUMB.width() + 12, THUMB.height() + 30))
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.setUniformItemSizes(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFixedHeight(THUMB.height() + 30 + 22)  # a row and the scroll bar
        self.setStyleSheet("QListWidget { background: #1c1c1e; color: #f2f2f7; font-size: 13px; }")
        self.itemClicked.connect(lambda item: self.opened.emit(item.data(PATH_ROLE)))

    def add(self, thumb: StationThumb) -> None:
        """The newest on the left; beyond `keep`, the oldest is removed (and its pixmap freed)."""
        verdict = thumb.verdict
        item = QListWidgetItem(QIcon(QPixmap.fromImage(image_to_qimage(thumb.image))), f"{verdict.verdict}  "
                               f"{_short_id(verdict.frame_id)}")
        item.setData(PATH_ROLE, thumb.path)
        item.setForeground(TEXT_COLORS.get(verdict.verdict, QColor("#f2f2f7")))
        score = "" if verdict.score is None else f" (score {verdict.score:.3f})"
        item.setToolTip(f"{verdict.frame_id}{score}\n{verdict.reason}\n"
                        + ("Click to open it in the viewer" if thumb.path is not None else "No file was kept"))
        self.insertItem(0, item)
        while self.count() > self.keep:
            self.takeItem(self.count() - 1)  # taken items are owned by Python: freed when dropped here

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        if self.count() == 0:  # an empty strip says what it is for, not a dark void
            painter = QPainter(self.viewport())
            painter.setPen(QColor(174, 174, 178))
            painter.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter, "No NG or REVIEW part yet")

    def paths(self) -> list[Path]:
        """The files of the frames in the strip, newest first (those a file was kept for)."""
        found = [self.item(row).data(PATH_ROLE) for row in range(self.count())]
        return [path for path in found if path is not None]


def _short_id(frame_id: str) -> str:
    return frame_id.rsplit("/", 1)[-1]
