"""The right-hand panel: the model, overlay controls, the class legend or top-k (legend.py), the image's facts."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QEvent, QSize, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QScrollArea,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app.ui.state.view_state import DisplayMode
from app.ui.widgets.fit import FitLabel
from app.ui.widgets.lazy_qt import set_enum
from app.ui.widgets.legend import UNCERTAIN_COLOR, Legend, TopK, plain

if TYPE_CHECKING:
    from app.inference.decide.tuning import Judgement

MODES = (DisplayMode.FILLED, DisplayMode.CONTOUR)  # the order of the Mode box, and of C's cycle
MODE_NAMES = {DisplayMode.FILLED: "Filled", DisplayMode.CONTOUR: "Contour"}
REVEAL_MS = 100  # a group just shown is placed by the layout after the next events


def _breakable(text: str) -> str:
    """`text` (escaped) with a zero-width space after each `_`, `-`, `.` and `/`: a long file name can wrap in the
    narrow panel instead of widening it."""
    return re.sub(r"([_./-])", "\\1\u200b", plain(text))


def _level(value: float) -> str:
    """A window's level or width as the status bar says it: a whole number ("L -214", not "L -213.958"); a small
    one (a float image's 0.35) with its two significant digits."""
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


class OverlayControls(QGroupBox):
    """Show/hide, opacity and display mode of the overlay. Others change them through intents, not the widgets."""

    opacity_changed = Signal(float)
    mode_changed = Signal(object)  # DisplayMode
    visible_changed = Signal(bool)

    def __init__(self, parent=None) -> None:
        super().__init__("Overlay", parent)
        self._visible = QCheckBox("Show overlay (O)")
        self._visible.setToolTip("O shows or hides the overlay; hold Space to peek under it")
        self._visible.setChecked(True)
        self._opacity = QSlider()
        set_enum(self._opacity, "orientation", "Horizontal")
        self._opacity.setRange(0, 100)
        self._opacity.setPageStep(10)
        self._opacity.setToolTip("Opacity ([ and ] keys)")
        self._opacity_label = QLabel()
        self._mode = QComboBox()
        for mode in MODES:
            self._mode.addItem(MODE_NAMES[mode])
        self._mode.setToolTip("Filled regions or outlines (C key)")
        form = QFormLayout(self)
        form.addRow(self._visible)
        form.addRow("Opacity", self._opacity)
        form.addRow("", self._opacity_label)
        form.addRow("Mode", self._mode)
        self._opacity.valueChanged.connect(self._on_opacity)
        self._mode.currentIndexChanged.connect(lambda i: self.mode_changed.emit(MODES[i]))
        self._visible.toggled.connect(self.visible_changed.emit)

    def _on_opacity(self, value: int) -> None:
        self._opacity_label.setText(f"{value} %")
        self.opacity_changed.emit(value / 100.0)

    def set_opacity(self, opacity: float) -> None:
        self._opacity.setValue(round(opacity * 100))
        self._on_opacity(self._opacity.value())

    def nudge_opacity(self, percent: int) -> None:
        """More (+) or less (−) opaque by `percent` points, within 0–100."""
        self._opacity.setValue(self._opacity.value() + percent)

    def set_mode(self, mode: DisplayMode) -> None:
        self._mode.setCurrentIndex(MODES.index(DisplayMode(mode)))

    def toggle_mode(self) -> None:
        """The next display mode (filled ⇄ contour)."""
        self._mode.setCurrentIndex((self._mode.currentIndex() + 1) % len(MODES))

    def set_overlay_visible(self, visible: bool) -> None:
        self._visible.setChecked(visible)

    def toggle_overlay(self) -> None:
        self._visible.toggle()

    def overlay_wanted(self) -> bool:
        """The reader's choice (what a Space peek returns to)."""
        return self._visible.isChecked()


class ImageInfo(QGroupBox):
    """DICOM/16-bit facts: patient and study fields, the window, and a frame slider for multi-frame files."""

    frame_changed = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__("Image", parent)
        self.text = QLabel()
        self.text.setWordWrap(True)
        set_enum(self.text, "textInteractionFlags", "TextSelectableByMouse")
        self.frame = QSlider()
        set_enum(self.frame, "orientation", "Horizontal")
        self.frame_label = QLabel()
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(self.frame_label)
        layout.addWidget(self.frame)
        self.frame.valueChanged.connect(self._on_frame)
        self.external_slices = False  # a volume: the slice bar under the image moves through it, not this slider
        self.hide()

    def show_info(self, info: dict | None, window: tuple | None, frame: int, frames: int) -> None:
        fields = dict(info or {})
        fields.pop("Frames", None)
        if window is not None:
            fields["Window"] = f"L {_level(window[0])} / W {_level(window[1])}  (right-drag to change)"
        self.text.setText("<br>".join(f"<b>{plain(k)}</b>: {plain(v)}" for k, v in fields.items()))
        self.frame.blockSignals(True)
        self.frame.setRange(0, max(0, frames - 1))
        self.frame.setValue(frame)
        self.frame.blockSignals(False)
        slider = frames > 1 and not self.external_slices
        self.frame.setVisible(slider)
        self.frame_label.setVisible(slider)
        self.frame_label.setText(f"Frame {frame + 1} of {frames}")
        self.setVisible(bool(fields) or slider)

    def _on_frame(self, value: int) -> None:
        self.frame_label.setText(f"Frame {value + 1} of {self.frame.maximum() + 1}")
        self.frame_changed.emit(value)


class SidePanel(QWidget):
    """The model, the overlay controls, the legend or top-k, and the image's facts; shown through intents.

    What the reader asks for in any of its groups comes out as the panel's own signals, so the window wires the
    panel, not its children. The groups a controller drives as a whole (decision, folder scores, edit, review) are
    handed to that controller by the window."""

    split_changed = Signal(object)  # None, "raw" or "ab" (the decision group's Split box)
    opacity_changed = Signal(float)
    visible_changed = Signal(bool)  # the overlay shown or hidden
    mode_changed = Signal(object)  # DisplayMode
    hidden_changed = Signal(object)  # frozenset of the class indices the legend hides
    frame_changed = Signal(int)  # a multi-frame file's frame slider

    def __init__(self, parent=None, *, groups_later: bool = False) -> None:
        super().__init__(parent)
        self.controls = OverlayControls()
        self.legend = Legend()
        self.image_info = ImageInfo()
        self._top_k = TopK()
        self._spec = None  # the model shown: its thresholds say whether a classification is uncertain
        self._model_label = QLabel("No model")
        self._model_label.setWordWrap(True)
        set_enum(self._model_label, "textInteractionFlags", "TextSelectableByMouse")
        layout = QVBoxLayout(self)
        layout.addWidget(self._model_label)
        layout.addWidget(self.controls)
        # "Running <model>…" between a model switch and its first result: a long file name wraps, never widening
        self._busy = FitLabel(lines=3, hint_width=240)
        self._busy.setObjectName("busy")
        self._busy.setStyleSheet(f"color: {UNCERTAIN_COLOR}; font-style: italic")
        self._busy.hide()
        layout.addWidget(self._busy)
        self._misfit = QLabel()  # why the image does not fit the model (app.inference.image.fit), an amber line each
        self._misfit.setObjectName("misfit")
        self._misfit.setWordWrap(True)
        set_enum(self._misfit, "textFormat", "PlainText")
        self._misfit.setStyleSheet(f"color: {UNCERTAIN_COLOR}")
        self._misfit.hide()
        layout.addWidget(self._misfit)
        layout.addWidget(self.legend)
        layout.addWidget(self._top_k)
        layout.addWidget(self.image_info)
        layout.addStretch(1)
        self._top_k.hide()
        self._lesions = None  # the lesion list: made when a volume's components first arrive (lesion_list)
        self._instances = None  # the instance list: made when an instance model's first result arrives
        self.controls.opacity_changed.connect(self.opacity_changed)
        self.controls.visible_changed.connect(self.visible_changed)
        self.controls.mode_changed.connect(self.mode_changed)
        self.legend.visibility_changed.connect(self.hidden_changed)
        self.image_info.frame_changed.connect(self.frame_changed)
        if not groups_later:
            self.add_hidden_groups()

    def add_hidden_groups(self) -> None:
        """The groups hidden until a model, a mode or a folder asks for them (edit, review, decision, folder scores),
        each in its place. At launch they come after the first paint (MainWindow.finish): not part of it, their
        modules (the charts among them) need not load before it."""
        from app.ui.widgets.decision import DecisionControls, FolderScores
        from app.ui.widgets.edit_panel import EditPanel
        from app.ui.widgets.review_panel import ReviewPanel

        self.edit = EditPanel()
        self.review = ReviewPanel()
        self.decision = DecisionControls()
        self.folder = FolderScores()
        layout = cast(QVBoxLayout, self.layout())
        for offset, group in enumerate((self.edit, self.review, self.decision)):
            layout.insertWidget(layout.indexOf(self.controls) + 1 + offset, group)
        layout.insertWidget(layout.indexOf(self.image_info) + 1, self.folder)
        self.decision.split_changed.connect(self.split_changed)

    def lesion_list(self):
        """The volume's 3D components (widgets/lesion_list.LesionList), under the legend; made on first use."""
        if self._lesions is None:
            from app.ui.widgets.lesion_list import LesionList

            self._lesions = LesionList()
            layout = cast(QVBoxLayout, self.layout())
            layout.insertWidget(layout.indexOf(self.legend) + 1, self._lesions)
        return self._lesions

    def instance_list(self):
        """An instance model's objects (widgets/instance_list.InstanceList), under the legend; made on first use."""
        if self._instances is None:
            from app.ui.widgets.instance_list import InstanceList

            self._instances = InstanceList()
            layout = cast(QVBoxLayout, self.layout())
            layout.insertWidget(layout.indexOf(self.legend) + 1, self._instances)
        return self._instances

    def hide_instances(self) -> None:
        if self._instances is not None:
            self._instances.hide()

    def reveal(self, group: QWidget) -> None:
        """Scroll the panel (in its PanelArea, on a short screen) until `group` is in view, once the layout has
        placed a group just shown."""
        parent = self.parentWidget()
        while parent is not None and not isinstance(parent, QScrollArea):
            parent = parent.parentWidget()
        if parent is not None:
            area = parent
            # the group as the context: no call once it (with the window) is gone
            QTimer.singleShot(REVEAL_MS, group, lambda: area.ensureWidgetVisible(group, 0, 0))

    def hide_lesions(self) -> None:
        """No volume's components to list (another picture, another model)."""
        if self._lesions is not None:
            self._lesions.hide()

    def show_model_loading(self, file_name: str, device: str) -> None:
        self._model_label.setText(f"Loading {_breakable(file_name)} on {plain(device)}…")

    def show_model(self, spec) -> None:
        """A model is ready: its name and task, its classes in the legend (segmentation) or top-k (classification)."""
        where = f"on {spec.path}" if spec.remote is not None else spec.path.name  # "on remote host:port/model"
        task = "anomaly" if spec.output.kind == "anomaly" else spec.task  # a map and an image score, as `models`
        self._model_label.setText(f"<b>{_breakable(spec.name)}</b><br>{task} · {_breakable(where)}")
        classification = spec.task == "classification"
        self.legend.setVisible(not classification)
        self.controls.setVisible(not classification)
        self._top_k.setVisible(classification)
        self.legend.set_classes(spec.classes)
        self._spec = spec
        self._top_k.set_predictions(())
        self.decision.set_model(spec, None)
        self.folder.hide()

    def show_model_error(self, message: str) -> None:
        self._model_label.setText(f"<b>Model error</b><br>{plain(message)}")
        self.show_busy(None)

    def show_busy(self, text: str | None) -> None:
        """A line over the legend while the picture has no result of the current model (None: it has one)."""
        self._busy.setText(text or "")
        self._busy.setVisible(bool(text))

    def busy_text(self) -> str:
        return self._busy.text() if not self._busy.isHidden() else ""

    def show_result(self, result, counts=None) -> None:
        """Pixel counts per class (segmentation: `counts`, the view's, else the result's own) or the top classes
        (classification) of a pipeline Result."""
        if result.instances is not None:
            return  # counted per class by the instance controller, at the score threshold, with corrections
        if result.labels is not None:
            height, width = result.image_hw
            self.legend.set_counts(result.class_pixels() if counts is None else counts, width * height)
        else:
            from app.inference.decide.verdict import uncertainty  # here, not at import: it pulls in OpenCV (~80 ms)

            doubt = uncertainty(result.predictions, self._spec) if self._spec is not None else None
            self._top_k.set_predictions(result.predictions, doubt.short if doubt else "")

    def show_verdict(self, judgement: Judgement | None, *, corrected: bool = False) -> None:
        """The verdict of the picture shown, its reason and image score (None: clear); `corrected`: judged on the
        reader's corrections."""
        self.decision.show_verdict(judgement, corrected=corrected)

    def show_comparison(self, scored, class_names, agreement=None, error_b: str = "") -> None:
        """The picture against its reference, and model B's agreement with A (DecisionControls.show_comparison)."""
        self.decision.show_comparison(scored, class_names, agreement, error_b)

    def show_image_info(self, info: dict | None, window: tuple | None, frame: int, frames: int) -> None:
        """The image's DICOM/16-bit facts, the display window and, for a multi-frame file, its frame."""
        self.image_info.show_info(info, window, frame, frames)

    def show_mask_counts(self, mask) -> None:
        """Pixel counts of a mask being edited."""
        from app.inference.image.postprocess import class_pixel_counts

        self.legend.set_counts(class_pixel_counts(mask), mask.size)

    def show_misfit(self, reasons) -> None:
        """A line per reason the image does not fit the model (a colour photo into a CT model); none: hidden."""
        self._misfit.setText("\n".join(f"⚠ {reason}" for reason in reasons))
        self._misfit.setVisible(bool(reasons))

    def top_classes(self) -> list[tuple[str, str]]:
        """A classification's classes shown, best first: (short name, score); none for a segmentation."""
        return self._top_k.rows()

    def misfit_text(self) -> str:
        return self._misfit.text() if not self._misfit.isHidden() else ""

    def clear_result(self) -> None:
        """No result for the picture wanted (it failed): no counts, no verdict, no top classes of the one before."""
        self.legend.clear_counts()
        self.decision.show_verdict(None)
        self._top_k.set_predictions(())
        self.show_misfit(())
        self.hide_instances()


WHEEL_TAKERS = (QComboBox, QSlider, QAbstractSpinBox)  # what a wheel passing over would change


class PanelArea(QScrollArea):
    """The side panel in a scroll area whose minimum width is the panel's own, kept up to date: when a group
    appears (edit mode, the review, a colour key) the splitter makes room for it instead of cutting the panel
    off on the right. A horizontal scroll bar is the last resort, should the window be narrower still.

    The wheel over the panel always scrolls it: a combo box, slider or spin box under it never takes the wheel,
    focused or not (a click gives it the focus, and the next notch to scroll on would change it — the Show box
    jumped to "Difference vs reference"). Their values change by a click, a drag or the keyboard only."""

    def __init__(self, panel: QWidget, parent=None) -> None:
        super().__init__(parent)
        self.setWidget(panel)
        self.setWidgetResizable(True)  # the panel's groups scroll on a short screen instead of being squeezed
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        set_enum(self, "horizontalScrollBarPolicy", "ScrollBarAsNeeded")
        panel.installEventFilter(self)
        self._guard_wheel()

    def _guard_wheel(self) -> None:
        """Every wheel taker in the panel, those of the groups added since included."""
        panel = cast(QWidget, self.widget())
        for kind in WHEEL_TAKERS:
            for widget in panel.findChildren(kind):
                if widget.property("panelWheel") is None:
                    widget.setProperty("panelWheel", True)
                    set_enum(widget, "focusPolicy", "StrongFocus")
                    widget.installEventFilter(self)

    def _scroll_instead(self, watched, event) -> bool:
        """A wheel over a wheel taker: to the panel's scroll bar, not to the widget."""
        if not isinstance(watched, WHEEL_TAKERS):
            return False
        QApplication.sendEvent(self.viewport(), event)
        event.accept()  # handled: not passed on to the widget's parents either
        return True

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        width = cast(QWidget, self.widget()).minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width() + \
            2 * self.frameWidth()
        # only ever wider: a panel that narrows again (shorter counts on the next image, edit mode ended) would
        # move the splitter and refit the picture at every step
        self._widest = max(getattr(self, "_widest", 0), width)
        return QSize(self._widest, hint.height())

    def sizeHint(self) -> QSize:
        return super().sizeHint().expandedTo(self.minimumSizeHint())

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Wheel and self._scroll_instead(watched, event):
            return True
        if watched is self.widget() and kind == QEvent.Type.LayoutRequest:
            self.updateGeometry()  # the panel's minimum may have changed: the splitter asks again
            self._guard_wheel()
        elif watched is self.widget() and kind == QEvent.Type.ChildAdded:
            self._guard_wheel()  # a group added (sent at once; its layout request is posted)
        return super().eventFilter(watched, event)
