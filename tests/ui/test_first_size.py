"""A first start (no saved geometry) fits the screen: the 1500×900 default put the side panel off a 1280×720 screen."""

from __future__ import annotations

from app.ui.settings import DEFAULT_SIZE, first_size


def test_the_default_shrinks_to_a_smaller_screen_and_only_then():
    assert first_size((1280, 680)) == (1280, 680)
    assert first_size((1920, 1040)) == DEFAULT_SIZE
    assert first_size((1600, 700)) == (1500, 700)
    assert first_size(None) == DEFAULT_SIZE


def test_a_first_window_fits_the_screen_it_opens_on(make_main_window):
    window = make_main_window(load=False)  # offscreen: an 800×800 screen, smaller than the default
    free = window.screen().availableGeometry()
    assert window.width() <= free.width() and window.height() <= free.height()
    assert (window.width(), window.height()) != DEFAULT_SIZE
