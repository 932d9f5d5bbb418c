"""File ▸ Open from PACS…: pick a node, search its studies, see a study's series, retrieve the chosen ones.

A widget only: it shows what it is given and says what the reader wants (its signals); the PACS controller
(app/ui/controllers/pacs.py) asks the worker and sets the answers here. Made on first use, never at start-up."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QDate, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QFont, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets.fit import FitLabel, size_on_screen

if TYPE_CHECKING:
    from pathlib import Path

    from app.io.pacs.client import SeriesRecord, StudyQuery, StudyRecord

MODALITIES = ("", "CT", "MR", "PT", "CR", "DX", "US", "NM", "MG", "XA", "SEG", "RTSTRUCT")
STUDY_COLUMNS = ("Patient name", "Patient ID", "Study date", "Description", "Modalities", "Accession", "Series")
SERIES_COLUMNS = ("#", "Description", "Modality", "Slices")
ERROR_STYLE = "color: #b00020;"


def person_name(value: str) -> str:
    """A DICOM person name as people write it: "DOE^JANE^M" → "DOE, JANE M" (the alphabetic group only)."""
    family, _, rest = value.split("=", 1)[0].partition("^")
    given = " ".join(part for part in rest.split("^") if part)
    return f"{family}, {given}" if family and given else family or given


def study_date(value: str) -> str:
    """YYYYMMDD as YYYY-MM-DD (anything else as it came)."""
    return f"{value[:4]}-{value[4:6]}-{value[6:8]}" if len(value) == 8 and value.isdigit() else value


class PacsDialog(QDialog):
    search_requested = Signal()  # the form: query(), node_text(), secret()
    study_chosen = Signal(str)  # a study's UID: list its series
    retrieve_requested = Signal(object)  # tuple[SeriesRecord, ...]: retrieve them and open them
    cancel_requested = Signal()  # stop the retrieve going on
    clear_cache_requested = Signal()  # delete the local cache's series (patient data)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open from PACS")
        size_on_screen(self, QSize(1100, 620))  # inside a small screen, its buttons reachable
        self._studies: list[StudyRecord] = []
        self._series: list[SeriesRecord] = []
        self._searched = ""  # what the search the rows came from asked, for when the dialog is reopened
        layout = QVBoxLayout(self)
        layout.addLayout(self._node_row())
        self.nodes_file = QLabel("")  # where the settings' nodes come from (set_nodes)
        self.nodes_file.setWordWrap(True)
        self.nodes_file.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.nodes_file.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        layout.addWidget(self.nodes_file)
        layout.addLayout(self._search_form())
        splitter = QSplitter(Qt.Orientation.Vertical)
        self.studies = _table(STUDY_COLUMNS, QAbstractItemView.SelectionMode.SingleSelection,
                              stretch=STUDY_COLUMNS.index("Description"))
        self.series = _table(SERIES_COLUMNS, QAbstractItemView.SelectionMode.ExtendedSelection,
                             stretch=SERIES_COLUMNS.index("Description"))
        self.studies_title = _title("Studies")
        self.studies_title.setWordWrap(True)  # a long node URL in "the previous search (…)" wraps: never widening
        self.studies_title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        splitter.addWidget(_titled(self.studies_title, self.studies))
        splitter.addWidget(_titled(_title("Series of the chosen study (select one or more)"), self.series))
        splitter.setSizes([300, 220])
        layout.addWidget(splitter, 1)
        layout.addLayout(self._bottom_row())
        self.studies.itemSelectionChanged.connect(self._on_study_selected)
        self.series.itemSelectionChanged.connect(self._update_buttons)
        self.series.itemDoubleClicked.connect(lambda _item: self._retrieve())
        self.search_requested.connect(self._note_search)  # before the controller's slot: connected first
        self._update_buttons()

    # -- the layout ---------------------------------------------------------------------------------------

    def _node_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.node = QComboBox()
        self.node.setEditable(True)  # a node's name from the settings, or a URL typed in
        self.node.setMinimumWidth(420)
        typed = self.node.lineEdit()
        assert typed is not None  # an editable combo box has one
        typed.setPlaceholderText("a node from the settings, or dicomweb+https://host/dicom-web, "
                                                "dimse://AE@host:104")
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.password.setPlaceholderText("from the keyring")
        self.password.setToolTip("The node's password or token for this session only; empty: the one kept in the "
                                 "system keyring (service seglens-pacs, the node's name). DIMSE needs none.")
        self.password.setMaximumWidth(220)
        row.addWidget(QLabel("Node"))
        row.addWidget(self.node, 1)
        row.addWidget(QLabel("Password"))
        row.addWidget(self.password)
        return row

    def _search_form(self) -> QGridLayout:
        grid = QGridLayout()
        self.patient_id, self.patient_name, self.accession = QLineEdit(), QLineEdit(), QLineEdit()
        self.patient_name.setPlaceholderText("DOE^JANE, or DOE* (wildcards)")
        self.modality = QComboBox()
        for code in MODALITIES:
            self.modality.addItem(code or "Any", code)
        self.use_dates = QCheckBox("Study date from")
        today = QDate.currentDate()
        self.date_from, self.date_to = _date_edit(today.addMonths(-1)), _date_edit(today)
        self.use_dates.toggled.connect(self._dates_enabled)
        self._dates_enabled(False)
        self.search_button = QPushButton("Search")
        self.search_button.setDefault(True)
        self.search_button.clicked.connect(self.search_requested)
        for edit in (self.patient_id, self.patient_name, self.accession):
            edit.returnPressed.connect(self.search_requested)
        cells = (("Patient ID", self.patient_id, 0, 0), ("Patient name", self.patient_name, 0, 2),
                 ("Accession", self.accession, 0, 4), ("Modality", self.modality, 1, 4))
        for text, widget, row, column in cells:
            grid.addWidget(QLabel(text), row, column)
            grid.addWidget(widget, row, column + 1)
        dates = QHBoxLayout()
        for part in (self.use_dates, self.date_from, QLabel("to"), self.date_to):
            dates.addWidget(part)
        dates.addStretch(1)
        grid.addLayout(dates, 1, 0, 1, 4)
        grid.addWidget(self.search_button, 0, 6, 2, 1)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 2)
        return grid

    def _bottom_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.message = FitLabel(lines=2, hint_width=640)  # a long node or UID wraps, never widening the dialog
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.setVisible(False)
        self.retrieve_button = QPushButton("Retrieve and open")
        self.retrieve_button.clicked.connect(self._retrieve)
        self.cancel_button = QPushButton("Cancel retrieve")
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.clear_button = QPushButton("Clear local cache")
        self.clear_button.setToolTip("Delete every series retrieved to this computer (they hold patient data)")
        self.clear_button.clicked.connect(self.clear_cache_requested)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        row.addWidget(self.message, 1)
        for widget in (self.progress, self.clear_button, self.retrieve_button, self.cancel_button,
                       self.close_button):
            row.addWidget(widget)
        self._retrieving = False
        return row

    def _dates_enabled(self, on: bool) -> None:
        self.date_from.setEnabled(on)
        self.date_to.setEnabled(on)

    # -- what the reader asked for ------------------------------------------------------------------------

    def node_text(self) -> str:
        return self.node.currentText().strip()

    def secret(self) -> str:
        return self.password.text()

    def query(self) -> StudyQuery:
        """The search form as a study query (empty fields match anything)."""
        from app.io.pacs.client import StudyQuery

        dates = None
        if self.use_dates.isChecked():
            dates = (self.date_from.date().toString("yyyyMMdd"), self.date_to.date().toString("yyyyMMdd"))
        return StudyQuery(patient_id=self.patient_id.text().strip(), patient_name=self.patient_name.text().strip(),
                          study_date=dates, modality=str(self.modality.currentData() or ""),
                          accession=self.accession.text().strip())

    def selected_series(self) -> tuple[SeriesRecord, ...]:
        rows = sorted({index.row() for index in self.series.selectionModel().selectedRows()})
        return tuple(self._series[row] for row in rows if row < len(self._series))

    def _retrieve(self) -> None:
        chosen = self.selected_series()
        if chosen and not self._retrieving:
            self.retrieve_requested.emit(chosen)

    def _on_study_selected(self) -> None:
        rows = self.studies.selectionModel().selectedRows()
        self.set_series("", [])
        if rows and rows[0].row() < len(self._studies):
            self.study_chosen.emit(self._studies[rows[0].row()].study_uid)

    # -- what the controller sets -------------------------------------------------------------------------

    def set_nodes(self, names: list[str], current: str = "", *, source: Path | None = None) -> None:
        """The settings' node names, and the settings file they were read from (`source`)."""
        self.node.clear()
        self.node.addItems(names)
        if current:
            self.node.setCurrentText(current)
        if source is not None:
            self.nodes_file.setText(f"Nodes from {source}" if names else
                                    f"No nodes in {source}: add a pacs: section there (docs/clinical.md), or type a "
                                    "node's URL")

    def search_text(self) -> str:
        """What the search form asks, on which node, now: "Patient ID SYN-0001 on FAKE at 14:02"."""
        query = self.query()
        asked = [f"{label} {value}" for label, value in (
            ("Patient ID", query.patient_id), ("name", query.patient_name), ("accession", query.accession),
            ("modality", query.modality), ("dates", "–".join(query.study_date or ()))) if value]
        return f"{', '.join(asked) or 'every study'} on {self.node_text() or '?'} at {time.strftime('%H:%M')}"

    def _note_search(self) -> None:
        self._searched = self.search_text()

    def mark_previous(self) -> None:
        """The dialog opened again: the rows shown are the last search's, greyed and titled as such (the title
        wraps), not the PACS's now: the line under the tables says to search again for that."""
        if not self._studies:
            return
        searched = self._searched.replace("/", "/\u200b")  # a node URL may wrap after a slash
        self.studies_title.setText(f"Studies — the previous search ({searched})")
        grey = QBrush(self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
        for table in (self.studies, self.series):
            for r in range(table.rowCount()):
                for c in range(table.columnCount()):
                    if (item := table.item(r, c)) is not None:
                        item.setForeground(grey)
        self.say("Search again to see what the PACS holds now")

    def set_studies(self, studies: list[StudyRecord]) -> None:
        self.studies_title.setText("Studies")
        self._studies = list(studies)
        _fill(self.studies, [[person_name(s.patient_name), s.patient_id, study_date(s.study_date), s.description,
                              "/".join(s.modalities), s.accession, _count(s.series_count)] for s in self._studies])
        self.set_series("", [])
        if len(self._studies) == 1:
            self.studies.selectRow(0)

    def set_series(self, study_uid: str, series: list[SeriesRecord]) -> None:
        self._series = sorted(series, key=lambda s: (s.number is None, s.number or 0, s.description))
        _fill(self.series, [[_count(s.number), s.description, s.modality, _count(s.instances)]
                            for s in self._series])
        self._update_buttons()

    def chosen_study(self) -> str:
        rows = self.studies.selectionModel().selectedRows()
        return self._studies[rows[0].row()].study_uid if rows and rows[0].row() < len(self._studies) else ""

    def say(self, line: str, *, error: bool = False) -> None:
        """One line under the tables: what happened, or what went wrong (in red)."""
        self.message.setStyleSheet(ERROR_STYLE if error else "")
        self.message.setText(line)
        self.message.setToolTip(line)

    def set_busy(self, busy: bool) -> None:
        self.search_button.setEnabled(not busy)

    def set_retrieving(self, on: bool) -> None:
        self._retrieving = on
        self.progress.setVisible(on)
        if on:
            self.progress.setRange(0, 0)
        self._update_buttons()

    def set_progress(self, index: int, total: int, received: int, expected: int | None) -> None:
        """Series `index` of `total`: `received` of `expected` files (a busy bar when the server did not say)."""
        self.progress.setRange(0, expected or 0)
        self.progress.setValue(received)
        of = f" of {expected}" if expected else ""
        self.say(f"Retrieving series {index} of {total}: {received}{of} files")

    def _update_buttons(self) -> None:
        self.retrieve_button.setEnabled(bool(self.selected_series()) and not self._retrieving)
        self.cancel_button.setEnabled(self._retrieving)
        self.clear_button.setEnabled(not self._retrieving)


def _table(columns: tuple[str, ...], mode: QAbstractItemView.SelectionMode, *, stretch: int) -> QTableWidget:
    """A read-only table of whole rows; column `stretch` (the description) takes the width left, the others fit
    their contents (a count pushed to the far right edge was hard to read against its row)."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(mode)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.setAlternatingRowColors(True)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return table


def _fill(table: QTableWidget, rows: list[list[str]]) -> None:
    table.setRowCount(0)
    table.setRowCount(len(rows))
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if text.isdigit():
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            table.setItem(r, c, item)


def _title(text: str) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    font = QFont(label.font())
    font.setBold(True)
    label.setFont(font)
    return label


def _titled(title: QLabel, widget: QWidget) -> QWidget:
    box = QWidget()
    column = QVBoxLayout(box)
    column.setContentsMargins(0, 4, 0, 0)
    column.addWidget(title)
    column.addWidget(widget)
    return box


def _date_edit(date: QDate) -> QDateEdit:
    edit = QDateEdit(date)
    edit.setCalendarPopup(True)
    edit.setDisplayFormat("yyyy-MM-dd")
    return edit


def _count(value: int | None) -> str:
    return "" if value is None else str(value)
