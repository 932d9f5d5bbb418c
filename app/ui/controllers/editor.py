"""Edit mode: correct the shown mask with a brush, an eraser and flood fill, undo/redo, and save it as the image's
corrected mask in the review folder.

The mask is edited as numpy (app.ui.state.mask_edit.MaskEdit); each brush segment copies only the rectangle it changed
into the overlay's indexed image, and the viewer converts that image once (~1.5 ms at 1080p). Saving writes
`<name>_mask.png` (`x.jpg_mask.png`) into the review folder (app.runs.review: never over an input or the model's
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
    from app.runs.review import Correction
    from app.ui.controllers.presenter import Presenter
    from app.ui.state.mask_edit import MaskEdit
    from app.ui.state.messages import ModelSummary, ViewResult
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.edit_panel import EditPanel
    from app.ui.widgets.overlay import OverlayImage
    from app.ui.widgets.viewer import ImageViewer

log = logging.getLogger(__name__)


class Editor(QObject):
    started = Signal(object)  # path (str; object: a QString drops a file name's non-UTF-8 bytes)
    stopped = Signal(object)  # path
    saved = Signal(object, object)  # image path, corrected mask file
    refused = Signal(str)  # why edit mode could not start, or a save failed (one line)
    mask_changed = Signal(object)  # the edited mask (numpy), after a stroke, a fill, an undo or a redo

    def __init__(self, state: ViewState, *, viewer: ImageViewer, presenter: Presenter, panel: EditPanel,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._viewer = viewer
        self._presenter = presenter
        self._panel = panel
        self._edit: MaskEdit | None = None  # of the picture being edited
        self._view: ViewResult | None = None
        self._overlay: OverlayImage | None = None
        self._last: tuple[float, float] | None = None
        # (path, frame: None for a one-frame picture) -> where its correction goes: set by the window
        self.destination: Callable[[str, int | None], Correction] | None = None
        viewer.edit_pressed.connect(self._pressed)
        viewer.edit_moved.connect(self._moved)
        viewer.edit_released.connect(self._released)
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
        self.started.emit(str(view.path))
        return True

    def stop(self) -> None:
        """Leave edit mode (saving unsaved changes first)."""
        edit, shown = self._edit, self._view  # set together by start
        if edit is None or shown is None:
            return
        path = str(shown.path)
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

    def _pressed(self, x: float, y: float, modifiers) -> None:
        edit = self._edit
        if edit is None:  # not active
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
        if self._edit is None or self._last is None:
            return
        self._repaint(self._edit.segment(self._last, (x, y)))
        self._last = (x, y)

    def _released(self) -> None:
        if self._edit is not None and self._last is not None:
            self._edit.end_stroke()
            self._last = None
            self._changed()

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
        if self.destination is None:
            return view.result.mask
        from app.io.references import read_reference

        path = self.destination(str(view.path), _frame(view)).find()  # a slice's own: never another slice's
        try:
            earlier = read_reference(path, self._state.model.spec.label_count) if path else None
        except Exception as exc:  # an unreadable earlier correction: start from the model's mask, say so
            from app.logs import file_ref, log_exception

            log_exception(log, logging.WARNING, f"the earlier correction {file_ref(path)} is unreadable", exc)
            log.debug("%s is %s", file_ref(path), path)
            earlier = None
        return earlier if earlier is not None and earlier.shape == view.result.mask.shape else view.result.mask

    # -- saving ----------------------------------------------------------------------------------------

    def save(self) -> str | None:
        """Write the corrected mask; the file written, or None (nothing to save, or refused: `refused` says why)."""
        if self._edit is None or self.destination is None:
            return None
        from app.errors import SegLensError

        view = cast("ViewResult", self._view)  # set with the edit
        try:
            written = self.destination(str(view.path), _frame(view)).save(self._edit.mask)
        except (SegLensError, OSError) as exc:
            self.refused.emit(f"{view.path.name}: the corrected mask was not saved: {exc}")
            return None
        self._edit.changed = False
        from app.logs import file_ref

        log.info("corrected mask saved: %s", file_ref(written))  # the name is the image's: patients' names
        log.debug("%s is %s", file_ref(written), written)
        self.saved.emit(str(view.path), str(written))
        return str(written)


def _frame(view: ViewResult) -> int | None:
    """The frame a picture's correction is kept under (a volume's slice has its own; None: a one-frame picture)."""
    from app.runs.review import picture_frame

    return picture_frame(view.frame, view.frame_count)


def _cannot_edit(view) -> str | None:
    if view is None:
        return "Nothing to edit: no picture is shown"
    if view.display_mask is None or view.result.labels is None:
        return "Only a segmentation mask can be edited"
    if view.display_scale != 1.0:
        return f"{view.path.name} is shown downscaled: editing needs the full-resolution display"
    return None
