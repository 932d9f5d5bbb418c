"""The Station view: a running station as an operator watches it from the line, a page of the window's central area.

At the top the station's name, what it reads and where its model really runs (CPU, and why not the GPU asked for),
with Stop and Images (the normal viewer); a red ALARM bar while the source stalls or a sink fails, an amber line once
the station has ended. Then the live picture with its overlay beside a large OK / REVIEW / NG (or ERROR) banner in
the viewer's verdict colours with its reason, the frame's id, the counts per verdict this shift and fps, latency
p50/p95 and dropped frames; at the bottom the strip of the last NG and REVIEW frames (click one to open it).

Widgets only show and say what was asked (`stop_clicked`, `images_clicked`, `thumb_opened`): the controller
(app.ui.controllers.station) decides. One QImage is kept for the live picture, replaced by each new one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets.charts import NG_COLOR, OK_COLOR, REVIEW_COLOR
from app.ui.widgets.fit import FitLabel
from app.ui.widgets.overlay import image_to_qimage
from app.ui.widgets.station_strip import ThumbStrip

if TYPE_CHECKING:
    from app.runs.station.sinks import StationVerdict
    from app.runs.station.stats import StationStats
    from app.ui.state.station_messages import StationOpened, StationPicture

ERROR_COLOR = QColor(175, 82, 222)  # purple: not judged — neither a pass nor the red of a judged NG
BANNER_COLORS = {"OK": OK_COLOR, "REVIEW": REVIEW_COLOR, "NG": NG_COLOR, "ERROR": ERROR_COLOR}
BANNER_TEXT = {"OK": "#000000", "REVIEW": "#000000", "NG": "#ffffff", "ERROR": "#ffffff"}  # the legible one on each
IDLE = QColor(72, 72, 74)
ALARM_STYLE = "background: #d70015; color: white; font-size: 18px; font-weight: bold; padding: 6px 12px;"
ENDED_STYLE = "background: #ff9f0a; color: black; font-size: 16px; font-weight: bold; padding: 4px 12px;"
SIDE_WIDTH = 400
BANNER_HEIGHT = 72  # the least: the verdict at 48 px on a short screen with an alarm; it takes the room there is
BANNER_PX = (48, 96)  # the verdict's letters: as tall as the banner allows, within these
STATES = ("OK", "REVIEW", "NG", "ERROR")


class LivePicture(QWidget):
    """The newest frame, scaled to fit with its aspect kept, on black; a line of text while there is none."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._image: QImage | None = None
        self._text = "Waiting for the first frame…"
        self.setMinimumSize(320, 180)

    def show_image(self, image: QImage | None, text: str = "") -> None:
        self._image, self._text = image, text
        self.update()

    def image(self) -> QImage | None:
        return self._image

    def text(self) -> str:
        """The line shown while there is no picture."""
        return self._text

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(0, 0, 0))
        image = self._image
        if image is None or image.isNull():
            painter.setPen(QColor(200, 200, 200))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self._text)
            return
        scale = min(self.width() / image.width(), self.height() / image.height())
        width, height = image.width() * scale, image.height() * scale
        target = QRectF((self.width() - width) / 2, (self.height() - height) / 2, width, height)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        painter.drawImage(target, image)


class StationView(QWidget):
    stop_clicked = Signal()
    images_clicked = Signal()
    thumb_opened = Signal(object)  # Path of an NG/REVIEW frame's file, or None (no file kept)

    def __init__(self, *, keep: int = 24, parent=None) -> None:
        super().__init__(parent)
        # every text that comes from outside (a name, a path, an error) wraps inside its box, in a few lines at
        # most, the rest elided and said on hover: none sets the window's size, none pushes the banner away
        self.title, self.device = FitLabel(lines=1, hint_width=720), FitLabel(lines=1, hint_width=720)
        self.alarm, self.ended = FitLabel(lines=3, hint_width=900), FitLabel(lines=1, hint_width=900)
        self.banner, self.reason = QLabel("—"), FitLabel(lines=3, hint_width=380)
        self.frame = FitLabel(elide="ElideMiddle")  # a long frame id keeps its file name
        self.picture, self.strip = LivePicture(), ThumbStrip(keep=keep)
        self.counts = {state: QLabel("0") for state in STATES}
        self.numbers = QLabel()
        self.stop_button, self.images_button = QPushButton("Stop station"), QPushButton("Viewer (F9)")
        self.strip_title = QLabel("Last NG and REVIEW parts, newest first — click one to inspect it in the viewer")
        self._verdict: StationVerdict | None = None
        self._stale = False  # the banner shows the last part of a station that is not live now
        self._layout()
        self.stop_button.clicked.connect(self.stop_clicked)
        self.images_button.clicked.connect(self.images_clicked)
        self.strip.opened.connect(self.thumb_opened)
        self.show_state(None)

    # -- what the controller shows -----------------------------------------------------------------------------

    def show_starting(self, name: str) -> None:
        self.title.setText(f"Station {name} — opening its model…")
        self.device.setText("")
        self.stop_button.setEnabled(True)
        self.set_alarm(())
        self.set_ended("")
        self.picture.show_image(None, "Opening the station's model…")
        self.show_state(None)
        self.strip.clear()  # a new start is a new shift: its counts and its strip begin empty
        for label in self.counts.values():
            label.setText("0")
        self.numbers.setText("")
        self._stale = False

    def show_opened(self, opened: StationOpened) -> None:
        self.title.setText(f"Station {opened.name} — {opened.source}")
        where = f"Model runs on {opened.device}"
        self.device.setText(f"{where} — {opened.device_note}" if opened.device_note else where)
        self.device.setStyleSheet("color: #ff9f0a;" if opened.device_note else "")
        self.picture.show_image(None, f"Waiting for the first frame from the {opened.source}…")

    def show_picture(self, picture: StationPicture) -> None:
        verdict = picture.verdict
        self.show_state(verdict)
        if picture.image is not None:
            self.picture.show_image(image_to_qimage(picture.image))
        else:
            self.picture.show_image(None, f"{verdict.frame_id}: no picture ({verdict.reason or 'not drawn'})")
        for thumb in picture.thumbs:
            self.strip.add(thumb)

    def show_state(self, verdict: StationVerdict | None) -> None:
        """The banner: the verdict in its colour, its reason and the frame; grey before the first."""
        self._verdict = verdict
        self._style_banner()
        if verdict is None:
            self.reason.setText("")
            self.frame.setText("")
            return
        self.reason.setText(_reason(verdict))
        self.frame.setText(f"{verdict.frame_id}   ·   {verdict.latency_ms:.0f} ms")

    def _style_banner(self) -> None:
        """In the verdict's colour while the station is live; grey with the verdict's colour as text once it is
        stale (the source stalled, the station ended): a green OK must not stand for a line that stopped."""
        state = "" if self._verdict is None else self._verdict.verdict
        color, text = BANNER_COLORS.get(state, IDLE), BANNER_TEXT.get(state, "#d1d1d6")
        if self._stale and state:
            color, text = IDLE, BANNER_COLORS[state].name()
        self.banner.setText(state or "—")
        self.banner.setStyleSheet(f"background: {color.name()}; color: {text}; font-size: {self._banner_px()}px;"
                                  " font-weight: 800; border-radius: 8px; padding: 4px;")
        self.banner.setToolTip("The last part's verdict: the station is not live now" if self._stale else "")

    def _banner_px(self) -> int:
        """The verdict's letter size for the banner's height now (a line is ~1.2 × the size, and the padding)."""
        return max(BANNER_PX[0], min(BANNER_PX[1], int((self.banner.height() - 12) / 1.2)))

    def eventFilter(self, watched, event) -> bool:
        if watched is self.banner and event.type() == QEvent.Type.Resize:
            px = self._banner_px()
            if f"font-size: {px}px;" not in self.banner.styleSheet():
                self._style_banner()  # the letters follow the banner's height
        return super().eventFilter(watched, event)

    def show_stats(self, stats: StationStats, alarms: tuple[str, ...]) -> None:
        for state, label in self.counts.items():
            label.setText(str(stats.counts.get(state, 0)))
        self.numbers.setText(_numbers(stats))
        self.set_alarm(alarms)
        stale = stats.stalled or stats.ended is not None
        if stale != self._stale:
            self._stale = stale
            self._style_banner()

    def set_alarm(self, lines: tuple[str, ...]) -> None:
        self.alarm.setText("\n".join(f"⚠ ALARM — {line}" for line in lines))
        self.alarm.setVisible(bool(lines))

    def set_ended(self, line: str) -> None:
        self.ended.setText(line)
        self.ended.setVisible(bool(line))
        self.stop_button.setEnabled(not line)

    # -- layout ------------------------------------------------------------------------------------------------

    def _layout(self) -> None:
        self.title.setStyleSheet("font-size: 18px; font-weight: bold;")
        self.alarm.setStyleSheet(ALARM_STYLE)
        self.ended.setStyleSheet(ENDED_STYLE)
        header = QHBoxLayout()
        names = QVBoxLayout()
        names.addWidget(self.title)
        names.addWidget(self.device)
        header.addLayout(names, 1)
        header.addWidget(self.images_button)
        header.addWidget(self.stop_button)
        middle = QHBoxLayout()
        middle.addWidget(self.picture, 1)
        middle.addWidget(self._side(), 0)
        column = QVBoxLayout(self)
        column.setContentsMargins(8, 6, 8, 6)
        column.setSpacing(4)  # a 720-line screen: every row of the page counts
        column.addLayout(header)
        column.addWidget(self.alarm)
        column.addWidget(self.ended)
        column.addLayout(middle, 1)
        column.addWidget(self.strip_title)
        column.addWidget(self.strip)

    def _side(self) -> QWidget:
        """The banner and its reason, always whole; under them the frame, the counts and the numbers, which
        scroll when a short screen (and an alarm above) leaves less room than they need."""
        side = QWidget()
        side.setFixedWidth(SIDE_WIDTH)
        layout = QVBoxLayout(side)
        layout.setContentsMargins(0, 0, 0, 0)
        self.banner.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.banner.setMinimumHeight(BANNER_HEIGHT)
        self.banner.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.banner.installEventFilter(self)
        self.reason.setStyleSheet("font-size: 18px;")
        self.frame.setStyleSheet("font-size: 16px;")
        self.numbers.setStyleSheet("font-size: 15px;")
        self.numbers.setWordWrap(True)  # the side column is fixed: a long line wraps, never clipped
        details = QWidget()
        column = QVBoxLayout(details)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.frame)
        column.addSpacing(8)
        column.addLayout(self._count_grid())
        column.addWidget(self.numbers)
        column.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(details)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumHeight(self.frame.sizeHint().height())
        layout.addWidget(self.banner, 2)
        layout.addWidget(self.reason)
        layout.addWidget(scroll, 3)
        return side

    def _count_grid(self) -> QGridLayout:
        grid = QGridLayout()
        for column, state in enumerate(STATES):
            name = QLabel(state)
            name.setAlignment(Qt.AlignmentFlag.AlignCenter)
            name.setStyleSheet(f"color: {BANNER_COLORS[state].name()}; font-weight: bold; font-size: 14px;")
            count = self.counts[state]
            count.setAlignment(Qt.AlignmentFlag.AlignCenter)
            count.setStyleSheet("font-size: 30px; font-weight: bold;")
            grid.addWidget(name, 0, column)
            grid.addWidget(count, 1, column)
        return grid


def _reason(verdict: StationVerdict) -> str:
    """`score 0.93 > 0.88`, the REVIEW band's without its `review:` prefix, `passed` for OK."""
    if verdict.verdict == "OK":
        return verdict.reason or "passed"
    return verdict.reason.removeprefix("review: ") if verdict.verdict == "REVIEW" else verdict.reason


def _numbers(stats: StationStats) -> str:
    """The rate, the latency and the frame counts; before the first frame "no frame yet" and how long the station
    has waited (no rate, no latency, no last frame to date)."""
    since = f"{stats.since_frame_s:.0f} s"
    if stats.frames == 0:
        waited = "" if stats.ended is not None else f"   waiting {since}"
        return f"no frame {'came' if stats.ended is not None else 'yet'}\n{stats.dropped} dropped{waited}"
    p50 = "–" if stats.latency_p50_ms is None else f"{stats.latency_p50_ms:.0f}"
    p95 = "–" if stats.latency_p95_ms is None else f"{stats.latency_p95_ms:.0f}"
    noun = "frame" if stats.frames == 1 else "frames"
    # the rate is over the last verdicts: said as such once no frame comes, never passed off as the rate now
    when = " (before the stall)" if stats.stalled else " (while it ran)" if stats.ended is not None else ""
    return (f"{stats.fps:.1f} frames/s{when}\nlatency p50 {p50} ms · p95 {p95} ms\n"
            f"{stats.frames} {noun}   {stats.dropped} dropped   last frame {since} ago")
