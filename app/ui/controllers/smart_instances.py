"""The Smart tool on an instance model's picture: a click on an object (or a box dragged around it) becomes a new
instance of the class chosen in the instance list — the prompt model's mask cropped to its box for a segment model,
the mask's box for a detect model, the mask's least-area rotated box for an oriented-box model.

No second prompt machinery: the prompt is asked of the mask Smart tool's own worker (app.ui.controllers.smart: its
thread, the prompt model chosen in the edit panel, grabCut when none loads — a box then, as for masks), one proposal
per click or box. The instance made goes back to the instance controller (`found`), which adds it through its
InstanceBook: undo, the list, the overlay, the verdict judged on corrections and the exports all see it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from PySide6.QtCore import QRectF

    from app.inference.model.spec import ModelSpec
    from app.ui.controllers.smart import Smart
    from app.ui.state.messages import ViewKey, ViewResult
    from app.ui.state.prompt_messages import ProposalFailed, ProposalReady
    from app.ui.state.view_state import ViewState
    from app.ui.workers.prompt_worker import PromptWorker


def instance_shape(spec: ModelSpec) -> str:
    """What an instance of `spec`'s model is drawn as: "mask" (a segment head), "rotated" (obb) or "box"."""
    if spec.output.protos_name is not None:
        return "mask"
    return "rotated" if spec.detector is not None and spec.detector.head.task == "obb" else "box"


class SmartInstances(QObject):
    found = Signal(object, object)  # ViewKey, Instance: the picture asked about and the instance its prompt made
    message = Signal(str)  # one line for the status bar (nothing found, a refused prompt)

    def __init__(self, state: ViewState, *, smart: Callable[[], Smart], parent: QObject | None = None) -> None:
        """`smart`: the mask Smart tool (made on first use), whose worker and prompt model answer."""
        super().__init__(parent)
        self._state, self._smart = state, smart
        self._wired: PromptWorker | None = None
        # the prompt in flight: its request id, the picture, the class and the shape of the instance to make
        self._asked: tuple[int, ViewKey, int, str] | None = None

    def ask(self, view: ViewResult, class_index: int, start: tuple[float, float], drawn: QRectF | None, *,
            zoom: float) -> None:
        """A press at `start` released with the box `drawn` (image pixels; None or under a few screen pixels at
        `zoom`: a click, the pixel pressed a positive point): the proposal asked of the prompt worker."""
        from app.inference.prompt.request import Box, Point
        from app.ui.controllers.smart import DRAG_PX, box_edges, shown_image
        from app.ui.state.prompt_messages import DecodeRequest

        model = self._state.model
        if model is None:
            return
        smart = self._smart()
        self._wire(smart.start_worker())
        points: tuple[Point, ...] = ()
        box: Box | None = None
        if drawn is None or max(drawn.width(), drawn.height()) * max(zoom, 1e-6) < DRAG_PX:
            points = (Point(float(round(start[0])), float(round(start[1]))),)  # a click: a positive point
        else:
            box = Box(*box_edges(drawn.left(), drawn.top(), drawn.right(), drawn.bottom()))
        request_id = smart.latest.issue()  # the worker decodes the newest of the Smart tool's requests
        self._asked = (request_id, view.key, class_index, instance_shape(model.spec))
        image = shown_image(view, self._state.display_window)
        smart.decode_requested.emit(DecodeRequest(request_id, image, points, box, time.perf_counter()))

    @property
    def asking(self) -> bool:
        return self._asked is not None

    def _wire(self, worker: PromptWorker) -> None:
        if worker is not self._wired:
            self._wired = worker
            worker.proposal.connect(self._on_proposal)
            worker.proposal_failed.connect(self._on_failed)

    def _on_proposal(self, ready: ProposalReady) -> None:
        from app.ui.state.instance_edits import prompted_instance

        asked, model = self._asked, self._state.model
        if asked is None or ready.request_id != asked[0] or model is None:
            return
        self._asked = None
        _, key, class_index, shape = asked
        classes = model.spec.classes
        name = classes[class_index].name if class_index < len(classes) else f"class {class_index}"
        made = prompted_instance(class_index, name, ready.mask, shape=shape)
        if made is None:
            self.message.emit("The Smart tool found no object there: click inside it, or drag a box around it")
            return
        self.found.emit(key, made)

    def _on_failed(self, failed: ProposalFailed) -> None:
        if self._asked is not None and failed.request_id == self._asked[0]:
            self._asked = None
            self.message.emit(failed.message)
