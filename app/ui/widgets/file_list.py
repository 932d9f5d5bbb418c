"""The file panel: inputs in natural order with a per-file status (pending / done / error)."""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QComboBox, QListWidget, QListWidgetItem

from app.errors import shown
from app.ui.widgets.lazy_qt import Qt

USER_ROLE = 0x0100  # Qt.ItemDataRole.UserRole: roles are ints to Qt, and the enum's type is made on first use (lazy_qt)
PATH_ROLE = USER_ROLE
STATUS_ROLE = USER_ROLE + 1
VERDICT_ROLE = USER_ROLE + 2  # "ok", "review", "ng" (Verdict.cell) or None (+1: whether it is out of date)
REVIEW_ROLE = USER_ROLE + 4  # the reader's review state: "unreviewed", "accepted", "rejected", "corrected"
# verdict filters ("flagged": NG or REVIEW, what a person has to look at), then the reader's review states
FILTERS = ("all", "ng", "review", "flagged", "ok", "unreviewed", "accepted", "rejected", "corrected")
FILTER_NAMES = ("All files", "NG only", "REVIEW only", "NG + REVIEW", "OK only", "Not reviewed", "Result correct",
                "Result wrong", "Mask corrected")
VERDICT_FILTERS = {"ng": ("ng",), "review": ("review",), "flagged": ("ng", "review"), "ok": ("ok",)}
BADGES = {"ok": ("OK", "done"), "review": ("REV", "review"), "ng": ("NG", "error")}  # text, STATUS_COLORS key
REVIEW_MARKS = {"accepted": "  ✓", "rejected": "  ✗", "corrected": "  ✎", "unreviewed": ""}
UID_KEPT = 6  # the digits of a series' UID a message keeps (short_name)
NAME_CHARS = 36  # a volume's label in a message, at most: the message after it still shows at 1280 px
STATUS_COLORS = {"pending": QColor(140, 140, 140), "done": QColor(52, 199, 89), "error": QColor(255, 69, 58),
                 "running": QColor(10, 132, 255), "review": QColor(255, 159, 10)}  # review: the REVIEW badge's amber


def _dot(color: QColor) -> QIcon:
    pixmap = QPixmap(12, 12)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(color)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(1, 1, 10, 10)
    painter.end()
    return QIcon(pixmap)


def _badge(text: str, color: QColor, *, stale: bool) -> QIcon:
    """A small pill with OK / REV / NG: filled when decided at the current threshold, an outline when out of date."""
    from PySide6.QtGui import QFont, QPen

    pixmap = QPixmap(26, 14)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(QPen(color, 1.5))
    painter.setBrush(Qt.BrushStyle.NoBrush if stale else color)
    painter.drawRoundedRect(1, 1, 24, 12, 5, 5)
    font = QFont()
    font.setPixelSize(9)
    font.setBold(True)
    painter.setFont(font)
    painter.setPen(color if stale else QColor(255, 255, 255))
    painter.drawText(pixmap.rect(), Qt.AlignmentFlag.AlignCenter, text)
    painter.end()
    return QIcon(pixmap)


def item_text(item) -> str:
    """How an input is listed: its relative path; a volume by its folder and label (a series' UID says nothing)."""
    if item.volume is None:
        return shown(item.rel.as_posix())  # a name's non-UTF-8 bytes as \xNN (a QString would drop them)
    folder = item.rel.parent.as_posix() if item.volume.kind == "dicom" else item.rel.as_posix()
    return f"{item.volume.label}  [{folder}]" if folder not in ("", ".") else item.volume.label


def short_name(path: str | Path) -> str:
    """A file as a message names it when the file list is not at hand: its name, but a DICOM series' path
    (`<folder>/<SeriesInstanceUID>`, `…_2` for a further part) as the UID's last digits, `…701885 (series)` — a
    whole UID leads a status line with nothing a reader knows it by, and leaves no room for the message."""
    name = Path(path).name
    uid = re.fullmatch(r"(\d+(?:\.\d+){3,})(_\d+)?", name)
    if uid is None or len(name) <= UID_KEPT + 8:
        return shown(name)
    return f"…{uid[1][-UID_KEPT:]}{uid[2] or ''} (series)"


def first_words(label: str, limit: int = NAME_CHARS) -> str:
    """`label` whole when it has at most `limit` characters, else its first whole words within them and "…"."""
    if len(label) <= limit:
        return label
    kept = ""
    for word in label.split(" "):
        if len(f"{kept} {word}") > limit - 1:
            break
        kept = f"{kept} {word}" if kept else word
    if kept.count("(") > kept.count(")"):  # never "(4…": the words before an open bracket
        kept = kept[:kept.rindex("(")]
    kept = kept.rstrip(" ·")
    return f"{kept}…" if kept else f"{label[:limit - 1]}…"


class FileList(QListWidget):
    current_path_changed = Signal(object)  # str: a path, never through a QString (see _path)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setUniformItemSizes(True)
        self.setAlternatingRowColors(True)
        self._filter = "all"
        self.filter_box = QComboBox()  # placed above the list by the window
        self.filter_box.addItems(list(FILTER_NAMES))
        self.filter_box.setToolTip("Show only the files judged NG, REVIEW (or either) or OK, or in one review state")
        self.filter_box.currentIndexChanged.connect(lambda i: self.set_filter(FILTERS[i]))
        self._rows: dict[str, int] = {}
        self._inputs: list = []
        self.currentRowChanged.connect(self._emit_current)

    # drawn when a list first needs them, not with the window: the badges' bold text alone was ~2 ms of start-up
    @cached_property
    def _icons(self) -> dict[str, QIcon]:
        return {status: _dot(color) for status, color in STATUS_COLORS.items()}

    @cached_property
    def _badges(self) -> dict[tuple[str, bool], QIcon]:
        return {(verdict, stale): _badge(text, STATUS_COLORS[color], stale=stale)
                for verdict, (text, color) in BADGES.items() for stale in (False, True)}

    def set_inputs(self, inputs: list) -> None:
        """Replace the list with `inputs` (app.io.discover.InputFile), all pending."""
        self.blockSignals(True)
        self.clear()
        self._rows.clear()
        self._inputs = list(inputs)
        for row, item in enumerate(inputs):
            entry = QListWidgetItem(self._icons["pending"], item_text(item))
            entry.setData(STATUS_ROLE, "pending")
            entry.setToolTip(shown(item.path))
            if item.volume is not None and item.volume.warnings:
                entry.setForeground(QColor(255, 159, 10))  # amber: the slice bar says what is wrong
            self.addItem(entry)
            self._rows[str(item.path)] = row
        self.blockSignals(False)

    def volume(self, path: str | None):
        """The app.io.volumes.Volume listed under `path` (a series, a multi-frame file, a NIfTI file), else None."""
        row = self._rows.get(path) if path else None
        return None if row is None else self._inputs[row].volume

    def name_of(self, path: str | None, *, whole: bool = False) -> str:
        """`path` as a message names it: a listed volume by its label, as its row does, its first words when long
        ("CT · CHEST · Axial 2.5 mm…": the message after it still shows at 1280 px; the row has it whole; `whole`:
        the label whole, for a note with room), a picture by its name (a DICOM file named by its UID too), a path
        not listed by short_name."""
        row = self._rows.get(path) if path else None
        if row is None:
            return short_name(path or "")
        volume = self._inputs[row].volume
        if volume is not None:
            return volume.label if whole else first_words(volume.label)
        return shown(Path(self._inputs[row].path).name)

    def inputs(self) -> list:
        """The InputFiles shown, in order (they carry the relative paths that name exported files)."""
        return list(self._inputs)

    def root_and_rel(self, path: str):
        """(the folder `path` was found under, its relative POSIX path there): what names its review files."""
        item = self._inputs[self._rows[path]]
        root = Path(item.path)
        for _ in item.rel.parts:
            root = root.parent
        return root, item.rel.as_posix()

    def paths(self) -> list[str]:
        return [self._path(row) for row in range(self.count())]

    def _path(self, row: int) -> str:
        # the path as Python has it, never as it comes back out of Qt: a QString cannot hold the lone surrogates
        # that spell a file name's non-UTF-8 bytes (b'caf\xe9.png' → 'caf\udce9.png' came back 'caf.png')
        return str(self._inputs[row].path)

    def current_path(self) -> str | None:
        row = self.currentRow()
        return self._path(row) if 0 <= row < len(self._inputs) else None

    def status(self, path: str) -> str | None:
        row = self._rows.get(path)
        return None if row is None else self.item(row).data(STATUS_ROLE)

    def set_status(self, path: str, status: str, message: str = "") -> None:
        row = self._rows.get(path)
        if row is None:
            return
        entry = self.item(row)
        entry.setData(STATUS_ROLE, status)
        if status != "done":
            entry.setData(VERDICT_ROLE, None)
        verdict = entry.data(VERDICT_ROLE)
        entry.setIcon(self._icons[status] if verdict is None else self._badges[verdict, entry.data(VERDICT_ROLE + 1)])
        entry.setToolTip(f"{shown(path)}\n{message}" if message else shown(path))
        self._apply_filter(row)

    def set_verdict(self, path: str, verdict, *, stale: bool = False) -> None:
        """An OK/REVIEW/NG badge for a done file (app.inference.decide.verdict.Verdict; None: back to the status dot);
        `stale`: decided at another pixel threshold than the one now set (an outline badge)."""
        row = self._rows.get(path)
        if row is None:
            return
        entry = self.item(row)
        value = None if verdict is None else verdict.cell
        entry.setData(VERDICT_ROLE, value)
        entry.setData(VERDICT_ROLE + 1, stale)
        entry.setIcon(self._icons[entry.data(STATUS_ROLE)] if value is None else self._badges[value, stale])
        said = "" if verdict is None else verdict.reason.removeprefix("review: ")  # REVIEW says it already
        reason = "" if verdict is None else "OK" if verdict.ok else f"{verdict.state}: {said}"
        if reason and stale:
            reason += " (decided at another threshold)"
        entry.setToolTip(f"{shown(path)}\n{reason}" if reason else shown(path))
        self._apply_filter(row)

    def verdict(self, path: str) -> str | None:
        row = self._rows.get(path)
        return None if row is None else self.item(row).data(VERDICT_ROLE)

    def set_filter(self, which: str) -> None:
        """Show all files, or only those judged NG, REVIEW, NG or REVIEW ("flagged"), OK, or in a review state."""
        self._filter = which
        for row in range(self.count()):
            self._apply_filter(row)

    def visible_paths(self) -> list[str]:
        return [self._path(row) for row in range(self.count()) if not self.isRowHidden(row)]

    def set_review(self, path: str, state: str) -> None:
        """The image's review state: a mark after its name (✓ result correct, ✗ result wrong, ✎ mask corrected)."""
        row = self._rows.get(path)
        if row is None:
            return
        entry = self.item(row)
        entry.setData(REVIEW_ROLE, state)
        entry.setText(item_text(self._inputs[row]) + REVIEW_MARKS.get(state, ""))
        self._apply_filter(row)

    def review(self, path: str) -> str | None:
        row = self._rows.get(path)
        return None if row is None else self.item(row).data(REVIEW_ROLE)

    def reorder(self, paths: list[str]) -> None:
        """Show the rows in the order of `paths` (every listed path once), keeping their states and the current one."""
        current = self.current_path()
        order = [self._rows[p] for p in paths]
        self.blockSignals(True)
        items = [self.takeItem(0) for _ in range(self.count())]
        self._inputs = [self._inputs[row] for row in order]
        for row, old in enumerate(order):
            self.addItem(items[old])
            self._rows[self._path(row)] = row
            self._apply_filter(row)
        self.blockSignals(False)
        if current is not None:
            self.setCurrentRow(self._rows[current])

    def select_path(self, path: str) -> None:
        row = self._rows.get(path)
        if row is not None:
            self.setCurrentRow(row)

    def _apply_filter(self, row: int) -> None:
        entry = self.item(row)
        if self._filter in VERDICT_FILTERS:
            hidden = entry.data(VERDICT_ROLE) not in VERDICT_FILTERS[self._filter]
        elif self._filter != "all":
            hidden = (entry.data(REVIEW_ROLE) or "unreviewed") != self._filter
        else:
            hidden = False
        self.setRowHidden(row, hidden)

    def step(self, delta: int) -> None:
        """Move by `delta` visible rows (a filter hides the others), stopping at the ends."""
        visible = [row for row in range(self.count()) if not self.isRowHidden(row)]
        if not visible:
            return
        current = self.currentRow()
        after = [r for r in visible if (r > current if delta > 0 else r < current)]
        if not after:
            return
        ordered = after if delta > 0 else after[::-1]
        self.setCurrentRow(ordered[min(abs(delta), len(ordered)) - 1])

    def _emit_current(self, row: int) -> None:
        if row >= 0:
            self.current_path_changed.emit(self._path(row))
