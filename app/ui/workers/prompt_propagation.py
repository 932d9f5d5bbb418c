"""The prompt worker's propagation through a volume: app.runs.prompts.propagate.propagate fed the slices as the viewer
displays them (through the reader's window), keyed as the Smart tool keys them, so the embeddings of the slices the
reader prompted or prefetched are reused and those the propagation encodes serve the reader's later clicks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.inference.prompt.request import PromptModel
    from app.runs.prompts.propagate import PropagatedSlice, PropagationEnd
    from app.ui.state.prompt_messages import PromptKey, PropagateRequest


def propagation(model: PromptModel, request: PropagateRequest, *,
                stop: Callable[[], bool]) -> Iterator[PropagatedSlice | PropagationEnd]:
    """One PropagatedSlice per slice given a mask, then one PropagationEnd (an unreadable slice ends it too)."""
    from app.errors import SegLensError, one_line
    from app.io.images import read_slice
    from app.runs.prompts.propagate import PropagatedSlice, PropagationEnd, propagate
    from app.ui.state.prompt_messages import PromptImage, PromptKey

    try:  # the volume may have changed on disk since it was opened (a file still being copied, truncated)
        high_range = read_slice(request.volume, request.start).raw is not None
    except (SegLensError, OSError) as exc:
        yield PropagationEnd(request.start, one_line(exc, most=300, first=True))
        return

    def key(index: int) -> PromptKey:
        return PromptKey(request.path, index, request.window if high_range else None)

    def pixels(index: int) -> np.ndarray:
        decoded = read_slice(request.volume, index)
        return PromptImage(key(index), decoded.display(), decoded.raw, decoded.invert).encoder_pixels()

    last = request.start
    try:
        for item in propagate(model, pixels, start=request.start, mask=request.mask, low_res=request.low_res,
                              step=request.step, count=request.count, key=key, stop=stop):
            last = item.index if isinstance(item, PropagatedSlice) else last
            yield item
    except (SegLensError, OSError) as exc:  # a slice that cannot be read or run: the slices before it stay
        yield PropagationEnd(last, one_line(exc, most=300, first=True))
