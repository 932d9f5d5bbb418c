"""Model ▸ Calibrate limits…: the OK and NG folders, the target, the split and seed; then the score plot, the limits
and the held-out rates as seglens-cli calibrate reports them, Write to sidecar and Save plot….

A widget only: it shows what it is given and says what the reader wants (its signals); the controller
(app/ui/controllers/calibrator.py) asks the worker and sets the answers here. Made on first use, never at start-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFontDatabase, QImage, QPainter, QPalette
from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets.fit import FitLabel, size_on_screen

if TYPE_CHECKING:
    import numpy as np

ERROR_STYLE = "color: #b00020;"
PLACEHOLDER = "The OK and NG score histograms with the limits, and the ROC, appear here after Calibrate"
REPORT_LINES = 9  # the report's six lines and three notes without scrolling (error lines scroll)
WANTED = QSize(1280, 860)  # the plot at its own size where the screen has room; else the screen's room


class PlotView(QWidget):
    """The plot at its own aspect ratio, as large as the room allows and never larger than its pixels."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._image: QImage | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(360, 160)

    def set_image(self, image: QImage | None) -> None:
        self._image = image
        self.update()

    def image(self) -> QImage | None:
        return self._image

    def sizeHint(self) -> QSize:
        return self._image.size() if self._image is not None else QSize(1120, 480)

    def drawn_rect(self) -> QRectF:
        """Where the plot is painted: scaled to fit (aspect kept, at most 1:1), centred."""
        if self._image is None:
            return QRectF()
        width, height = self._image.width(), self._image.height()
        scale = min(1.0, self.width() / width, self.height() / height)
        w, h = width * scale, height * scale
        return QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h)

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        if self._image is None:  # the room kept (the dialog does not jump), and what will fill it said
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, PLACEHOLDER)
        else:
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
            painter.drawImage(self.drawn_rect(), self._image)
        painter.end()


class CalibrateDialog(QDialog):
    calibrate_requested = Signal()  # the form: folders(), target(), fraction(), seed()
    cancel_requested = Signal()  # stop the calibration going on
    write_requested = Signal()  # the limits shown into the model's sidecar
    save_plot_requested = Signal(str)  # a .png path chosen by the reader

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Calibrate limits")
        self._ok, self._ng = QLineEdit(), QLineEdit()
        self._fnr, self._split, self._seed = QDoubleSpinBox(), QDoubleSpinBox(), QSpinBox()
        self._by_fnr, self._by_f1 = QRadioButton("At most"), QRadioButton("Best F1 (one limit, no REVIEW band)")
        self._calibrate, self._cancel = QPushButton("Calibrate"), QPushButton("Cancel")
        self._write, self._save = QPushButton("Write to sidecar"), QPushButton("Save plot…")
        self._progress, self._line = QProgressBar(), FitLabel(lines=3, hint_width=900)
        self.plot, self._report = PlotView(), QPlainTextEdit()
        self._model = FitLabel(hint_width=900)  # a long model name is elided (whole on hover), never widening
        bold = self._model.font()
        bold.setBold(True)
        self._model.setFont(bold)
        model_row = QHBoxLayout()
        model_row.addWidget(QLabel("Model:"))
        model_row.addWidget(self._model, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(model_row)
        layout.addLayout(self._form())
        layout.addWidget(self._progress)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self._report_box())
        layout.addWidget(self._line)
        layout.addLayout(self._buttons())
        self._progress.hide()
        self.set_running(False)
        self.show_result([], None)
        size_on_screen(self, WANTED)  # its button row on the screen, whatever the screen

    def _form(self) -> QGridLayout:
        grid = QGridLayout()
        for row, (label, edit, title) in enumerate((("OK folder (good parts)", self._ok, "OK folder: good parts"),
                                                    ("NG folder (defective parts)", self._ng,
                                                     "NG folder: defective parts"))):
            browse = QPushButton("Browse…")
            browse.clicked.connect(lambda _checked=False, e=edit, t=title: self._browse(e, t))
            grid.addWidget(QLabel(label), row, 0)
            grid.addWidget(edit, row, 1)
            grid.addWidget(browse, row, 2)
        self._fnr.setRange(0.0, 50.0)  # 0: no defect may pass as OK (the strictest target)
        self._fnr.setDecimals(1)
        self._fnr.setSingleStep(0.5)
        self._fnr.setSuffix(" %")
        self._fnr.setValue(1.0)
        self._split.setRange(0.05, 0.95)
        self._split.setSingleStep(0.05)
        self._split.setValue(0.5)
        self._seed.setRange(0, 2**31 - 1)
        group = QButtonGroup(self)
        for button in (self._by_fnr, self._by_f1):
            group.addButton(button)
        self._by_fnr.setChecked(True)
        self._by_fnr.toggled.connect(self._fnr.setEnabled)
        target = QHBoxLayout()
        widgets: tuple[QWidget, ...] = (self._by_fnr, self._fnr, QLabel("of the NG parts passed as OK (FNR; "
                                        "FPR the same)"))
        for widget in widgets:
            target.addWidget(widget)
        target.addStretch(1)
        split = QHBoxLayout()  # rows of their own: the form stays narrower than a small screen
        for widget in (self._split, QLabel("Seed"), self._seed):
            split.addWidget(widget)
        split.addStretch(1)
        grid.addWidget(QLabel("Target"), 2, 0)
        grid.addLayout(target, 2, 1, 1, 2)
        grid.addWidget(self._by_f1, 3, 1, 1, 2)
        grid.addWidget(QLabel("Split"), 4, 0)
        grid.addLayout(split, 4, 1, 1, 2)
        grid.setColumnStretch(1, 1)
        self._split.setToolTip("Share of each folder the limits are chosen on; the rest measures them")
        self._seed.setToolTip("The split's random seed")
        return grid

    def _report_box(self) -> QPlainTextEdit:
        report = self._report
        report.setReadOnly(True)
        report.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        report.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        lines = report.fontMetrics().lineSpacing() * REPORT_LINES
        report.setFixedHeight(lines + 2 * report.frameWidth() + 8)
        return report

    def _buttons(self) -> QHBoxLayout:
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        self._calibrate.setDefault(True)
        self._calibrate.clicked.connect(self.calibrate_requested)
        self._cancel.clicked.connect(self.cancel_requested)
        self._write.clicked.connect(self.write_requested)
        self._save.clicked.connect(self._ask_plot_path)
        self._write.setToolTip("Put these limits, with their provenance, into the model's sidecar (verdict "
                               "section) and reload the model: the banner, badges and histogram use them at once")
        row = QHBoxLayout()
        for button in (self._calibrate, self._cancel, self._write, self._save):
            row.addWidget(button)
        row.addStretch(1)
        row.addWidget(close)
        return row

    # -- what the controller reads and sets ------------------------------------------------------------

    def set_model(self, name: str) -> None:
        self._model.setText(name)

    def set_folders(self, ok: str, ng: str) -> None:
        self._ok.setText(ok)
        self._ng.setText(ng)

    def folders(self) -> tuple[str, str]:
        return self._ok.text().strip(), self._ng.text().strip()

    def target(self) -> dict[str, float | bool | None]:
        """Target.chosen's options: max_fnr (a fraction) or best_f1."""
        if self._by_f1.isChecked():
            return {"best_f1": True}
        return {"max_fnr": round(self._fnr.value() / 100, 6)}

    def set_target(self, *, max_fnr: float | None = None, best_f1: bool = False) -> None:
        (self._by_f1 if best_f1 else self._by_fnr).setChecked(True)
        if max_fnr is not None:
            self._fnr.setValue(max_fnr * 100)

    def fraction(self) -> float:
        return round(self._split.value(), 6)

    def seed(self) -> int:
        return self._seed.value()

    def set_split(self, fraction: float, seed: int) -> None:
        self._split.setValue(fraction)
        self._seed.setValue(seed)

    def set_running(self, running: bool) -> None:
        self._calibrate.setEnabled(not running)
        self._cancel.setEnabled(running)
        for button in (self._write, self._save):
            button.setEnabled(not running and self.plot.image() is not None)
        self._progress.setVisible(running)
        if running:
            self._progress.setRange(0, 0)  # busy until the first image is scored (the session opens first)

    def set_progress(self, done: int, total: int) -> None:
        self._progress.setRange(0, max(total, 1))
        self._progress.setValue(done)
        self._progress.setFormat(f"{done} of {total} images scored")

    def show_result(self, lines: list[str], plot: np.ndarray | None) -> None:
        """The report's lines and the plot (RGB pixels); nothing shown for none."""
        self._report.setPlainText("\n".join(lines))
        image = None
        if plot is not None:
            height, width = plot.shape[:2]
            image = QImage(plot.tobytes(), width, height, 3 * width, QImage.Format.Format_RGB888).copy()
        self.plot.set_image(image)
        self._write.setEnabled(image is not None)
        self._save.setEnabled(image is not None)

    def report_text(self) -> str:
        return self._report.toPlainText()

    def say(self, line: str, *, error: bool = False) -> None:
        self._line.setText(line)
        self._line.setStyleSheet(ERROR_STYLE if error else "")

    def line(self) -> str:
        return self._line.text()

    def progress_text(self) -> str:
        return self._progress.text() if self._progress.isVisible() else ""

    # -- its own pickers --------------------------------------------------------------------------------

    def _browse(self, edit: QLineEdit, title: str) -> None:
        folder = QFileDialog.getExistingDirectory(self, title, edit.text())
        if folder:
            edit.setText(folder)

    def _ask_plot_path(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save plot", "calibration.png", "PNG images (*.png)")
        if path:
            self.save_plot_requested.emit(path)

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape and self._cancel.isEnabled():
            self.cancel_requested.emit()  # Esc stops the calibration first; a second Esc closes
            return
        super().keyPressEvent(event)
