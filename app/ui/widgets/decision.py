"""The decision panel: what the overlay shows (mask, probability, uncertainty), the live threshold, the verdict of
the picture shown, and after Run on all the folder's score histogram with its draggable limit.

Widgets only: they say what the reader asked for through signals (None = "the model's own value") and are set
through intents; the window decides, the worker recomputes from the kept scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGridLayout, QGroupBox, QLabel, QPushButton, QSlider, QWidget

from app.ui.widgets.charts import NG_COLOR, OK_COLOR, REVIEW_COLOR, ColourBar, ScoreHistogram

if TYPE_CHECKING:
    from PySide6.QtGui import QStandardItem, QStandardItemModel

    from app.inference.decide.tuning import Judgement

LAYERS = (("mask", "Mask"), ("probability", "Probability"), ("uncertainty", "Uncertainty"),
          ("difference", "Difference vs reference"), ("disagreement", "Disagreement A vs B"))
SPLITS = ((None, "Off"), ("raw", "Raw ◀▶ overlay"), ("ab", "Model A ◀▶ model B"))


def _key(*entries: tuple[str, str]) -> str:
    """A colour key whose entries stay whole (non-breaking inside) and wrap between them in the narrow panel."""
    return " &nbsp; ".join(f"<span style='color:{color}'>■</span>&nbsp;{name.replace(' ', '&nbsp;')}"
                           for color, name in entries)


DISAGREEMENT_KEY = _key(("#ff00ff", "only A"), ("#00ffff", "only B"), ("#ffff00", "different classes"))
DIFFERENCE_KEY = _key(("#34c759", "agrees"), ("#ff3b30", "false positive"), ("#0a84ff", "missed"),
                      ("#ffcc00", "other class"))
STEPS = 1000  # the threshold slider's resolution: 0.001
THRESHOLD_NAMES = {"min_confidence": "Min. confidence", "min_score": "Min. score"}  # else "Threshold"
STATE_COLORS = {"OK": OK_COLOR, "REVIEW": REVIEW_COLOR, "NG": NG_COLOR}  # app.inference.decide.verdict.VERDICT_STATES


def verdict_line(verdict) -> str:
    """`OK`, `REVIEW — score 0.55 > 0.4` or `NG — score 0.8 > 0.7`: the state as the CLI's report says it, and the
    rule that fired (a review reason's own `review:` is the state already said)."""
    if verdict.ok:
        return "OK"
    reason = verdict.reason.removeprefix("review: ") if verdict.state == "REVIEW" else verdict.reason
    return f"{verdict.state} — {reason}"


class DecisionControls(QGroupBox):
    layer_changed = Signal(str)
    class_changed = Signal(object)  # class index, None = the winning class
    threshold_changed = Signal(object)  # float, None = the model's own
    split_changed = Signal(object)  # None, "raw" or "ab"

    def __init__(self, parent=None) -> None:
        super().__init__("Decision", parent)
        self._layer = QComboBox()
        for _, name in LAYERS:
            self._layer.addItem(name)
        self._layer.setToolTip("Mask: the decided classes. Probability: the model's probability on a fixed 0–1 "
                               "scale (never stretched per image). Uncertainty: 1 − the winning probability.")
        self._class = QComboBox()
        self._class.setToolTip("Whose probability is shown")
        self._slider = QSlider(Qt.Orientation.Horizontal)
        self._slider.setRange(0, STEPS)
        self._slider.setPageStep(25)
        self._value = QLabel()
        self._reset = QPushButton("Reset")
        self._reset.setObjectName("threshold_reset")
        self._reset.setToolTip("Back to the model's own value (its sidecar)")
        row = QWidget()  # the slider above its value and Reset: the panel is narrow
        line = QGridLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(self._slider, 0, 0, 1, 2)
        line.addWidget(self._value, 1, 0)
        line.addWidget(self._reset, 1, 1)
        line.setColumnStretch(0, 1)
        self._scale = ColourBar()
        self._scale_label = QLabel()
        self._scale_label.setWordWrap(True)
        self._verdict = QLabel()
        self._verdict.setWordWrap(True)
        self._verdict.setTextFormat(Qt.TextFormat.PlainText)
        self._comparison = QLabel()
        self._comparison.setWordWrap(True)
        self._comparison.setTextFormat(Qt.TextFormat.PlainText)
        self._key = QLabel(DIFFERENCE_KEY)
        self._key.setWordWrap(True)  # the colour key breaks between its entries in the narrow panel
        self._split = QComboBox()
        for _, name in SPLITS:
            self._split.addItem(name)
        self._split.setToolTip("A divider you drag across the image: the raw image or model B on the other side")
        _item(self._split, 2).setEnabled(False)
        self._form = QFormLayout(self)
        self._form.addRow("Show", self._layer)
        self._form.addRow("Split", self._split)
        self._form.addRow("Class", self._class)
        self._form.addRow("Threshold", row)
        self._form.addRow(self._scale_label)
        self._form.addRow(self._scale)
        self._form.addRow(self._key)
        self._form.addRow(self._verdict)
        self._form.addRow(self._comparison)
        self._model_value = 0.5
        self._model_b: str | None = None
        self._kind: str | None = None
        self._anomaly = False
        self._layer.currentIndexChanged.connect(self._on_layer)
        self._class.currentIndexChanged.connect(lambda i: self.class_changed.emit(None if i <= 0 else i - 1))
        self._slider.valueChanged.connect(self._on_slider)
        self._reset.clicked.connect(self._on_reset)
        self._split.currentIndexChanged.connect(lambda i: self.split_changed.emit(SPLITS[i][0]))
        self.hide()

    # -- intents ---------------------------------------------------------------------------------------

    def set_model(self, spec, threshold: float | None) -> None:
        """Configure for a model: what its threshold means (app.inference.decide.tuning.tunable), its classes, whether
        it kept scores at all (else the panel shows only verdicts); `threshold` the remembered one (None: its own)."""
        from app.inference.decide.tuning import tunable

        # an instance model's threshold is a score: its weaker instances hidden, not decided again
        self._kind = "min_score" if spec.task == "instances" else tunable(spec)
        self._anomaly = spec.output.kind == "anomaly"
        # an instance model's own: the confidence its instances were kept at (nothing below it to show)
        self._model_value = spec.output.threshold if self._kind in ("threshold", "min_score") else 0.0
        self._form.setRowVisible(self._slider_row(), self._kind is not None)
        label = cast(QLabel, self._form.labelForField(self._slider_row()))  # addRow("Threshold", …) made it
        label.setText(THRESHOLD_NAMES.get(self._kind or "", "Threshold"))
        self._slider.setToolTip("Pixels whose winning probability is below this become background"
                                if self._kind == "min_confidence" else
                                "Instances scoring below this are hidden (no new run; the model kept none below "
                                "its own value)" if self._kind == "min_score" else
                                "Foreground where the probability is above this (anomaly map: at or above)")
        pixels = self._kind in ("threshold", "min_confidence")
        _item(self._layer, 1).setEnabled(pixels)  # kept scores are needed
        self.set_model_b(None)
        _item(self._layer, 2).setEnabled(pixels and not self._anomaly)  # a map is no probability
        self._class.blockSignals(True)
        self._class.clear()
        self._class.addItem("Winning class")
        for info in spec.classes:
            self._class.addItem(info.name)
        self._class.blockSignals(False)
        self.set_threshold(threshold)
        self._layer.setCurrentIndex(0)
        self._show_rows()
        self.show_verdict(None)
        self.show_comparison(None, ())
        self._form.setRowVisible(self._layer, spec.task == "segmentation")
        self.setVisible(spec.task in ("segmentation", "instances") or spec.verdict is not None)

    def set_threshold(self, threshold: float | None) -> None:
        """Put the slider at `threshold` (None: the model's value) without telling anyone."""
        self._slider.blockSignals(True)
        self._slider.setValue(round((self._model_value if threshold is None else threshold) * STEPS))
        self._slider.blockSignals(False)
        self._show_value(threshold)

    def threshold(self) -> float | None:
        value = self._slider.value() / STEPS
        return None if abs(value - self._model_value) < 0.5 / STEPS else value

    def threshold_text(self) -> str:
        """The threshold's value as shown: `0.300`, or `0.500 (model)` at the model's own."""
        return self._value.text()

    def threshold_kind(self) -> str | None:
        """What the slider sets for this model: "threshold", "min_confidence", "min_score" (an instance model's
        instances), or None (no kept scores)."""
        return self._kind

    def offered_layers(self) -> list[str]:
        """The layers this model (and model B, if any) can show now."""
        return [key for row, (key, _) in enumerate(LAYERS) if _item(self._layer, row).isEnabled()]

    def offered_splits(self) -> list[str | None]:
        """The split views offered now (None: off; "ab" only while comparing with model B)."""
        return [key for row, (key, _) in enumerate(SPLITS) if _item(self._split, row).isEnabled()]

    def scale_marker(self) -> float | None:
        """The threshold marked on the probability colour bar; None while the bar is hidden or unmarked."""
        return None if self._scale.isHidden() else self._scale.marker()

    def set_layer(self, layer: str) -> None:
        self._layer.setCurrentIndex([key for key, _ in LAYERS].index(layer))

    def layer(self) -> str:
        return LAYERS[self._layer.currentIndex()][0]

    def cycle_layer(self) -> None:
        """The next layer this model can show (H key)."""
        for offset in range(1, len(LAYERS) + 1):
            index = (self._layer.currentIndex() + offset) % len(LAYERS)
            if _item(self._layer, index).isEnabled():
                self._layer.setCurrentIndex(index)
                return

    def nudge(self, steps: int) -> None:
        """Move the threshold by `steps` thousandths."""
        self._slider.setValue(self._slider.value() + steps)

    def show_verdict(self, judgement: Judgement | None, stale: bool = False, *, corrected: bool = False) -> None:
        """The verdict of the picture shown (OK green, REVIEW amber, NG red), its reason and image score (None:
        clear); `corrected`: judged on the reader's corrections, not on the model's answer."""
        verdict = judgement.verdict if judgement is not None else None
        score = judgement.score if judgement is not None else None
        parts = [] if verdict is None else [verdict_line(verdict) + (" (as corrected)" if corrected else "")]
        if score is not None:
            parts.append(f"image score {score:.4g}")
        self._verdict.setText("\n".join(parts))
        color = None if verdict is None else STATE_COLORS[verdict.state]
        self._verdict.setStyleSheet(f"color: {color.name()}; font-weight: bold" if color else "")
        self._verdict.setVisible(bool(parts))

    def verdict_text(self) -> str:
        return self._verdict.text()

    def _slider_row(self) -> QWidget:
        """The threshold slider's row in the form: the widget holding the slider and its value."""
        return cast(QWidget, self._slider.parentWidget())

    def set_model_b(self, name: str | None) -> None:
        """A second model to compare with (None: none): the A ◀▶ B split and the disagreement layer."""
        self._model_b = name
        _item(self._split, 2).setEnabled(name is not None)
        _item(self._layer, 4).setEnabled(name is not None)
        if name is None and self._split.currentIndex() == 2:
            self._split.setCurrentIndex(0)
        if name is None and self.layer() == "disagreement":
            self._layer.setCurrentIndex(0)

    @property
    def model_b(self) -> str | None:
        return self._model_b

    def set_split(self, mode: str | None) -> None:
        self._split.setCurrentIndex([key for key, _ in SPLITS].index(mode))

    def show_comparison(self, scored, class_names, agreement=None, error_b: str = "") -> None:
        """The picture against its reference: mean IoU/Dice, per class, FP/FN pixels, or why there is none; and
        model B's agreement with A, or what happened to B (`error_b`: B's error line)."""
        self._show_reference(scored, class_names)
        line = ""
        if error_b:
            line = f"model B {self._model_b or ''} failed on this image: {error_b}"
        elif agreement is not None:
            line = f"model B {self._model_b or ''} vs A: IoU {agreement.iou:.3f} · Dice {agreement.dice:.3f}"
        if line:
            text = self._comparison.text()
            self._comparison.setText(f"{text}\n{line}" if text else line)
        self._comparison.setVisible(bool(self._comparison.text()))

    def _show_reference(self, scored, class_names) -> None:
        if scored is None:
            self._comparison.setText("")
        elif scored.metrics is None:
            self._comparison.setText(f"No metrics: {scored.notice}")
        else:
            metrics, source = scored.metrics, middle_elided(Path(scored.reference).name)
            lines = [f"vs {source}: IoU {metrics.iou:.3f} · Dice {metrics.dice:.3f}"]
            for c in metrics.classes:
                if c.present:
                    name = class_names[c.index] if c.index < len(class_names) else f"class {c.index}"
                    lines.append(f"  {name}: IoU {c.iou:.3f}, FP {c.fp:,} px, FN {c.fn:,} px")
            self._comparison.setText("\n".join(lines))

    def comparison_text(self) -> str:
        return self._comparison.text()

    # -- inside ----------------------------------------------------------------------------------------

    def _show_rows(self) -> None:
        layer = self.layer()
        multi = self._kind == "min_confidence"
        many = self._class.count() > 3  # more than one foreground class
        self._form.setRowVisible(self._class, (layer == "probability" and multi) or (layer == "difference" and many))
        self._class.setItemText(0, "All classes" if layer == "difference" else "Winning class")
        self._class.setToolTip("Whose agreement is painted (TP/FP/FN of one class, or every class)"
                               if layer == "difference" else "Whose probability is shown")
        self._form.setRowVisible(self._key, layer in ("difference", "disagreement"))
        self._key.setText(DIFFERENCE_KEY if layer == "difference" else DISAGREEMENT_KEY)
        self._form.setRowVisible(self._slider_row(), self._kind is not None)
        heat = layer in ("probability", "uncertainty")
        self._scale.setVisible(heat)
        self._scale_label.setVisible(heat)
        names = {"probability": "anomaly map (0–1)" if self._anomaly else "probability",
                 "uncertainty": "uncertainty = 1 − winning probability"}
        self._scale_label.setText(names.get(layer, ""))
        self._scale.set_marker(self._slider.value() / STEPS if layer == "probability" and not multi else None)

    def _on_layer(self, _index: int) -> None:
        self._show_rows()
        self.layer_changed.emit(self.layer())

    def _on_slider(self, _value: int) -> None:
        threshold = self.threshold()
        self._show_value(threshold)
        self._show_rows()
        self.threshold_changed.emit(threshold)

    def _on_reset(self) -> None:
        self.set_threshold(None)
        self._show_rows()
        self.threshold_changed.emit(None)  # the folder's score limit has a Reset of its own

    def _show_value(self, threshold: float | None) -> None:
        value = self._model_value if threshold is None else threshold
        self._value.setText(f"{value:.3f}" + (" (model)" if threshold is None else ""))
        self._reset.setEnabled(threshold is not None)


class FolderScores(QGroupBox):
    """After Run on all: the histogram of the folder's image scores, the verdict's score limit as a draggable
    line with its value ("(model)" when it is the model's own) and a Reset, the REVIEW band's lower limit (fixed)
    when the model has one, and the OK/NG counts (OK/REVIEW/NG with a band)."""

    limit_moved = Signal(float)
    limit_reset = Signal()  # back to the model's own limit

    def __init__(self, parent=None) -> None:
        super().__init__("Folder scores", parent)
        self.histogram = ScoreHistogram()
        self._counts = QLabel()
        self._limit = QLabel()
        self._reset = QPushButton("Reset")
        self._reset.setObjectName("limit_reset")
        self._reset.setToolTip("Back to the model's own score limit (its sidecar)")
        self._limit_row = QWidget()  # as the threshold's row: the value, then Reset
        line = QGridLayout(self._limit_row)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(self._limit, 0, 0)
        line.addWidget(self._reset, 0, 1)
        line.setColumnStretch(0, 1)
        form = QFormLayout(self)
        form.addRow(self.histogram)
        form.addRow(self._limit_row)
        form.addRow(self._counts)
        self.histogram.limit_moved.connect(self.limit_moved)
        self._reset.clicked.connect(self.limit_reset)
        self._band = False  # the model has review rules: the counts say REVIEW even when there are none
        self._review_limit: float | None = None  # the band's lower score limit (fixed), None: no score band
        self.hide()

    def show_limit(self, limit: float | None, *, own: bool) -> None:
        """The score limit in force (None: the model has no score rule) and whether it is the model's own."""
        self._limit_row.setVisible(limit is not None)
        text = "" if limit is None else f"Score limit {limit:.3g}" + (" (model)" if own else "")
        review = self._review_limit
        self._limit.setText(text + (f" · REVIEW above {review:.3g}" if text and review is not None else ""))
        self._reset.setEnabled(limit is not None and not own)

    def limit_text(self) -> str:
        return self._limit.text()

    def show_scores(self, scores: list[float], limit: float | None, inclusive: bool, passed: int,
                    rejected: int, *, review: int = 0, band: bool = False,
                    review_limit: float | None = None) -> None:
        """The folder's scores with the fail `limit` (dragged) and the band's `review_limit` (drawn); `review`:
        files judged REVIEW; `band`: the model has review rules (score ones or others)."""
        self._band, self._review_limit = band or review_limit is not None, review_limit
        self.histogram.set_scores(scores, limit, inclusive=inclusive, draggable=limit is not None,
                                  review=review_limit)
        self.histogram.setVisible(bool(scores))  # a multi-class model has no image score: the counts only
        self.show_counts(passed, rejected, limit, review=review)
        self.setVisible(bool(scores) or bool(passed or rejected or review))

    def follow_limit(self, limit: float | None, passed: int, rejected: int, *, own: bool, review: int = 0) -> None:
        """A new score limit (and the OK/REVIEW/NG counts it makes) on the histogram shown; hidden (no Run on
        all yet): nothing to follow."""
        if self.isHidden():
            return
        self.histogram.set_limit(limit)
        self.show_counts(passed, rejected, limit, review=review)
        self.show_limit(limit, own=own)

    def show_counts(self, passed: int, rejected: int, limit: float | None, *, review: int = 0) -> None:
        """`2 OK · 1 NG`, or `2 OK · 1 REVIEW · 1 NG` for a model with a band (or any REVIEW)."""
        middle = f"{review} REVIEW · " if review or self._band else ""
        text = f"{passed} OK · {middle}{rejected} NG" if passed or rejected or review else "no verdict rules"
        if limit is not None:
            text += "   (drag the line to move the limit)"
        self._counts.setText(text)

    def counts_text(self) -> str:
        return self._counts.text()


def _item(combo: QComboBox, row: int) -> QStandardItem:
    """Row `row` of a combo box's list (a QComboBox's own model is a QStandardItemModel with every row set)."""
    return cast("QStandardItemModel", combo.model()).item(row)


def middle_elided(name: str, most: int = 34) -> str:
    """`name` within `most` characters, its middle cut (`1.2.826.0.1.36…_slice0019_mask.png`): a file name has no
    space to wrap at, and a DICOM series' UID-named reference once widened the side panel to half the window."""
    if len(name) <= most:
        return name
    tail = (most - 1) * 3 // 5  # the end says which slice and which kind of file
    return f"{name[: most - 1 - tail]}…{name[-tail:]}"

