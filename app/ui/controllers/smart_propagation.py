"""Propagate ▲ / ▼ of the Smart tool: the proposal accepted on a volume's slice carried slice by slice through the
volume on the prompt worker (app.runs.prompts.propagate), with progress in the edit panel, stoppable (Esc or Stop).

Each propagated slice's mask becomes that slice's correction: merged into its starting mask (its earlier
correction, else the model's mask of that slice) in the accepted class as one step, and saved as the slice's own
correction (app.runs.review.log: `<name>_slice0007_mask.png`), so editing that slice starts from it and its reference
shows it. A slice whose model mask the window has not made yet waits in `pending` while the inference worker makes
it in the background (app.ui.workers.worker_slice_masks, behind the reader's requests, nothing shown changes); it
is merged and saved as soon as it arrives, or when the reader shows that slice first. Where it is saved was decided
when it was given (opening other files meanwhile does not move it). Closing the window waits for those still
waiting (`close`); a slice whose model mask cannot be made is said, by slice, in the panel and the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, Signal

from app.spelling import counted

if TYPE_CHECKING:
    import numpy as np
    from PySide6.QtCore import SignalInstance

    from app.io.volumes import Volume
    from app.runs.review.log import Correction
    from app.ui.state.messages import ViewResult
    from app.ui.state.prompt_messages import PropagationDone, ProposalReady, SlicePropagated
    from app.ui.state.slice_mask_messages import SliceMaskFailed, SliceMaskReady
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.edit_panel import EditPanel
    from app.ui.workers.prompt_worker import PromptWorker
    from app.ui.workers.worker_slice_masks import SliceMasks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Given:
    """A propagated slice's mask waiting for that slice's model mask: painted in `label`, saved at `correction`."""

    mask: np.ndarray  # bool, the slice's size
    label: int
    correction: Correction


class Corrections(Protocol):
    """What a propagation needs of the editor (app.ui.controllers.editor.Editor): where a slice's correction goes,
    the one saved there earlier, whether a volume is listed, its `saved` signal, and the inference worker's
    slice masks (None: a slice waits until it is shown)."""

    @property
    def slice_masks(self) -> SliceMasks | None: ...

    @property
    def saved(self) -> SignalInstance: ...

    def correction(self, path: str, frame: int, frame_count: int) -> Correction: ...

    def read_earlier(self, correction: Correction, shape: Any) -> np.ndarray | None: ...

    def listed(self, path: str) -> bool: ...


class Propagation(QObject):
    masks_requested = Signal(object)  # slice_mask_messages.SliceMasksRequest, to the inference worker
    masks_now = Signal(object)  # SliceMasksNow: blocks until the worker has made every slice queued (closing)
    message = Signal(str)  # one line for the status bar
    running_changed = Signal()  # started or ended: the Smart tool's keys follow
    propagate_requested = Signal(object)  # prompt_messages.PropagateRequest, to the prompt worker

    def __init__(self, state: ViewState, *, worker: PromptWorker, editor: Corrections, panel: EditPanel,
                 presenter: Any, tool_view: Callable[[], ViewResult | None], parent: QObject) -> None:
        """`tool_view`: the picture the Smart tool is on now (the panel's line shows while it is that volume)."""
        super().__init__(parent)
        self._state, self._worker, self._editor, self._panel, self._tool_view = state, worker, editor, panel, tool_view
        self.running = False
        self._request_id = 0
        self._done = 0
        self._label = 1
        self._depth = 1
        self._volume: Volume | None = None
        self._correction: Correction | None = None  # where the start slice's goes; the others' differ by frame
        self._given: set[int] = set()  # the slices this propagation gave a mask
        self._end: PropagationDone | None = None
        self.pending: dict[tuple[str, int], list[Given]] = {}  # (path, slice) -> its masks, in the order given
        self.unsaved: dict[tuple[str, int], str] = {}  # (path, slice) -> why its model mask could not be made
        self.saved: dict[int, str] = {}  # slice -> the correction written (tests, the panel)
        worker.propagated.connect(self._on_slice)
        worker.propagation_ended.connect(self._on_end)
        presenter.overlay_shown.connect(self._on_shown)
        self._masks = masks = editor.slice_masks
        if masks is not None:
            self.masks_requested.connect(masks.make)
            self.masks_now.connect(masks.make_now, Qt.ConnectionType.BlockingQueuedConnection)
            masks.ready.connect(self._on_mask)
            masks.failed.connect(self._on_mask_failed)

    def start(self, step: int, *, view: ViewResult | None, accepted: ProposalReady | None, volume: Any,
              label: int) -> bool:
        """Carry `accepted` (the proposal the Smart tool's `view` accepted into class `label`, still held by the
        mask) towards the next (`step` 1) or previous (−1) slices of `volume`."""
        from app.ui.state.prompt_messages import PropagateRequest

        if self.running:
            return False
        if view is None or accepted is None or volume is None:
            self.message.emit("Propagate carries a proposal accepted on a volume's slice: accept one first (Enter)")
            return False
        self._request_id += 1
        self._done, self._label, self._depth = 0, label, volume.depth  # the class it was added to
        self._volume, self._correction = volume, self._editor.correction(str(view.path), view.frame, volume.depth)
        self.saved, self._given, self._end = {}, set(), None
        window = self._state.display_window if view.high_range else None
        self.running = True
        self.running_changed.emit()
        self._panel.show_propagation(True, running=True, text="propagating " + ("▼" if step > 0 else "▲") + " …")
        self.propagate_requested.emit(PropagateRequest(self._request_id, str(view.path), volume, view.frame,
                                                        accepted.mask, accepted.low_res, step, volume.depth,
                                                        window))
        return True

    def close(self) -> None:
        """The window closes (the prompt thread has stopped): the slices it sent are taken, and those still waiting
        for their model masks are made now on the inference thread — the window waits, as for its other jobs —
        then merged and saved. Any that cannot be are said in the log, by slice."""
        QCoreApplication.sendPostedEvents(self, QEvent.Type.MetaCall)  # the prompt worker's last slices
        masks = self._masks
        if self.pending and masks is not None and masks.thread().isRunning():
            from app.ui.state.slice_mask_messages import SliceMasksNow

            log.info("closing: %s waiting for their model masks", counted(len(self.pending), "propagated slice"))
            self.masks_now.emit(SliceMasksNow(self._request_id))  # returns once the worker has made them
            QCoreApplication.sendPostedEvents(self, QEvent.Type.MetaCall)  # merged and saved here
        from app.logs import private

        for path in sorted({path for path, _ in self.pending}):
            slices = ", ".join(str(frame + 1) for p, frame in sorted(self.pending) if p == path)
            why = next((self.unsaved[key] for key in sorted(self.unsaved) if key[0] == path), "")  # names the file
            private(log, logging.WARNING, path, f"closing: the propagated masks of slices {slices} are not saved "
                    f"({why or f'{path}: their model masks were not made'})")

    def stop(self) -> None:
        if self.running:
            self._worker.stop_propagation(self._request_id)

    def _on_slice(self, item: SlicePropagated) -> None:
        if item.request_id != self._request_id:
            return
        found = item.slice
        self._done += 1
        self._given.add(found.index)
        iou = "" if found.iou != found.iou else f", predicted IoU {found.iou:.2f}"
        self._panel.show_propagation(True, running=True, text=f"propagating: slice {found.index + 1}{iou}")
        self._give(item.path, found.index, found.mask, self._label)

    def _on_end(self, done: PropagationDone) -> None:
        if done.request_id != self._request_id:
            return
        self.running = False
        self.running_changed.emit()
        self._end = done
        text = self._line(done)
        self._panel.show_propagation(True, text=text)
        self.message.emit(f"Propagation: {text}")

    def _line(self, done: PropagationDone) -> str:
        """What the propagation did, and whether its slices are all saved yet: "24 slices given the mask, all
        saved; the object ended at slice 45 (area 3 px < 20)"."""
        waiting = sorted(frame for frame in self._given if (done.path, frame) in self.pending)
        failed = [frame for frame in waiting if (done.path, frame) in self.unsaved]
        given = f"{self._done} slice{'' if self._done == 1 else 's'} given the mask"
        if not waiting:
            saved = ", all saved"
        elif self._masks is None:
            saved = f" ({len(waiting)} saved once shown: their model masks are not made yet)"
        elif failed:
            why = self.unsaved[(done.path, failed[0])]
            saved = (f", {len(failed)} not saved (slice {failed[0] + 1}: {why}; saved once shown)"
                     + (f", {len(waiting) - len(failed)} being saved" if len(waiting) > len(failed) else ""))
        else:
            saved = f", {self._done - len(waiting)} saved, {len(waiting)} being saved…"
        return f"{given}{saved}; {done.end.reason}"

    def _update_line(self, path: str) -> None:
        """The panel's line again once a waiting slice of this propagation is saved (or refused)."""
        done = self._end
        if done is None or done.path != path:
            return
        text = self._line(done)
        view = self._tool_view()
        if view is not None and str(view.path) == path:  # the tool still on that volume: its line shows
            self._panel.show_propagation(True, text=text)
        if ", all saved" in text:
            self.message.emit(f"Propagation: {text}")

    def _give(self, path: str, frame: int, mask: np.ndarray, label: int) -> None:
        """Slice `frame` given `mask`: merged and saved now when its starting mask is known, else it waits (and
        its model mask is asked for)."""
        correction = self._correction if self._correction is not None else self._editor.correction(
            path, frame, self._depth)
        given = Given(mask, label, replace(correction, frame=frame))
        key = (path, frame)
        if key in self.pending:  # still waiting for its model mask: this one goes on top of the earlier one
            self.pending[key].append(given)
            return
        starting = self._starting(path, frame, given.correction)
        if starting is not None:
            self._merge(path, frame, starting, [given])
            return
        self.pending[key] = [given]
        if self._masks is not None and self._volume is not None:
            from app.ui.state.slice_mask_messages import SliceMasksRequest

            self.masks_requested.emit(SliceMasksRequest(self._request_id, path, self._volume, (frame,),
                                                        self._state.tuning.threshold))

    def _on_mask(self, ready: SliceMaskReady) -> None:
        """A waiting slice's model mask, made in the background: merged and saved (unless shown meanwhile)."""
        key = (ready.path, ready.frame)
        givens = self.pending.pop(key, None)
        if givens is None:
            return
        self.unsaved.pop(key, None)
        earlier = self._editor.read_earlier(givens[0].correction, ready.mask.shape)
        self._merge(ready.path, ready.frame, earlier if earlier is not None else ready.mask, givens)
        self._update_line(ready.path)

    def _on_mask_failed(self, failed: SliceMaskFailed) -> None:
        """A waiting slice's model mask could not be made: it stays waiting (merged once shown), and is said."""
        key = (failed.path, failed.frame)
        if key not in self.pending:
            return
        self.unsaved[key] = failed.message
        self.message.emit(f"slice {failed.frame + 1}: the propagated mask is not saved yet: {failed.message}")
        self._update_line(failed.path)

    def _on_shown(self, path: Any) -> None:
        shown = self._state.shown
        if shown is None or str(shown.path) != str(path):
            return
        key = (str(path), shown.frame)
        givens = self.pending.get(key)
        starting = None if givens is None else self._starting(str(path), shown.frame, givens[0].correction)
        if givens is not None and starting is not None:
            del self.pending[key]
            self.unsaved.pop(key, None)
            self._merge(str(path), shown.frame, starting, givens)
            self._update_line(str(path))

    def _merge(self, path: str, frame: int, starting: np.ndarray, givens: list[Given]) -> None:
        """`starting` with each given mask painted in its class (one step), saved as the slice's correction."""
        from app.errors import SegLensError
        from app.ui.state.mask_edit import MaskEdit

        edit = MaskEdit(starting, max_steps=1)
        changed = [edit.paint_mask(given.mask, given.label) is not None for given in givens]
        if not any(changed):
            return
        try:
            written = givens[-1].correction.save(edit.mask)
        except (SegLensError, OSError) as exc:
            self.message.emit(f"slice {frame + 1}: the propagated mask was not saved: {exc}")
            return
        self.saved[frame] = str(written)
        if self._editor.listed(path):  # its review state goes with the list it was opened in
            self._editor.saved.emit(path, str(written))

    def _starting(self, path: str, frame: int, correction: Correction) -> np.ndarray | None:
        """The slice's earlier correction, else the model's mask of that slice when it is known, else None."""
        from app.ui.state.messages import ViewKey

        view = self._state.cache.peek(ViewKey(path, frame))
        mask = None if view is None else view.result.mask
        earlier = self._editor.read_earlier(correction, None if mask is None else mask.shape)
        return earlier if earlier is not None else mask
