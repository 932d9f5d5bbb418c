"""What the viewer shows, as plain Python: no Qt, no numpy, testable without a window (tests/ui/test_view_state.py).

The window tells a ViewState what happened (a picture was selected, a result or a model arrived, the reader dragged
the window/level) and asks it what to do; widgets only draw. It is the one source of truth for request ids: its
`LatestRequest` holders are shared with the worker threads, which skip a queued request the window no longer wants.

Room to grow without a rewrite: a slice or a tile is one more field of `ViewKey`; probability, uncertainty and
difference views are more `DisplayMode` values; a second model's result (to compare) or an editable mask layer is
one more field beside `shown`, with its own cache keyed like this one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:  # messages loads when first used: its dataclasses cost ~4 ms before the window could show
    import numpy as np

    from app.inference.decide.tuning import Judgement
    from app.inference.decide.verdict import Verdict
    from app.ui.state.messages import (
        ModelSummary,
        RetuneRequest,
        Tuning,
        ViewKey,
        ViewRequest,
        ViewResult,
        Window,
        WindowedImage,
        WindowRequest,
    )

CACHE_SIZE = 8  # results kept for stepping back and forth; each holds display pixels and a full-size mask
CACHE_BYTES = 2 << 30  # … and at most this much memory (a 15000² RGB image alone holds ~900 MB): the oldest go
DRAG_STEPS = 256  # a drag across 256 screen pixels changes the window by its own width, as clinical viewers do

K = TypeVar("K")
V = TypeVar("V")


class DisplayMode(str, Enum):
    """How the mask is drawn: filled regions or outlines (over a probability or uncertainty layer: outlines of the
    thresholded mask on the heatmap). The layer itself is `Tuning.layer`."""

    FILLED = "filled"
    CONTOUR = "contour"


@dataclass(frozen=True)
class OverlayStyle:
    mode: DisplayMode = DisplayMode.FILLED
    opacity: float = 0.5
    visible: bool = True
    hidden: frozenset[int] = frozenset()  # class indices not painted


class LatestRequest:
    """The newest request id, written on the GUI thread and read on a worker thread.

    A lock rather than a bare int: the GIL happens to make an int safe today, the lock makes it the contract.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0

    @property
    def value(self) -> int:
        with self._lock:
            return self._value

    def issue(self) -> int:
        """A new id, which makes every earlier one stale."""
        with self._lock:
            self._value += 1
            return self._value

    def is_latest(self, request_id: int) -> bool:
        with self._lock:
            return request_id == self._value


class LruCache(Generic[K, V]):
    """At most `size` entries; reading one makes it the newest; adding beyond `size` drops the oldest."""

    def __init__(self, size: int, *, budget: int | None = None) -> None:
        """At most `size` entries and, with `budget`, at most that many bytes (an entry's `nbytes`); the newest
        entry is always kept."""
        self._size = size
        self._budget = budget
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def peek(self, key: K) -> V | None:
        """The entry without making it the newest."""
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        if self._budget is not None:
            while len(self._entries) > 1 and sum(getattr(v, "nbytes", 0) for v in self._entries.values()) > \
                    self._budget:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def oldest_first(self) -> list[K]:
        """The keys, the next one to be dropped first."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def dragged_window(window: Window, dx: float, dy: float) -> Window:
    """Right-drag as in clinical viewers: horizontal = width (contrast), vertical = level (brightness)."""
    center, width = window
    step = max(width, 1.0) / DRAG_STEPS
    return center + dy * step, max(1.0, width + dx * step)


class ViewState:
    """What is wanted, what is shown, and how: the window's state without its widgets."""

    def __init__(self, *, cache_size: int = CACHE_SIZE) -> None:
        self.latest = LatestRequest()  # shared with the inference worker
        self.latest_window = LatestRequest()  # shared with the display (window/level) worker
        self.cache: LruCache[ViewKey, ViewResult] = LruCache(cache_size, budget=CACHE_BYTES)
        self.generation = 0
        self.model: ModelSummary | None = None
        self.wanted: ViewKey | None = None  # selected by the reader; may still be computing
        self.shown: ViewResult | None = None  # accepted for display (its pixels may still be windowing)
        self.on_screen: ViewResult | None = None  # whose pixels the viewer holds now
        self.display_window: Window | None = None
        self._drawn_window = 0  # id of the window work whose pixels are drawn; older answers are dropped
        self.overlay = OverlayStyle()
        self.latest_tune = LatestRequest()  # shared with the inference worker: only the newest retune is done
        self._tuning: Tuning | None = None  # None: the model's own settings, the mask layer
        self._judged: dict[str, tuple[Judgement, float | None]] = {}  # path -> judgement, threshold it was made at
        self.ious: dict[str, float] = {}  # path -> mean IoU against its reference (Run on all, or seen)
        self.agreements: dict[str, float] = {}  # path -> model B's mean IoU against model A (pictures seen)

    # -- model -----------------------------------------------------------------------------------------

    def begin_model(self) -> int:
        """A model starts loading: the generation it will carry. Results of older models are no longer wanted."""
        self.generation += 1
        self.model = None
        self.cache.clear()
        self.latest.issue()  # queued requests were for the old model: the worker skips them
        return self.generation

    def model_ready(self, generation: int, summary: ModelSummary) -> bool:
        """Take `summary` unless a newer model was asked for meanwhile; a new model shows all of its classes."""
        if generation != self.generation:
            return False
        self.model = summary
        self.overlay = replace(self.overlay, hidden=frozenset())
        self._judged.clear()
        self.ious.clear()
        self.agreements.clear()
        return True

    def invalidate_views(self) -> None:
        """Every result made so far is out of date (a second model joined or left): new requests, a new
        generation, an empty cache; the model itself stays."""
        self.generation += 1
        self.cache.clear()
        self.latest.issue()
        self.latest_tune.issue()

    def model_failed(self, generation: int) -> bool:
        """Whether a failure is about the model being loaded (not a superseded one)."""
        return generation == self.generation

    # -- pictures --------------------------------------------------------------------------------------

    def select(self, key: ViewKey) -> ViewResult | None:
        """The reader wants `key`: its cached result, or None (then `request` it). Earlier requests become stale."""
        self.wanted = key
        self.latest.issue()
        return self.cache.get(key)

    def request(self, key: ViewKey) -> ViewRequest | None:
        """A request for `key`, or None while no model is ready (the window asks again when one is)."""
        if self.model is None:
            return None
        from app.ui.state.messages import ViewRequest

        return ViewRequest(self.latest.value, key, self.generation, self.tuning)

    def keep(self, view: ViewResult) -> bool:
        """Cache a result of the current model (even one no longer wanted: the reader may step back to it);
        False for an older model's, which is dropped."""
        if view.generation != self.generation:
            return False
        self.cache.put(view.key, view)
        return True

    def should_show(self, request_id: int, view: ViewResult) -> bool:
        """The stale-result filter: only the answer to the newest request, for the picture still wanted."""
        return (view.generation == self.generation and self.latest.is_latest(request_id)
                and view.key == self.wanted)

    def is_wanted_path(self, path: str) -> bool:
        return self.wanted is not None and self.wanted.path == path

    def show(self, view: ViewResult) -> None:
        """`view` becomes the one shown. A new image starts at its own window; another frame keeps the reader's."""
        if self.shown is None or self.shown.key.image != view.key.image:
            self.display_window = view.window
        self.shown = view
        self._drawn_window = self.latest_window.issue()  # window work for what was shown before is not wanted

    def clear_screen(self) -> None:
        """The viewer was emptied (the picture wanted failed). `shown` stays: the window rule still compares
        with it. Window work in flight for it is no longer wanted."""
        self.on_screen = None
        self._drawn_window = self.latest_window.issue()

    # -- window / level --------------------------------------------------------------------------------

    @property
    def windowing_applies(self) -> bool:
        """The picture shown has real values and a window to put them through."""
        return self.shown is not None and self.shown.high_range and self.display_window is not None

    def first_window_request(self) -> WindowRequest | None:
        """For a picture just shown: work for the display thread when the reader's window is not the picture's
        own (the worker rendered that one already), else None."""
        # windowing_applies: a picture is shown
        if not self.windowing_applies or self.display_window == cast("ViewResult", self.shown).window:
            return None
        return self._window_request(self.display_window)

    def set_window(self, window: Window | None) -> WindowRequest | None:
        """The reader chose a window (None: the picture's own); the work for the display thread, if any."""
        if self.shown is None or not self.shown.high_range:
            return None
        self.display_window = window or self.shown.window
        return self._window_request(self.display_window)

    def drag_window(self, dx: float, dy: float) -> WindowRequest | None:
        """Right-drag by (dx, dy) screen pixels, from the last window asked for (not the last one drawn)."""
        if not self.windowing_applies:
            return None
        return self.set_window(dragged_window(cast("Window", self.display_window), dx, dy))  # applies: it has one

    def auto_window(self) -> WindowRequest | None:
        """An automatic window (percentiles): the display thread chooses it and reports it with the pixels."""
        if self.shown is None or not self.shown.high_range:
            return None
        return self._window_request(None)

    def accept_windowed(self, windowed: WindowedImage) -> bool:
        """True when `windowed` should be drawn: for the picture shown and newer than the pixels drawn. During a
        fast drag that is usually not the newest request (more came in while it was made): drawing it lets the
        screen follow the mouse. Only the newest request's answer sets the window (an automatic one is known only
        then); an older one must not pull the window back under the dragging mouse."""
        if self.shown is None or windowed.key != self.shown.key or windowed.request_id <= self._drawn_window:
            return False
        self._drawn_window = windowed.request_id
        if self.latest_window.is_latest(windowed.request_id):
            self.display_window = windowed.window
        return True

    def _window_request(self, window: Window | None) -> WindowRequest:
        from app.ui.state.messages import WindowRequest

        view = cast("ViewResult", self.shown)  # its callers checked: a picture with real values is shown
        return WindowRequest(self.latest_window.issue(), view.key, cast("np.ndarray", view.display_raw), window,
                             view.invert)

    # -- overlay ---------------------------------------------------------------------------------------

    def set_overlay(self, **changes: Any) -> OverlayStyle:
        """Change some of mode, opacity, visible, hidden; returns the new style."""
        if "hidden" in changes:
            changes["hidden"] = frozenset(changes["hidden"])
        self.overlay = replace(self.overlay, **changes)
        return self.overlay

    # -- tuning: threshold, score limit, layer; verdicts -----------------------------------------------

    @property
    def tuning(self) -> Tuning:
        if self._tuning is None:
            from app.ui.state.messages import Tuning

            self._tuning = Tuning()
        return self._tuning

    def set_tuning(self, **changes: Any) -> RetuneRequest | None:
        """Change some of threshold, score_limit, layer, class_index; the retune of the picture shown, if any."""
        self._tuning = replace(self.tuning, **changes)
        return self.retune(self.shown) if self.shown is not None else None

    def is_tuned(self, view: ViewResult) -> bool:
        """`view` was decided and drawn with the current tuning."""
        return view.tuning == self.tuning

    def retune(self, view: ViewResult) -> RetuneRequest | None:
        """Work for the worker: `view` decided and drawn again with the current tuning (None if it already is).
        Earlier retunes become stale."""
        if self.is_tuned(view):
            return None
        from app.ui.state.messages import RetuneRequest

        return RetuneRequest(self.latest_tune.issue(), view, self.tuning)

    def should_show_retuned(self, request_id: int, view: ViewResult) -> bool:
        return (view.generation == self.generation and self.latest_tune.is_latest(request_id)
                and view.key == self.wanted and self.is_tuned(view))

    def judged(self, path: str, judgement: Judgement | None, threshold: float | None) -> None:
        """Remember a file's verdict (from its view or from Run on all) and the pixel threshold it was made at."""
        if judgement is not None:
            self._judged[path] = (judgement, threshold)

    def badge(self, path: str) -> tuple[Verdict | None, bool]:
        """(the file's verdict at the current score limit, whether it was decided at another pixel threshold and
        so may be out of date); (None, False) when it has none."""
        entry = self._judged.get(path)
        if entry is None or self.model is None:
            return None, False
        from app.inference.decide.tuning import score_rule

        judgement, threshold = entry
        rule = score_rule(self.model.spec)
        # no limit of the reader's: the model's own, not the one the file happened to be judged at (a Run on all
        # made at a dragged limit, then Reset)
        limit = self.tuning.score_limit if self.tuning.score_limit is not None or rule is None else rule.score_above
        return judgement.at_limit(rule, limit), threshold != self.tuning.threshold

    def judged_paths(self) -> list[str]:
        return list(self._judged)

    def folder_scores(self) -> list[float]:
        """The image scores of every judged file (the histogram's data)."""
        return [j.score for j, _ in self._judged.values() if j.score is not None]

    def worst_first(self, paths: list[str], by: str = "ious") -> list[str]:
        """`paths` by IoU against the reference (`by` "ious") or by model B's agreement ("agreements"), worst
        first; paths without one keep their order, at the end."""
        values = getattr(self, by)
        measured = sorted((p for p in paths if p in values), key=lambda p: values[p])
        return measured + [p for p in paths if p not in values]

    def measured(self, view: ViewResult) -> None:
        """Keep a picture's IoU against its reference and model B's agreement, for sorting the list."""
        if view.scored is not None and view.scored.metrics is not None:
            self.ious[str(view.path)] = view.scored.metrics.iou
        if view.agreement is not None:
            self.agreements[str(view.path)] = view.agreement.iou
