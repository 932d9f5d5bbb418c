"""ViewState without Qt: request ids and the stale-result filter, the LRU cache, model generations, the display-window
rule, window/level work from the display thread, and the overlay style. No PySide6 imported here: the state room
is Qt-free."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from conftest import REPO

from app.ui.state.messages import ModelSummary, ViewKey, ViewRequest, ViewResult, WindowedImage
from app.ui.state.view_state import (
    CACHE_SIZE,
    DisplayMode,
    LatestRequest,
    LruCache,
    OverlayStyle,
    ViewState,
    dragged_window,
)

RAW = object()  # stands for the float32 values of a high-range picture: ViewState never looks inside


def view(path: str = "a.png", frame: int = 0, *, window=None, raw: bool = False, generation: int = 1) -> ViewResult:
    return ViewResult(ViewKey(path, frame), result=None, display_pixels=None, display_mask=None, display_scale=1.0,
                      display_raw=RAW if raw else None, window=window, generation=generation)


def ready_state() -> ViewState:
    """A state with a loaded model (generation 1)."""
    state = ViewState()
    generation = state.begin_model()
    assert state.model_ready(generation, ModelSummary(spec=None, info=None))
    return state


def windowed(request, window=None) -> WindowedImage:
    return WindowedImage(request.request_id, request.key, window or request.window or (0.0, 1.0), image=None)


# -- request ids -------------------------------------------------------------------------------------------------

def test_latest_request_issues_increasing_ids_and_only_the_newest_is_latest():
    latest = LatestRequest()
    first, second = latest.issue(), latest.issue()
    assert (first, second) == (1, 2) and latest.value == 2
    assert latest.is_latest(2) and not latest.is_latest(1)


def test_latest_request_loses_no_id_across_threads():
    latest = LatestRequest()
    workers = [threading.Thread(target=lambda: [latest.issue() for _ in range(2000)]) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert latest.value == 8000


def test_a_request_carries_the_newest_id_the_key_and_the_generation():
    state = ready_state()
    key = ViewKey("a.png", 2)
    assert state.select(key) is None  # nothing cached yet
    assert state.request(key) == ViewRequest(state.latest.value, key, generation=1)
    assert state.wanted == key


def test_no_request_while_no_model_is_ready():
    state = ViewState()
    assert state.select(ViewKey("a.png")) is None
    assert state.request(ViewKey("a.png")) is None
    state.begin_model()
    assert state.request(ViewKey("a.png")) is None  # loading: asked again once the model is ready


def test_stale_results_are_cached_but_not_shown():
    state = ready_state()
    state.select(ViewKey("a.png"))
    request_a = state.request(ViewKey("a.png"))
    state.select(ViewKey("b.png"))
    request_b = state.request(ViewKey("b.png"))
    assert not state.latest.is_latest(request_a.request_id)  # what the worker checks before running it
    result_a = view("a.png")
    assert state.keep(result_a) and not state.should_show(request_a.request_id, result_a)
    assert state.cache.peek(ViewKey("a.png")) is result_a  # stepping back to it costs nothing
    result_b = view("b.png")
    assert state.keep(result_b) and state.should_show(request_b.request_id, result_b)


def test_selecting_a_cached_picture_makes_requests_in_flight_stale():
    state = ready_state()
    state.select(ViewKey("a.png"))
    state.keep(view("a.png"))
    state.select(ViewKey("b.png"))
    request_b = state.request(ViewKey("b.png"))
    assert state.select(ViewKey("a.png")) is not None  # cached: shown at once, no request
    assert not state.latest.is_latest(request_b.request_id)  # the worker skips b if it is still queued
    assert not state.should_show(request_b.request_id, view("b.png"))


def test_a_result_for_another_frame_is_not_shown():
    state = ready_state()
    state.select(ViewKey("a.dcm", 1))
    request = state.request(ViewKey("a.dcm", 1))
    assert not state.should_show(request.request_id, view("a.dcm", 0))
    assert state.should_show(request.request_id, view("a.dcm", 1))
    assert state.is_wanted_path("a.dcm") and not state.is_wanted_path("b.dcm")


# -- cache -------------------------------------------------------------------------------------------------------

def test_lru_cache_evicts_the_least_recently_used():
    cache: LruCache[str, int] = LruCache(3)
    for name in "abc":
        cache.put(name, ord(name))
    assert cache.get("a") == ord("a")  # a is now the newest
    cache.put("d", 4)
    assert cache.oldest_first() == ["c", "a", "d"] and cache.get("b") is None
    assert cache.peek("c") == ord("c") and cache.oldest_first()[0] == "c"  # peek does not make it newer
    cache.put("c", 5)  # replacing makes it newest
    assert cache.oldest_first() == ["a", "d", "c"] and len(cache) == 3


def test_the_view_cache_holds_eight_results_oldest_out_first():
    state = ready_state()
    assert CACHE_SIZE == 8
    for index in range(CACHE_SIZE):
        state.keep(view(f"{index}.png"))
    state.select(ViewKey("0.png"))  # looking at 0 again makes it the newest
    state.keep(view("8.png"))
    assert ViewKey("1.png") not in state.cache.oldest_first() and ViewKey("0.png") in state.cache.oldest_first()
    assert len(state.cache) == CACHE_SIZE and state.cache.oldest_first()[0] == ViewKey("2.png")


# -- model generations -------------------------------------------------------------------------------------------

def test_a_new_model_clears_the_cache_and_drops_results_of_the_old_one():
    state = ready_state()
    state.select(ViewKey("a.png"))
    old_request = state.request(ViewKey("a.png"))
    state.keep(view("a.png"))
    generation = state.begin_model()
    assert generation == 2 and state.model is None and len(state.cache) == 0
    assert not state.latest.is_latest(old_request.request_id)  # the worker skips what was queued for the old model
    late = view("a.png", generation=1)
    assert not state.keep(late) and len(state.cache) == 0
    assert not state.should_show(state.latest.value, late)


def test_a_superseded_model_is_ignored_and_a_new_one_shows_all_classes():
    state = ViewState()
    first = state.begin_model()
    second = state.begin_model()
    state.set_overlay(hidden={1, 2})
    assert not state.model_ready(first, ModelSummary(spec="old", info=None)) and state.model is None
    assert not state.model_failed(first) and state.model_failed(second)
    assert state.model_ready(second, ModelSummary(spec="new", info=None))
    assert state.model.spec == "new" and state.overlay.hidden == frozenset()


# -- display window ----------------------------------------------------------------------------------------------

def test_a_new_image_starts_at_its_own_window_another_frame_keeps_the_readers():
    state = ready_state()
    state.show(view("a.dcm", 0, window=(40.0, 400.0), raw=True))
    assert state.display_window == (40.0, 400.0) and state.first_window_request() is None  # the worker's pixels
    state.set_window((-600.0, 1500.0))
    state.show(view("a.dcm", 1, window=(50.0, 350.0), raw=True))
    assert state.display_window == (-600.0, 1500.0)
    request = state.first_window_request()
    assert request.key == ViewKey("a.dcm", 1) and request.window == (-600.0, 1500.0) and request.raw is RAW
    state.show(view("b.dcm", 0, window=(300.0, 1500.0), raw=True))
    assert state.display_window == (300.0, 1500.0) and state.first_window_request() is None


def test_an_8_bit_picture_has_no_window_work():
    state = ready_state()
    state.show(view("a.png"))
    assert state.display_window is None and not state.windowing_applies
    assert state.set_window((40.0, 400.0)) is None and state.auto_window() is None
    assert state.drag_window(10, 10) is None and state.first_window_request() is None


def test_the_images_own_window_and_an_automatic_one():
    state = ready_state()
    state.show(view("a.dcm", window=(40.0, 400.0), raw=True))
    state.set_window((0.0, 100.0))
    assert state.set_window(None).window == (40.0, 400.0) and state.display_window == (40.0, 400.0)
    auto = state.auto_window()
    assert auto.window is None  # the display thread chooses it (percentiles)
    assert state.accept_windowed(windowed(auto, (12.0, 34.0))) and state.display_window == (12.0, 34.0)


def test_dragging_changes_width_horizontally_and_level_vertically():
    assert dragged_window((40.0, 400.0), 256, 0) == (40.0, 800.0)
    assert dragged_window((40.0, 400.0), 0, 128) == (240.0, 400.0)
    assert dragged_window((40.0, 400.0), -10_000, 0)[1] == 1.0  # never narrower than 1
    state = ready_state()
    state.show(view("a.dcm", window=(40.0, 400.0), raw=True))
    first = state.drag_window(256, 0)
    second = state.drag_window(256, 0)  # from the window asked for, not the one drawn
    assert first.window == (40.0, 800.0) and second.window == (40.0, 1600.0) == state.display_window
    assert second.request_id > first.request_id and state.latest_window.is_latest(second.request_id)


def test_window_work_newer_than_the_pixels_drawn_is_drawn_older_is_dropped():
    state = ready_state()
    state.show(view("a.dcm", window=(40.0, 400.0), raw=True))
    first, second, third = (state.drag_window(10, 0) for _ in range(3))
    assert state.accept_windowed(windowed(second))  # a fast drag: drawn, so the screen follows the mouse…
    assert state.display_window == third.window  # …but it does not pull the window back under the mouse
    assert not state.accept_windowed(windowed(first))  # older than what is drawn
    assert not state.accept_windowed(windowed(second))  # already drawn
    assert state.accept_windowed(windowed(third)) and state.display_window == third.window


def test_window_work_for_a_picture_no_longer_shown_is_dropped():
    state = ready_state()
    state.show(view("a.dcm", window=(40.0, 400.0), raw=True))
    for_a = state.drag_window(50, 0)
    state.show(view("b.dcm", window=(0.0, 100.0), raw=True))
    assert not state.accept_windowed(windowed(for_a))
    state.show(view("a.dcm", window=(40.0, 400.0), raw=True))  # back to a: the old work is still not wanted
    assert not state.accept_windowed(windowed(for_a)) and state.display_window == (40.0, 400.0)


def test_window_work_after_the_viewer_was_cleared_is_dropped():
    state = ready_state()
    state.show(view("a.dcm", window=(40.0, 400.0), raw=True))
    pending = state.drag_window(50, 0)
    state.clear_screen()  # the next picture failed to open
    assert not state.accept_windowed(windowed(pending))
    assert state.shown is not None  # the window rule still compares with it


# -- overlay style -----------------------------------------------------------------------------------------------

def test_overlay_style_changes_one_field_at_a_time():
    state = ViewState()
    assert state.overlay == OverlayStyle(DisplayMode.FILLED, 0.5, True, frozenset())
    style = state.set_overlay(mode=DisplayMode.CONTOUR, hidden={3})
    assert style == state.overlay and style.hidden == frozenset({3}) and style.opacity == 0.5
    assert DisplayMode("contour") is DisplayMode.CONTOUR  # settings store the value
    with pytest.raises(TypeError):
        state.set_overlay(colour="red")


# -- no Qt, no numpy ---------------------------------------------------------------------------------------------

def test_view_state_and_messages_import_without_qt_or_numpy():
    probe = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('PySide6', 'shiboken6', 'numpy'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import app.ui.state.view_state, app.ui.state.messages\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_lru_cache_keeps_within_its_byte_budget_and_always_the_newest():
    class Heavy:
        def __init__(self, nbytes):
            self.nbytes = nbytes

    cache: LruCache[str, Heavy] = LruCache(8, budget=100)
    for key, size in (("a", 40), ("b", 40), ("c", 40)):
        cache.put(key, Heavy(size))
    assert cache.oldest_first() == ["b", "c"]  # 120 > 100: the oldest went
    cache.put("huge", Heavy(500))
    assert cache.oldest_first() == ["huge"]  # over budget alone, but the newest stays
