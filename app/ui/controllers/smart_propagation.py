"""Propagate ▲ / ▼ of the Smart tool: the proposal accepted on a volume's slice carried slice by slice through the
volume on the prompt worker (app.runs.prompt_propagate), with progress in the edit panel, stoppable (Esc or Stop).

Each propagated slice's mask becomes that slice's correction: merged into its starting mask (its earlier
correction, else the model's mask of that slice) in the accepted class as one step, and saved as the slice's own
correction (app.runs.review: `<name>_slice0007_mask.png`), so editing that slice starts from it and its reference
shows it. A slice whose model mask is not computed yet is merged and saved when it is first shown.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

if TYPE_CHECKING:
    import numpy as np

    from app.ui.controllers.editor import Editor
    from app.ui.controllers.smart import Smart
    from app.ui.state.prompt_messages import PropagationDone, SlicePropagated
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.edit_panel import EditPanel

log = logging.getLogger(__name__)


class Propagation(QObject):
    def __init__(self, smart: Smart, state: ViewState, editor: Editor, panel: EditPanel, presenter: Any) -> None:
        super().__init__(smart)
        self._smart, self._state, self._editor, self._panel = smart, state, editor, panel
        self.running = False
        self._request_id = 0
        self._done = 0
        self._label = 1
        self._depth = 1
        self.pending: dict[tuple[str, int], tuple[np.ndarray, int]] = {}  # (path, slice) -> (mask, class)
        self.saved: dict[int, str] = {}  # slice -> the correction written (tests, the panel)
        worker = smart.start_worker()
        worker.propagated.connect(self._on_slice)
        worker.propagation_ended.connect(self._on_end)
        presenter.overlay_shown.connect(self._on_shown)

    def start(self, step: int) -> bool:
        """Carry the accepted proposal towards the next (`step` 1) or previous (−1) slices."""
        from app.ui.state.prompt_messages import PropagateRequest

        smart = self._smart
        view, accepted, volume = smart.view, smart.accepted, smart.volume()
        if self.running:
            return False
        if view is None or accepted is None or volume is None:
            smart.message.emit("Propagate carries a proposal accepted on a volume's slice: accept one first (Enter)")
            return False
        self._request_id += 1
        self._done, self._label, self._depth = 0, self._editor.label(), volume.depth
        self.saved = {}
        window = self._state.display_window if view.high_range else None
        self.running = True
        smart.enable_keys()
        self._panel.show_propagation(True, running=True, text="propagating " + ("▼" if step > 0 else "▲") + " …")
        smart.propagate_requested.emit(PropagateRequest(self._request_id, str(view.path), volume, view.frame,
                                                        accepted.mask, accepted.low_res, step, volume.depth,
                                                        window))
        return True

    def close(self) -> None:
        """The window closes: propagated slices never shown were not saved, and are said to be lost (in the log)."""
        if self.pending:
            log.warning("%d propagated slice mask(s) were never shown and are not saved", len(self.pending))

    def stop(self) -> None:
        if self.running and self._smart.worker is not None:
            self._smart.worker.stop_propagation(self._request_id)

    def _on_slice(self, item: SlicePropagated) -> None:
        if item.request_id != self._request_id:
            return
        found = item.slice
        self._done += 1
        iou = "" if found.iou != found.iou else f", predicted IoU {found.iou:.2f}"
        self._panel.show_propagation(True, running=True, text=f"propagating: slice {found.index + 1}{iou}")
        self._merge(item.path, found.index, found.mask, self._label)

    def _on_end(self, done: PropagationDone) -> None:
        if done.request_id != self._request_id:
            return
        self.running = False
        self._smart.enable_keys()
        waiting = sum(1 for path, _ in self.pending if path == done.path)
        later = f" ({waiting} saved once shown: their model masks are not made yet)" if waiting else ""
        text = f"{self._done} slice(s) given the mask{later}; {done.end.reason}"
        self._panel.show_propagation(True, text=text)
        self._smart.message.emit(f"Propagation: {text}")

    def _on_shown(self, path: Any) -> None:
        shown = self._state.shown
        if shown is None or str(shown.path) != str(path):
            return
        entry = self.pending.pop((str(path), shown.frame), None)
        if entry is not None:
            self._merge(str(path), shown.frame, *entry)

    def _merge(self, path: str, frame: int, mask: np.ndarray, label: int) -> None:
        """The slice's starting mask with `mask` painted in `label` (one step), saved as its correction."""
        from app.errors import SegLensError
        from app.ui.state.mask_edit import MaskEdit

        starting = self._starting(path, frame)
        if starting is None:
            self.pending[(path, frame)] = (mask, label)
            return
        edit = MaskEdit(starting, max_steps=1)
        if edit.paint_mask(mask, label) is None:
            return
        correction = self._editor.correction(path, frame, self._depth)
        try:
            written = correction.save(edit.mask)
        except (SegLensError, OSError) as exc:
            self._smart.message.emit(f"slice {frame + 1}: the propagated mask was not saved: {exc}")
            return
        self.saved[frame] = str(written)
        self._editor.saved.emit(path, str(written))

    def _starting(self, path: str, frame: int) -> np.ndarray | None:
        """The slice's earlier correction, else the model's mask of that slice when it is known, else None."""
        from app.ui.state.messages import ViewKey

        view = self._state.cache.peek(ViewKey(path, frame))
        mask = None if view is None else view.result.mask
        earlier = self._editor.earlier_correction(path, frame, self._depth, None if mask is None else mask.shape)
        return earlier if earlier is not None else mask
