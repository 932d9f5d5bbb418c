"""The Smart tool of edit mode: a click or a box → a prompt model's proposal, previewed, then added to the class.

Left click adds a positive point, right click (or Alt+click) a negative one, a left drag draws a box (the press's
point is taken back once the mouse has moved a few screen pixels). Each change of the prompt asks the prompt worker
(app.ui.workers.prompt_worker, its own thread) for a proposal: newest wins; the encoder runs only when the picture
is not cached; the next pictures are encoded ahead once the proposal is shown. Enter adds the proposal to the chosen
class, Shift+Enter replaces that class inside the box (MaskEdit.paint_mask: one undo step, saved as brush edits
are), Esc discards, Backspace takes back the last point. A refused prompt is one line in the status bar.

`proposal_shown(request_id, ms)`: the time from the mouse press to the preview's update (the latency benchmark).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Protocol, cast

from PySide6.QtCore import QObject, Qt, Signal

from app.ui.controllers.smart_propagation import Corrections
from app.ui.state.view_state import LatestRequest

if TYPE_CHECKING:
    import numpy as np
    from PySide6.QtCore import SignalInstance
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QWidget

    from app.inference.prompt.request import Box, Point
    from app.ui.controllers.smart_propagation import Propagation
    from app.ui.state.messages import ModelSummary, ViewResult
    from app.ui.state.prompt_messages import (
        PrefetchImage,
        PromptFailed,
        PromptImage,
        PromptReady,
        ProposalFailed,
        ProposalReady,
    )
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.edit_panel import EditPanel
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.prompt_items import PromptItems
    from app.ui.widgets.viewer import ImageViewer
    from app.ui.workers.prompt_worker import PromptWorker

log = logging.getLogger(__name__)
DRAG_PX = 5  # screen pixels the mouse moves before a press becomes a box
PREFETCH_FILES = 1  # next files encoded ahead (and, in a volume, the next and previous slice)
NEEDS_BOX = "no prompt model: a point needs a model — draw a box (grabCut), or choose a prompt model"


class MaskEditor(Corrections, Protocol):
    """What the Smart tool needs of the editor (app.ui.controllers.editor.Editor, which makes it): the mask being
    edited and its changes, the chosen class and its colour, a proposal painted in as one step, the presenter (a
    propagated slice waits for its overlay), and what a propagation needs (Corrections)."""

    @property
    def mask(self) -> np.ndarray | None: ...

    @property
    def mask_changed(self) -> SignalInstance: ...

    @property
    def presenter(self) -> Any: ...

    def label(self) -> int: ...

    def class_rgb(self) -> tuple[int, int, int]: ...

    def apply_proposal(self, mask: np.ndarray, *, replace_in: Box | None = None) -> bool: ...


class Smart(QObject):
    proposal_shown = Signal(int, float)  # request id, ms from the press to the preview's update
    message = Signal(str)  # one line for the status bar
    load_requested = Signal(object)  # prompt_messages.PromptLoad
    decode_requested = Signal(object)  # DecodeRequest
    prefetch_requested = Signal(object)  # PrefetchRequest
    propagate_requested = Signal(object)  # PropagateRequest

    def __init__(self, state: ViewState, *, editor: MaskEditor, viewer: ImageViewer, panel: EditPanel,
                 files: FileList | None, keys: QWidget | None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        from app.ui.widgets.prompt_items import PromptItems

        self._state, self._editor, self._viewer, self._panel, self._files = state, editor, viewer, panel, files
        self.preview: PromptItems = PromptItems(viewer.scene())
        self.latest, self.latest_prefetch, self._loads = LatestRequest(), LatestRequest(), LatestRequest()
        self.worker: PromptWorker | None = None
        self._thread: Any = None
        self.model_ready: PromptReady | None = None
        self._view: ViewResult | None = None
        self._image: PromptImage | None = None
        self._points: list[Point] = []
        self._box: Box | None = None
        self._press: tuple[float, float, float] | None = None  # x, y, perf_counter of a left press
        self._press_point = False  # the press added a point (taken back if it becomes a drag)
        self._press_starts = False  # the press began a new prompt (its click chooses the class under it)
        self._dragging = False
        self._drag_end = (0.0, 0.0)
        self._refusal = ""  # why the press's point was refused: said at the release of a click (not of a drag)
        self.proposal: ProposalReady | None = None
        self.accepted: ProposalReady | None = None  # the last proposal added to the mask (propagation starts from it)
        self.accepted_label = 0  # the class it was added to (the propagated slices get that class)
        self._carried = False  # the mask still holds it (Propagate shown)
        self._actions = self._key_actions(keys) if keys is not None else []
        panel.prompt_model_chosen.connect(self.load)
        panel.class_changed.connect(self._recolour)
        editor.mask_changed.connect(self._on_mask_changed)
        self._propagation: Propagation | None = None  # made on first use (controllers/smart_propagation.py)
        panel.propagate_requested.connect(self.propagate)
        panel.stop_requested.connect(self.stop_propagation)

    def start_worker(self) -> PromptWorker:
        """The prompt thread and its worker, made on first use (no prompt machinery before the Smart tool)."""
        if self.worker is not None:
            return self.worker
        from app.ui.workers.prompt_worker import PromptWorker
        from app.ui.workers.threads import start_worker_thread

        self.worker = worker = PromptWorker(latest=self.latest, latest_prefetch=self.latest_prefetch)
        for request, slot in ((self.load_requested, worker.load), (self.decode_requested, worker.decode),
                              (self.prefetch_requested, worker.prefetch), (self.propagate_requested, worker.propagate),
                              (worker.ready, self._on_ready), (worker.failed, self._on_load_failed),
                              (worker.proposal, self._on_proposal), (worker.proposal_failed, self._on_proposal_failed)):
            request.connect(slot)
        self._thread = start_worker_thread(worker, name="prompt", parent=self)
        self.load(self._panel.prompt_model())
        return worker

    def load(self, model: str) -> None:
        """Open `model` ("prompt_demo", a sidecar path, "grabcut") on the prompt worker; a prompt in progress goes."""
        from app.ui.state.prompt_messages import PromptLoad

        self.start_worker()
        self.model_ready = None
        self.clear_prompt()
        self._panel.show_prompt_model(f"loading {model}…", "")
        self.load_requested.emit(PromptLoad(self._loads.issue(), model, prompt_device(self._state.model)))

    def shutdown(self) -> None:
        """Stop the prompt thread (on close): the encoder run in flight ends first (a prefetch's is cancelled), then
        the slices a propagation gave are saved (smart_propagation.Propagation.close)."""
        if self._thread is None:
            return
        from app.ui.workers.threads import stop_thread

        self.latest.issue()
        self.latest_prefetch.issue()
        if self.worker is not None:
            self.worker.cancel_prefetch()
            self.worker.stop_propagation()
        stop_thread(self._thread, timeout_ms=10_000)
        self._thread = None
        if self._propagation is not None:
            self._propagation.close()

    def begin(self, view: ViewResult) -> None:
        """The Smart tool on `view` (edit mode started with it, or chosen while editing): its picture encoded now,
        before the first click, and the next ones after it."""
        self.start_worker()
        self.clear_prompt()
        self._viewer.right_edits = True
        self._view, self._image = view, shown_image(view, self._state.display_window)
        self._prefetch()

    def end(self) -> None:
        """Another tool, or edit mode left: the prompt goes (what was accepted stays in the mask)."""
        self.clear_prompt()
        self._viewer.right_edits = False
        self._view = self._image = None
        self.accepted = None
        self._panel.show_propagation(False)
        self.enable_keys()

    @property
    def view(self) -> ViewResult | None:
        """The picture the Smart tool works on."""
        return self._view

    @property
    def prompting(self) -> bool:
        return bool(self._points or self._box is not None or self.proposal is not None or self._dragging)

    def pressed(self, x: float, y: float, modifiers: Any, *, negative: bool = False) -> None:
        """A press in the viewer (image coordinates; a pixel's centre is a whole number)."""
        if self._image is None:
            return
        now = time.perf_counter()
        negative = negative or bool(modifiers & Qt.KeyboardModifier.AltModifier)
        self._press, self._dragging = (None if negative else (x, y, now)), False
        self._press_starts = not self.prompting
        # a left press may become a box: why its point is refused (outside the image, no model for points) is
        # said only once the button is up without a drag (a box started in the margin is a box)
        self._press_point = self._add_point(round(x), round(y), 0 if negative else 1, now, defer=not negative)

    def moved(self, x: float, y: float) -> None:
        press = self._press
        if press is None:
            return
        zoom = max(self._viewer.zoom(), 1e-6)
        if not self._dragging and max(abs(x - press[0]), abs(y - press[1])) * zoom < DRAG_PX:
            return
        began, self._dragging = not self._dragging, True  # a box being drawn: Esc ends it (prompting)
        self._refusal = ""
        if began and self._press_point:  # a drag, not a click: its point goes, and its proposal
            self._points.pop()
            self._show_points()
            self._reprompt(press[2])  # the points before it, if any
        elif began:
            self.enable_keys()
        self.preview.set_box(box_edges(press[0], press[1], x, y))
        self._drag_end = (x, y)

    def released(self) -> None:
        press, dragging, refusal = self._press, self._dragging, self._refusal
        self._press, self._dragging, self._refusal = None, False, ""
        if refusal and not dragging:
            self.message.emit(refusal)
        if press is not None and not dragging and self._press_point and self._press_starts:
            self._choose_class_under(press[0], press[1])
        if press is None or not dragging:
            return
        from app.inference.prompt.request import Box

        self._box = Box(*box_edges(press[0], press[1], *self._drag_end))
        self._request(time.perf_counter())

    def accept(self, *, replace: bool = False) -> bool:
        """Enter: the proposal into the chosen class (Shift+Enter: replacing that class inside the box)."""
        proposal = self.proposal
        if proposal is None:
            self.message.emit("Nothing to add: click the object or draw a box first")
            return False
        if replace and self._box is None:
            self.message.emit("Shift+Enter replaces the class inside a box: draw one (Enter adds the proposal)")
            return False
        box = self._box if replace else None
        changed = self._editor.apply_proposal(proposal.mask, replace_in=box)
        if not changed:  # still the object the reader chose: Propagate carries it (the model had it right here)
            self.message.emit("The proposal is in the class already: nothing changed on this slice")
        self.accepted, self.accepted_label, self._carried = proposal, self._editor.label(), True
        self.clear_prompt()
        self._panel.show_propagation(self.volume() is not None)
        return changed

    def discard(self) -> None:
        """Esc: the points, the box and the proposal go (a propagation in progress stops: that Esc only)."""
        if self._propagation is not None and self._propagation.running:
            self.stop_propagation()
            return
        self.clear_prompt()

    def clear_prompt(self) -> None:
        """The points, the box and the proposal go, whatever runs (the picture is left, the model changed, the
        proposal accepted): a propagation in progress goes on."""
        self.latest.issue()  # a proposal on its way is not wanted
        self._points, self._box, self.proposal, self._press, self._dragging = [], None, None, None, False
        self.preview.clear()
        self._panel.show_iou(None)
        self.enable_keys()

    def remove_last_point(self) -> None:
        """Backspace: the last point goes; the proposal follows what is left."""
        if not self._points:
            if self._box is not None:
                self._box = None
                self.preview.set_box(None)
            self._reprompt()
            return
        self._points.pop()
        self._show_points()
        self._reprompt()

    def propagate(self, step: int) -> None:
        self._propagation_made().start(step, view=self.view, accepted=self.carried, volume=self.volume(),
                                       label=self.accepted_label)  # not one undone since

    def _propagation_made(self) -> Propagation:
        """The propagation, made on first use: it reports through the tool's own signals."""
        if self._propagation is None:
            from app.ui.controllers.smart_propagation import Propagation

            self._propagation = made = Propagation(
                self._state, worker=self.start_worker(), editor=self._editor, panel=self._panel,
                presenter=self._editor.presenter, tool_view=lambda: self.view, parent=self)
            made.message.connect(self.message)
            made.running_changed.connect(self.enable_keys)
            made.propagate_requested.connect(self.propagate_requested)
        return self._propagation

    @property
    def carried(self) -> ProposalReady | None:
        """The accepted proposal Propagate carries, while the mask still holds it in its class (most of its pixels:
        touched up with the brush it is still the object; undone, it is not — redo brings it back)."""
        return held(self.accepted, self.accepted_label, self._editor.mask)

    def _on_mask_changed(self, _mask: object) -> None:
        if self.accepted is None or (self._propagation is not None and self._propagation.running):
            return
        carried = self.carried is not None
        if carried != self._carried:  # an undo, or its redo (the panel's line of the last propagation stays else)
            self._carried = carried
            self._panel.show_propagation(carried and self.volume() is not None)
        self.enable_keys()

    @property
    def propagation(self) -> Propagation | None:
        return self._propagation

    def stop_propagation(self) -> None:
        if self._propagation is not None:
            self._propagation.stop()

    def _add_point(self, x: int, y: int, label: int, pressed: float, *, defer: bool = False) -> bool:
        from app.errors import SegLensError
        from app.inference.prompt.request import Point, check_prompt

        image = cast("PromptImage", self._image)
        point = Point(float(x), float(y), label)
        try:
            check_prompt([point], None, image.pixels.shape[:2])
        except SegLensError as exc:
            self._refuse(str(exc), defer=defer)
            return False
        if self.model_ready is not None and not self.model_ready.points and self._box is None:
            self._refuse(NEEDS_BOX, defer=defer)
            return False
        self._points.append(point)
        self._show_points()
        self._request(pressed)
        return True

    def _choose_class_under(self, x: float, y: float) -> None:
        """A new prompt's click on a part the mask gives a class: that class chosen, so Enter adds the proposal to
        the object clicked; on the background the chosen class stays."""
        mask = self._editor.mask
        row, col = round(y), round(x)
        if mask is not None and 0 <= row < mask.shape[0] and 0 <= col < mask.shape[1] and mask[row, col] > 0:
            self._panel.choose_label(int(mask[row, col]))

    def _refuse(self, line: str, *, defer: bool) -> None:
        if defer:
            self._refusal = line
        else:
            self.message.emit(line)

    def _reprompt(self, pressed: float | None = None) -> None:
        if self._points or self._box is not None:
            self._request(time.perf_counter() if pressed is None else pressed)
            return
        self.latest.issue()
        self.proposal = None
        self.preview.set_proposal(None)
        self._panel.show_iou(None)
        self.enable_keys()

    def _request(self, pressed: float) -> None:
        """Ask for the proposal of the prompt as it is now; a prefetch in flight for another picture stops."""
        from app.ui.state.prompt_messages import DecodeRequest

        image = self._current_image()
        worker = self.start_worker()
        self.latest_prefetch.issue()  # prefetches queued are replaced by the one made after this proposal
        worker.cancel_prefetch(keep=image.key)
        self.enable_keys()
        self.decode_requested.emit(DecodeRequest(self.latest.issue(), image, tuple(self._points), self._box,
                                                 pressed))

    def _show_points(self) -> None:
        self.preview.set_points([(p.x, p.y, p.label == 1) for p in self._points])

    def _on_proposal(self, ready: ProposalReady) -> None:
        if not self.latest.is_latest(ready.request_id) or self._image is None or ready.key != self._image.key:
            return
        self.proposal = ready
        self.preview.set_proposal(ready.mask, self._editor.class_rgb())
        self._panel.show_iou(ready.iou)
        self.enable_keys()
        ms = (time.perf_counter() - ready.pressed) * 1000 if ready.pressed else 0.0
        log.debug("proposal %d shown %.1f ms after the press (encoder %.1f ms, decoder %.1f ms)",
                  ready.request_id, ms, ready.encode_ms, ready.decode_ms)
        self.proposal_shown.emit(ready.request_id, ms)
        self._prefetch()

    def _recolour(self, _label: int) -> None:
        """Another class chosen: the proposal shown is previewed in its colour (Enter adds it there)."""
        if self.proposal is not None:
            self.preview.set_proposal(self.proposal.mask, self._editor.class_rgb())

    def _on_proposal_failed(self, failed: ProposalFailed) -> None:
        if self.latest.is_latest(failed.request_id):
            self.message.emit(failed.message)

    def _on_ready(self, ready: PromptReady) -> None:
        if ready.request_id != self._loads.value:
            return
        self.model_ready = ready
        self._panel.show_prompt_model(f"{ready.name} · {ready.where}" if ready.where else ready.name, ready.note)
        if self._image is not None:
            self._prefetch()

    def _on_load_failed(self, failed: PromptFailed) -> None:
        if failed.request_id == self._loads.value:
            self.message.emit(failed.message)

    def _prefetch(self) -> None:
        """Encode the picture edited (when not yet) and then the next ones, at low priority."""
        from app.ui.state.prompt_messages import PrefetchRequest

        if self._image is None or self.worker is None:
            return
        images = neighbours(cast("ViewResult", self._view), self.volume(), self._state.display_window, self._files,
                            files_ahead=PREFETCH_FILES)
        self.prefetch_requested.emit(PrefetchRequest(self.latest_prefetch.issue(), images,
                                                     first=self._current_image()))

    def _current_image(self) -> PromptImage:
        """The picture edited as shown now: through the reader's window of this moment (a preset or W chosen while
        the Smart tool is on is what the encoder must see: a new PromptKey, not the embedding of the old window)."""
        image, view = cast("PromptImage", self._image), self._view
        if view is not None:
            fresh = shown_image(view, self._state.display_window)
            if fresh.key != image.key:
                self._image = image = fresh
        return image

    def volume(self) -> Any:
        if self._files is None or self._view is None:
            return None
        return self._files.volume(str(self._view.path))

    def _key_actions(self, keys: QWidget) -> list[QAction]:
        """Enter / Shift+Enter / Esc / Backspace (and Alt+PgUp / Alt+PgDn: propagate) on the window, enabled only
        while they have something to do: the keys stay the other widgets' otherwise (no shortcut of the menus uses
        them)."""
        from PySide6.QtGui import QAction, QKeySequence
        from PySide6.QtWidgets import QApplication

        made = []
        for name, slot, shortcuts in (
                ("smart-accept", lambda: self.accept(), ("Return", "Enter")),
                ("smart-replace", lambda: self.accept(replace=True), ("Shift+Return", "Shift+Enter")),
                ("smart-discard", self.discard, ("Escape",)),
                ("smart-undo-point", self.remove_last_point, ("Backspace",)),
                ("smart-propagate-up", lambda: self.propagate(-1), ("Alt+PgUp",)),
                ("smart-propagate-down", lambda: self.propagate(1), ("Alt+PgDown",))):
            action = QAction(name, keys)
            action.setObjectName(name)
            action.setShortcuts([QKeySequence(k) for k in shortcuts])
            action.triggered.connect(lambda _checked=False, slot=slot: slot())
            action.setEnabled(False)
            keys.addAction(action)
            made.append(action)
        app = QApplication.instance()
        if isinstance(app, QApplication):  # a bound method: disconnected when the Smart tool goes
            app.focusChanged.connect(self.enable_keys)
        return made

    def enable_keys(self, *_focus: object) -> None:
        """The keys work only while they have something to do, and never while the reader types (Enter keeps a
        review note): the other widgets keep them otherwise. Also QApplication.focusChanged's slot."""
        running = self._propagation is not None and self._propagation.running
        enable_actions(self._actions, prompting=self.prompting, running=running,
                       can_propagate=not running and self.volume() is not None and self.carried is not None)


# -- what the tool reads from the reader and the mask -------------------------------------------------------

def shown_image(view: ViewResult, window: tuple[float, float] | None) -> PromptImage:
    """The picture as the reader sees it now: its key (path, frame, the display window of real values) and pixels."""
    from app.ui.state.prompt_messages import PromptImage, PromptKey

    window = window if view.high_range else None
    return PromptImage(PromptKey(str(view.path), view.frame, window), view.display_pixels, view.display_raw,
                       view.invert)


def box_edges(ax: float, ay: float, bx: float, by: float) -> tuple[float, float, float, float]:
    """The pixels between two pressed pixels (centres at whole numbers), as edges x0 ≤ x < x1."""
    x0, x1 = sorted((round(ax), round(bx)))
    y0, y1 = sorted((round(ay), round(by)))
    return float(x0), float(y0), float(x1 + 1), float(y1 + 1)


def typing() -> bool:
    """Whether the keyboard focus is in a text field (the review note, the file filter, a spin box)."""
    from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QLineEdit, QPlainTextEdit, QTextEdit

    return isinstance(QApplication.focusWidget(), QLineEdit | QTextEdit | QPlainTextEdit | QAbstractSpinBox)


def enable_actions(actions: list, *, prompting: bool, running: bool, can_propagate: bool) -> None:
    """The keys work only while they have something to do, and never while the reader types (Enter keeps a review
    note): the other widgets keep them otherwise."""
    typed = typing()
    for action in actions:
        name = action.objectName()
        action.setEnabled(not typed and (can_propagate if name.startswith("smart-propagate") else
                                         prompting or (running and name == "smart-discard")))


def neighbours(view: ViewResult, volume: Any, window: tuple[float, float] | None, files: FileList | None, *,
               files_ahead: int) -> tuple[PrefetchImage, ...]:
    """What to encode ahead: the next and previous slice of a volume (through the reader's window), else the next
    listed files (their own window: they are shown first through it)."""
    from app.ui.state.prompt_messages import PrefetchImage

    if volume is not None:
        window = window if view.high_range else None
        return tuple(PrefetchImage(str(view.path), k, volume, window, own_window=False)
                     for k in (view.frame + 1, view.frame - 1) if 0 <= k < volume.depth)
    if files is None:
        return ()
    paths = files.visible_paths()
    here = paths.index(str(view.path)) if str(view.path) in paths else len(paths)
    after = [p for p in paths[here + 1:] if files.volume(p) is None]
    return tuple(PrefetchImage(p) for p in after[:files_ahead])


def prompt_device(model: ModelSummary | None) -> str:
    """Where the prompt model runs: on the GPU the window's model really runs on, else on the CPU."""
    info = model.info if model is not None else None
    if info is not None and info.on_gpu:
        return "cuda" if info.device_id is None else f"cuda:{info.device_id}"
    return "cpu"


def held(accepted: ProposalReady | None, label: int, mask: np.ndarray | None) -> ProposalReady | None:
    """`accepted` while `mask` still holds it in `label` (most of its pixels: touched up with the brush it is still
    the object; undone, it is not), else None."""
    if accepted is None or mask is None:
        return None
    area = int(accepted.mask.sum())
    return accepted if not area or int((mask[accepted.mask] == label).sum()) * 2 >= area else None
