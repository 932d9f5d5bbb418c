"""Edit mode: correct the shown mask with a brush, an eraser and flood fill, undo/redo, and save it as the image's
corrected mask in the review folder.

The mask is edited as numpy (app.ui.state.mask_edit.MaskEdit); each brush segment copies only the rectangle it changed
into the overlay's indexed image, and the viewer converts that image once (~1.5 ms at 1080p). Saving writes
`<name>_mask.png` (`x.jpg_mask.png`) into the review folder (app.runs.review.log: never over an input or the model's
outputs; atomic) and marks the image "corrected" in the review log. The overlay keeps showing what the *model*
said; the saved correction is the image's reference from then on (metrics and the difference layer show what was
corrected), and editing again starts from it. Leaving the image or edit mode with unsaved changes saves them: a
correction is never dropped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QObject, Qt, Signal

if TYPE_CHECKING:
    import numpy as np

    from app.runs.review.log import Correction
    from app.ui.controllers.presenter import Presenter
    from app.ui.controllers.smart import Smart
    from app.ui.state.mask_edit import MaskEdit
    from app.ui.state.messages import ModelSummary, ViewResult
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.edit_panel import EditPanel
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.overlay import OverlayImage
    from app.ui.widgets.viewer import ImageViewer
    from app.ui.workers.worker_slice_masks import SliceMasks

log = logging.getLogger(__name__)


class Editor(QObject):
    started = Signal(object)  # path (str; object: a QString drops a file name's non-UTF-8 bytes)
    stopped = Signal(object)  # path
    saved = Signal(object, object)  # image path, corrected mask file
    refused = Signal(str)  # why edit mode could not start, or a save failed (one line)
    mask_changed = Signal(object)  # the edited mask (numpy), after a stroke, a fill, an undo or a redo

    def __init__(self, state: ViewState, *, viewer: ImageViewer, presenter: Presenter, panel: EditPanel,
                 files: FileList | None = None, slice_masks: SliceMasks | None = None,
                 parent: QObject | None = None) -> None:
        """`slice_masks`: the inference worker's (propagated slices never shown are saved through it)."""
        super().__init__(parent)
        self.slice_masks = slice_masks
        self._state = state
        self._viewer = viewer
        self._presenter = presenter
        self._panel = panel
        self._edit: MaskEdit | None = None  # of the picture being edited
        self._view: ViewResult | None = None
        self._overlay: OverlayImage | None = None
        self._last: tuple[float, float] | None = None
        self._files = files
        self._smart: Smart | None = None  # the Smart tool (controllers/smart.py), made when first chosen
        # (path, frame: None for a one-frame picture) -> where its correction goes: set by the window
        self.destination: Callable[[str, int | None], Correction] | None = None
        viewer.edit_pressed.connect(self._pressed)
        viewer.edit_moved.connect(self._moved)
        viewer.edit_released.connect(self._released)
        viewer.edit_right_pressed.connect(lambda x, y: self._pressed(x, y, None, negative=True))
        panel.tool_changed.connect(self._on_tool)
        viewer.brush_wheel.connect(lambda step: panel.set_radius(panel.radius() + step * max(1, panel.radius() // 8)))
        panel.radius_changed.connect(self._on_radius)
        panel.undo_requested.connect(self.undo)
        panel.redo_requested.connect(self.redo)
        panel.save_requested.connect(self.save)
        panel.done_requested.connect(self.stop)

    @property
    def active(self) -> bool:
        return self._edit is not None

    @property
    def mask(self):
        """The mask being edited (numpy, image size), None outside edit mode."""
        return self._edit.mask if self._edit is not None else None

    def toggle(self) -> None:
        self.stop() if self.active else self.start()

    def start(self) -> bool:
        from app.ui.state.mask_edit import MaskEdit
        from app.ui.widgets.overlay import OverlayImage

        view = self._state.on_screen
        problem = _cannot_edit(view)
        if problem or view is None:  # no picture: a problem said
            self.refused.emit(problem or "")
            return False
        model = cast("ModelSummary", self._state.model)  # a picture is shown: a model made it
        edit = MaskEdit(self._starting_mask(view))
        self._view, self._edit = view, edit
        self._overlay = overlay = OverlayImage(edit.mask, model.spec.classes)
        self._panel.set_classes(model.spec.classes)
        self._panel.show()
        self._viewer.set_editing(self._panel.radius())
        self._presenter.edit_overlay(overlay)
        if self._panel.tool() == "smart":
            self.smart.begin(view)
        self.started.emit(str(view.path))
        return True

    def stop(self) -> None:
        """Leave edit mode (saving unsaved changes first)."""
        edit, shown = self._edit, self._view  # set together by start
        if edit is None or shown is None:
            return
        path = str(shown.path)
        if self._smart is not None:
            self._smart.end()
        if edit.changed:
            self.save()
        self._edit = self._overlay = None
        self._viewer.set_editing(None)
        self._panel.hide()
        self._presenter.edit_overlay(None)
        view, self._view = self._state.cache.peek(shown.key) or shown, None
        if self._state.on_screen is not None and self._state.on_screen.key == view.key:
            self._presenter.update_decision(view)
        self.stopped.emit(path)

    # -- painting --------------------------------------------------------------------------------------

    def _pressed(self, x: float, y: float, modifiers, *, negative: bool = False) -> None:
        edit = self._edit
        if edit is None:  # not active
            return
        if self._panel.tool() == "smart":
            self.smart.pressed(x, y, modifiers, negative=negative)
            return
        if negative:  # the right button is window/level's outside the Smart tool
            return
        label = 0 if modifiers & Qt.KeyboardModifier.ShiftModifier or self._panel.tool() == "eraser" \
            else self._panel.label()
        if modifiers & Qt.KeyboardModifier.ControlModifier or self._panel.tool() == "fill":
            self._repaint(edit.fill((x, y), label))
            self._last = None
            self._changed()
            return
        edit.begin_stroke(label, self._panel.radius())
        self._last = (x, y)
        self._repaint(edit.segment((x, y), (x, y)))

    def _moved(self, x: float, y: float) -> None:
        if self._smart is not None and self._panel.tool() == "smart":
            self._smart.moved(x, y)
            return
        if self._edit is None or self._last is None:
            return
        self._repaint(self._edit.segment(self._last, (x, y)))
        self._last = (x, y)

    def _released(self) -> None:
        if self._smart is not None and self._panel.tool() == "smart":
            self._smart.released()
            return
        if self._edit is not None and self._last is not None:
            self._edit.end_stroke()
            self._last = None
            self._changed()

    # -- the Smart tool ----------------------------------------------------------------------------------

    @property
    def smart(self) -> Smart:
        """The Smart tool's controller (its prompt thread starts with it)."""
        if self._smart is None:
            from PySide6.QtWidgets import QWidget

            from app.ui.controllers.smart import Smart

            window = self.parent()
            self._smart = Smart(self._state, editor=self, viewer=self._viewer, panel=self._panel, files=self._files,
                                keys=window if isinstance(window, QWidget) else None, parent=self)
            self._smart.message.connect(self.refused)
        return self._smart

    def smart_tool(self) -> None:
        """S: the Smart tool (edit mode starts when it is not on)."""
        self._panel.set_tool("smart")
        if not self.active:
            self.start()

    def apply_proposal(self, mask, *, replace_in=None) -> bool:
        """An accepted proposal into the chosen class, as one undo step (replacing the class inside `replace_in`);
        whether the mask changed."""
        if self._edit is None:
            return False
        box = self._edit.paint_mask(mask, self._panel.label(), replace_in=replace_in)
        self._repaint(box)
        if box is not None:
            self._changed()
        return box is not None

    def class_rgb(self) -> tuple[int, int, int]:
        """The chosen class's overlay colour (the proposal is previewed in it)."""
        from app.io.render import class_colors

        model = self._state.model
        colors, _ = class_colors(model.spec.classes if model is not None else ())
        return cast("tuple[int, int, int]", tuple(int(v) for v in colors[self._panel.label()]))

    def shutdown(self) -> None:
        """On close: an edit in progress is saved (closing leaves the picture, as stepping away does), then the
        prompt thread stops (when the Smart tool made one)."""
        self.stop()
        if self._smart is not None:
            self._smart.shutdown()

    def _on_tool(self, tool: str) -> None:
        if self._edit is None or self._view is None:
            return
        if tool == "smart":
            self.smart.begin(self._view)
        elif self._smart is not None:
            self._smart.end()

    def undo(self) -> None:
        if self._edit is not None:
            self._repaint(self._edit.undo())
            self._changed()

    def redo(self) -> None:
        if self._edit is not None:
            self._repaint(self._edit.redo())
            self._changed()

    def _changed(self) -> None:
        edit = cast("MaskEdit", self._edit)  # after a stroke, fill, undo or redo of the edit
        self._panel.set_history(edit.can_undo, edit.can_redo)
        self.mask_changed.emit(edit.mask)

    def _repaint(self, box) -> None:
        if box is not None and self._overlay is not None:
            self._overlay.update_region(box)
            self._presenter.repaint_overlay()

    def _on_radius(self, radius: int) -> None:
        if self.active:
            self._viewer.set_brush_radius(radius)

    def _starting_mask(self, view):
        """The image's earlier correction when there is one (a correction goes on), else the model's mask."""
        earlier = self.earlier_correction(str(view.path), view.frame, view.frame_count, view.result.mask.shape)
        return earlier if earlier is not None else view.result.mask

    def correction(self, path: str, frame: int, frame_count: int) -> Correction:
        """Where the correction of `path`'s `frame` goes (a slice's own: never another slice's). A volume's slice
        is a one-frame picture of its own (read_slice): its volume's depth counts."""
        from app.runs.review.log import picture_frame

        volume = self._files.volume(path) if self._files is not None else None
        frame_count = max(frame_count, volume.depth if volume is not None else 1)
        destination = cast("Callable[[str, int | None], Correction]", self.destination)  # set by the window
        return destination(path, picture_frame(frame, frame_count))

    def earlier_correction(self, path: str, frame: int, frame_count: int, shape) -> np.ndarray | None:
        """The correction saved earlier for that picture (of `shape`, when given), None when there is none usable."""
        if self.destination is None:
            return None
        return self.read_earlier(self.correction(path, frame, frame_count), shape)

    def read_earlier(self, correction: Correction, shape) -> np.ndarray | None:
        """The correction saved earlier at `correction` (of `shape`, when given), None when there is none usable."""
        from app.io.references import read_reference

        found = correction.find()
        try:
            model = cast("ModelSummary", self._state.model)  # editing: a model made the mask
            earlier = read_reference(found, model.spec.label_count) if found else None
        except Exception as exc:  # an unreadable earlier correction: start from the model's mask, say so
            from app.logs import file_ref, log_exception

            log_exception(log, logging.WARNING, f"the earlier correction {file_ref(found)} is unreadable", exc)
            log.debug("%s is %s", file_ref(found), found)
            earlier = None
        return earlier if earlier is not None and (shape is None or earlier.shape == shape) else None

    def listed(self, path: str) -> bool:
        """`path` is a volume of the files listed now (a saved correction's review-log state goes with the list)."""
        return self._files is None or self._files.volume(path) is not None

    def label(self) -> int:
        """The class chosen in the panel."""
        return self._panel.label()

    @property
    def presenter(self) -> Presenter:
        return self._presenter

    # -- saving ----------------------------------------------------------------------------------------

    def save(self) -> str | None:
        """Write the corrected mask; the file written, or None (nothing to save, or refused: `refused` says why)."""
        if self._edit is None or self.destination is None:
            return None
        from app.errors import SegLensError

        view = cast("ViewResult", self._view)  # set with the edit
        try:
            written = self.correction(str(view.path), view.frame, view.frame_count).save(self._edit.mask)
        except (SegLensError, OSError) as exc:
            self.refused.emit(f"{view.path.name}: the corrected mask was not saved: {exc}")
            return None
        self._edit.changed = False
        from app.logs import file_ref

        log.info("corrected mask saved: %s", file_ref(written))  # the name is the image's: patients' names
        log.debug("%s is %s", file_ref(written), written)
        self.saved.emit(str(view.path), str(written))
        return str(written)


def _cannot_edit(view) -> str | None:
    if view is None:
        return "Nothing to edit: no picture is shown"
    if view.result.instances is not None:  # corrected one by one (controllers/instances.py)
        return "Instances are corrected in the Instances list: Delete, Add box, Redraw"
    if view.display_mask is None or view.result.labels is None:
        return "Only a segmentation mask can be edited"
    if view.display_scale != 1.0:
        return f"{view.path.name} is shown downscaled: editing needs the full-resolution display"
    return None
