"""An instance model's results in the viewer: the instance overlay and list, the legend's counts per class, the live
score threshold (no new run), the reader's corrections — choose one (a row or a click), delete it, draw one as a box,
paint one with the brush or let the Smart tool find one from a click or a box (controllers/smart_instances.py), draw
one again — and the corrected instances exported as COCO JSON or YOLO txt + data.yaml.

The instances the reader sees and corrects are plain records in app/ui/state/instance_edits.py (an InstanceBook);
this controller only shows them and turns the reader's clicks and drags into its changes. Review: a correction
marks the picture "corrected" in the review log; Accept keeps the picture's instances as they are (corrected or
the model's), Reject leaves the picture out of the export.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QRectF, Signal

from app.ui.state.instance_edits import InstanceBook, drawn_instance, painted_instance, redrawn
from app.ui.state.view_state import DisplayMode

if TYPE_CHECKING:
    from collections.abc import Callable

    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QWidget

    from app.inference.model.instances import Instance, Instances
    from app.inference.model.spec import ModelSpec
    from app.ui.controllers.presenter import Presenter
    from app.ui.controllers.reviewer import Reviewer
    from app.ui.controllers.smart import Smart
    from app.ui.controllers.smart_instances import SmartInstances
    from app.ui.state.messages import ViewKey, ViewResult
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.instance_overlay import InstancesItem
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.status import StatusBar
    from app.ui.widgets.viewer import ImageViewer

FORMATS = ("coco", "yolo")


def _escape_action(window: QWidget, slot: Callable[[], object]) -> QAction:
    """Esc on the window, enabled only while a box is being drawn: the key is the Smart tool's otherwise."""
    from PySide6.QtGui import QAction, QKeySequence

    action = QAction("instances-cancel-box", window)
    action.setShortcut(QKeySequence("Escape"))
    action.triggered.connect(lambda _checked=False: slot())
    action.setEnabled(False)
    window.addAction(action)
    return action


class InstanceController(QObject):
    changed = Signal(object)  # path (str): the reader corrected its instances

    def __init__(self, state: ViewState, *, presenter: Presenter, viewer: ImageViewer, panel: SidePanel,
                 reviewer: Reviewer, files: FileList, status: StatusBar, smart: Callable[[], Smart] | None = None,
                 parent: QObject | None = None) -> None:
        """`smart`: the mask Smart tool (made on first use), whose prompt worker the instance Smart tool asks."""
        super().__init__(parent)
        self._state, self._viewer, self._panel = state, viewer, panel
        self._reviewer, self._files, self._status = reviewer, files, status
        self.book = InstanceBook()
        self._view: ViewResult | None = None  # the instance result on screen
        # the model whose instances the book holds, by its file and hash: not a view's generation (model B joining
        # makes a new one) nor the summary (the same model reopened on another device keeps its corrections)
        self._model: tuple[str, str] | None = None
        # ("add" | "paint" | "smart", class index) or ("redraw", instance)
        self._drawing: tuple[str, int | Instance] | None = None
        self._from: tuple[float, float] | None = None
        presenter.decision_shown.connect(self._on_shown)
        panel.hidden_changed.connect(self._on_hidden)
        panel.mode_changed.connect(lambda _mode: self._on_mode())
        panel.decision.threshold_changed.connect(lambda _value: self._draw())  # the Tuner set the state first
        viewer.edit_pressed.connect(self._pressed)
        viewer.edit_moved.connect(self._moved)
        viewer.edit_released.connect(self._released)
        viewer.clicked.connect(self._clicked)
        viewer.brush_wheel.connect(self._brush_step)
        self._stroke: list[tuple[float, float]] = []
        self.brush_radius = 0  # the Paint brush's radius in image pixels (0: from the picture's size)
        self._judged_corrected = False  # the panel shows a verdict judged on corrections
        self._escape = _escape_action(viewer.window(), self.cancel_drawing)
        self._smart = smart
        self._prompts: SmartInstances | None = None  # the Smart tool's side of it, made on first use

    # -- showing ---------------------------------------------------------------------------------------

    @property
    def threshold(self) -> float | None:
        return self._state.tuning.threshold

    def shown(self) -> Instances | None:
        """The instances of the picture on screen as shown (threshold, corrections); None without any."""
        return None if self._view is None else self.book.shown(self._view.key, self.threshold)

    def _on_shown(self, view: ViewResult) -> None:
        instances = view.result.instances
        if instances is None:
            self._view = None
            self._panel.hide_instances()
            return
        model = (str(self._spec.path), self._state.model.sha256 if self._state.model else "")
        if model != self._model:  # another model: its own instances, no corrections
            self._model = model
            self.book.clear()
            self._panel.instance_list().set_classes(self._spec.classes)
            self._wire_list()
        self.book.saw(view.key, instances)
        self._view = view
        self._draw()

    def _wire_list(self) -> None:
        listed = self._panel.instance_list()
        if listed.property("wired"):
            return
        listed.setProperty("wired", True)
        listed.chosen.connect(self.choose)
        listed.delete_requested.connect(self.delete)
        listed.add_requested.connect(self.start_add)
        listed.redraw_requested.connect(self.start_redraw)
        listed.paint_requested.connect(self.start_paint)
        listed.smart_requested.connect(self.start_smart)

    @property
    def _spec(self) -> ModelSpec:
        model = self._state.model
        assert model is not None  # an instance result was shown: its model is loaded
        return model.spec

    def _draw(self) -> None:
        """The overlay, the list and the legend's counts of the picture on screen, as the book and threshold say."""
        shown = self.shown()
        if shown is None or self._view is None:
            return
        classes = self._spec.classes
        self._overlay_for(self.book.items(self._view.key), shown.image_hw).set_min_score(self.threshold)
        counts = [sum(1 for i in shown.items if i.class_index == index) for index in range(len(classes))]
        self._panel.legend.set_instance_counts(counts)
        self._panel.instance_list().set_instances(shown.items, classes=classes, pixel_mm=self._pixel_mm(),
                                                  note=self._note())
        self._judge(shown)

    def _judge(self, shown: Instances) -> None:
        """A corrected picture's verdict judged on the corrections (as the reader sees them, at the threshold); the
        model's own again once every correction is taken back."""
        view = self._view
        if view is None:
            return
        if self.book.is_corrected(view.key):
            from dataclasses import replace

            from app.inference.decide.tuning import judge, with_score_limit

            best = max((item.score for item in shown.items), default=0.0)
            judged = judge(with_score_limit(self._spec, self._state.tuning.score_limit),
                           replace(view.result, instances=shown, image_score=best))
            self._panel.show_verdict(judged, corrected=True)
            self._judged_corrected = True
        elif self._judged_corrected:
            self._panel.show_verdict(view.judgement)
            self._judged_corrected = False

    def _overlay_for(self, items: tuple[Instance, ...], image_hw: tuple[int, int]) -> InstancesItem:
        """The overlay item on screen when it holds `items` (a threshold change only repaints it), else a new one
        (another picture, a correction), the instance chosen before still highlighted."""
        from app.ui.widgets.instance_overlay import InstancesItem

        old = self._viewer.instances_item
        if old is not None and len(old.instances) == len(items) and all(
                a is b for a, b in zip(old.instances, items, strict=True)):
            return old
        item = InstancesItem(items, [info.color for info in self._spec.classes], image_hw)
        item.set_hidden(self._state.overlay.hidden)
        item.set_filled(self._state.overlay.mode is not DisplayMode.CONTOUR)
        chosen = old.highlight if old is not None else None
        item.set_highlight(next((i for i in items if i is chosen), None))
        self._viewer.set_instances(item)
        return item

    def _note(self) -> str:
        view = self._view
        parts = [] if self.threshold is None else [f"score ≥ {self.threshold:.2f}"]
        if view is not None and self.book.is_corrected(view.key):
            parts.append("corrected by you")
        return " · ".join(parts)

    def _pixel_mm(self) -> tuple[float, float] | None:
        """The picture's pixel size (rows, columns in mm) when its files give one: a volume's slice."""
        volume = self._files.volume(str(self._view.path)) if self._view is not None else None
        spacing = volume.spacing if volume is not None else None
        return None if spacing is None else (float(spacing[1]), float(spacing[2]))

    def _on_mode(self) -> None:
        """Filled or Contour (the presenter set the state first): contour draws the outlines alone."""
        item = self._viewer.instances_item
        if item is not None:
            item.set_filled(self._state.overlay.mode is not DisplayMode.CONTOUR)

    def _on_hidden(self, hidden: frozenset[int]) -> None:
        item = self._viewer.instances_item
        if item is not None:
            item.set_hidden(frozenset(hidden))

    def choose(self, instance: Instance) -> None:
        """Zoom to `instance` and highlight it."""
        item = self._viewer.instances_item
        if item is not None:
            item.set_highlight(instance)
        x0, y0, x1, y1 = instance.box
        self._viewer.zoom_to(QRectF(x0, y0, x1 - x0, y1 - y0))

    def _clicked(self, x: float, y: float) -> None:
        """A click on the picture chooses the instance under it (the best-scoring one), or none."""
        item = self._viewer.instances_item
        if item is None or self._view is None:
            return
        found = item.instance_at(x, y)
        item.set_highlight(found)
        self._panel.instance_list().select(found)

    # -- correcting ------------------------------------------------------------------------------------

    def delete(self, instance: Instance | None = None) -> None:
        """Delete `instance` (default: the one chosen in the list) from the picture on screen."""
        if self._view is None:
            return  # no instance model's picture on screen: the key is nobody's
        target = instance or self._panel.instance_list().chosen_instance()
        if target is None:
            self._status.showMessage("Choose an instance in the list first", 8000)
            return
        self.book.delete(self._view.key, target)
        self._corrected(f"Deleted {target.class_name} ({target.score:.2f})")

    def undo(self) -> bool:
        """Take the picture's last correction back (Ctrl+Z); False when there is none (the mask editor's then)."""
        return self._step(undo=True)

    def redo(self) -> bool:
        return self._step(undo=False)

    def _step(self, *, undo: bool) -> bool:
        view = self._view
        if view is None or self.drawing or not (self.book.undo(view.key) if undo else self.book.redo(view.key)):
            return False
        self._draw()
        self._status.showMessage(f"{'Undone' if undo else 'Redone'}: {len(self.shown() or ())} instances now", 8000)
        self.changed.emit(str(view.path))
        return True

    def start_add(self, class_index: int) -> None:
        self._start_drawing(("add", class_index), "Drag a box around the new instance (Esc: cancel)")

    def start_redraw(self, instance: Instance) -> None:
        self._start_drawing(("redraw", instance), f"Drag the new box of {instance.class_name} (Esc: cancel)")

    def start_paint(self, class_index: int) -> None:
        self._start_drawing(("paint", class_index), "Paint the new instance with the brush: Ctrl+wheel sizes it "
                                                    "(Esc: cancel)")

    def start_smart(self, class_index: int) -> None:
        if self._smart is None:  # a controller without the window's Smart tool (no prompt worker to ask)
            self._status.showMessage("The Smart tool is not available here", 8000)
            return
        self._start_drawing(("smart", class_index), "Smart tool: click the object, or drag a box around it — a new "
                                                    "instance of the class picked (Esc: cancel)")

    def smart_tool(self) -> bool:
        """S on an instance model's picture: the Smart tool for the class picked in the list; False on any other
        picture (the mask editor's Smart tool then)."""
        if self._view is None or self._smart is None:
            return False
        self.start_smart(self._panel.instance_list().class_index())
        return True

    def _start_drawing(self, what: tuple[str, int | Instance], message: str) -> None:
        if self._view is None or self._viewer.editing:
            self._status.showMessage("Draw on an instance model's picture, outside mask editing", 8000)
            return
        self._drawing = what
        painting = what[0] == "paint"
        if painting and self.brush_radius <= 0:
            self.brush_radius = max(2, round(min(self._view.result.image_hw) / 100))
        self._viewer.right_edits = not painting  # a box is dragged without the brush ring
        self._viewer.set_editing(self.brush_radius if painting else 1)
        self._escape.setEnabled(True)
        self._status.showMessage(message, 15000)

    def cancel_drawing(self) -> None:
        if self._drawing is None:
            return
        self._drawing = self._from = None
        self._stroke = []
        self._escape.setEnabled(False)
        self._viewer.set_editing(None)
        self._viewer.right_edits = False
        item = self._viewer.instances_item
        if item is not None:
            item.set_rubber(None)
            item.set_stroke((), 0)

    def _brush_step(self, step: int) -> None:
        if self._drawing is not None and self._drawing[0] == "paint":
            self.brush_radius = max(1, self.brush_radius + step * max(1, self.brush_radius // 8))
            self._viewer.set_brush_radius(self.brush_radius)

    @property
    def drawing(self) -> bool:
        return self._drawing is not None

    def _pressed(self, x: float, y: float, _modifiers: object) -> None:
        if self._drawing is not None:
            self._from = (x, y)
            self._stroke = [(x, y)]
            self._moved(x, y)

    def _moved(self, x: float, y: float) -> None:
        item = self._viewer.instances_item
        if self._drawing is None or self._from is None or item is None:
            return
        if self._drawing[0] == "paint":
            self._stroke.append((x, y))
            item.set_stroke(self._stroke, self.brush_radius)
        else:
            x0, y0 = self._from
            item.set_rubber(QRectF(min(x0, x), min(y0, y), abs(x - x0), abs(y - y0)))

    def _released(self) -> None:
        item = self._viewer.instances_item
        rubber = item.rubber if item is not None else None  # the box as last drawn
        what, stroke, start = self._drawing, list(self._stroke), self._from
        self.cancel_drawing()
        if what is not None and what[0] == "smart" and start is not None and self._view is not None:
            self._prompted().ask(self._view, int(what[1]) if isinstance(what[1], int) else 0, start, rubber,
                                 zoom=self._viewer.zoom())
        elif what is not None and what[0] == "paint" and stroke:
            self.finish_stroke(int(what[1]) if isinstance(what[1], int) else 0, stroke)
        elif what is not None and rubber is not None:
            self.finish_box(what, (rubber.left(), rubber.top(), rubber.right() + 1, rubber.bottom() + 1))

    def finish_stroke(self, class_index: int, stroke: list[tuple[float, float]]) -> None:
        """A brush stroke painted (image pixels): a new instance of `class_index`, its mask what the brush covered."""
        if self._view is None:
            return
        info = self._spec.classes[class_index]
        made = painted_instance(class_index, info.name, stroke, max(1, self.brush_radius), self._view.result.image_hw,
                                with_mask=self._spec.output.protos_name is not None)
        if made is None:
            self._status.showMessage("The stroke lies outside the picture: nothing painted", 8000)
            return
        self.book.add(self._view.key, made)
        self._corrected(f"Painted {made.class_name}")

    def finish_box(self, what: tuple[str, int | Instance], box: tuple[float, float, float, float]) -> None:
        """A box dragged (image pixels, x0, y0, x1, y1): a new instance of the class asked for, or the one asked
        for drawn again."""
        if self._view is None:
            return
        hw = self._view.result.image_hw
        kind, subject = what
        if kind == "redraw" and not isinstance(subject, int):
            made = redrawn(subject, box, hw)
            if made is not None:
                self.book.replace(self._view.key, subject, made)
        else:
            index = int(subject) if isinstance(subject, int) else 0
            info = self._spec.classes[index]
            made = drawn_instance(index, info.name, box, hw, with_mask=self._spec.output.protos_name is not None)
            if made is not None:
                self.book.add(self._view.key, made)
        if made is None:
            self._status.showMessage("The box is less than a pixel across: nothing drawn", 8000)
            return
        self._corrected(f"{'Redrew' if kind == 'redraw' else 'Added'} {made.class_name}")

    def _prompted(self) -> SmartInstances:
        """The Smart tool's prompts for instances, made on first use (its prompt thread with it)."""
        if self._prompts is None:
            from app.ui.controllers.smart_instances import SmartInstances

            assert self._smart is not None  # start_smart needs it: smart_tool said False without
            self._prompts = made = SmartInstances(self._state, smart=self._smart, parent=self)
            made.found.connect(self._found)
            made.message.connect(lambda line: self._status.showMessage(line, 12000))
        return self._prompts

    def _found(self, key: ViewKey, made: Instance) -> None:
        """The Smart tool's instance, added to the picture it was asked on while that picture is on screen."""
        if self._view is None or self._view.key != key:
            self._status.showMessage("The Smart tool answered for a picture no longer shown: nothing added", 8000)
            return
        self.book.add(key, made)
        self._corrected(f"Smart tool: added {made.class_name}")

    def _corrected(self, message: str) -> None:
        view = self._view
        if view is None:
            return
        self._draw()
        path = str(view.path)
        if self._reviewer.log is not None:
            self._reviewer.mark("corrected", path)
        self._status.showMessage(f"{message}: {len(self.shown() or ())} instances now — kept for this session: "
                                 "Results ▸ Export instances writes them", 12000)
        self.changed.emit(path)

    # -- export ----------------------------------------------------------------------------------------

    def export(self, path: str | Path, fmt: str) -> int:
        """Every picture looked at, with the reader's corrections, at the threshold in force, as COCO JSON at `path`
        (`fmt` "coco") or YOLO txt files and data.yaml in the folder `path` ("yolo"); pictures marked "result
        wrong" left out. Returns how many pictures were written; a failure is said in the status bar (-1)."""
        from app.errors import SegLensError
        from app.runs.labels.coco import write_coco
        from app.runs.labels.records import LabelledImage, LabelSet
        from app.runs.labels.yolo import write_yolo

        if self._state.model is None or fmt not in FORMATS:
            return -1
        images = self.book.labelled(self._name_of, self.threshold, self._rejected)
        labels = LabelSet(tuple(info.name for info in self._spec.classes),
                          tuple(LabelledImage(name, found) for name, found in images))
        try:
            if fmt == "coco":
                write_coco(Path(path), labels)
            else:
                write_yolo(Path(path), labels, masks=self._spec.output.protos_name is not None)
        except (SegLensError, OSError) as exc:
            self._status.showMessage(f"Instances not exported: {exc}", 20000)
            return -1
        self._status.showMessage(f"Exported the instances of {len(images)} pictures to {path}", 15000)
        return len(images)

    def _name_of(self, key: ViewKey) -> str | None:
        """The picture's path inside its folder ('/'-separated; a frame after the first: `#n` added), None when it
        is no longer listed."""
        try:
            _, rel = self._files.root_and_rel(key.path)
        except KeyError:
            return None
        return rel if key.frame == 0 else f"{rel}#{key.frame + 1}"

    def _rejected(self, key: ViewKey) -> bool:
        log = self._reviewer.log
        if log is None:
            return False
        try:
            review = log.get(self._files.root_and_rel(key.path)[1])
        except KeyError:
            return False
        return review is not None and review.state == "rejected"
