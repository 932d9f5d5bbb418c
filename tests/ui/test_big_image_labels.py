"""A big image through a model smaller than it: the viewer shows it without making the image-sized mask — the
overview's labels at the display size, the legend's counts from them, the detail tiles window by window."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QRectF

from tests.ui.test_detail import render

TIMEOUT = 30_000


def test_a_big_image_is_shown_from_labels_kept_at_the_model_s_size(qtbot, make_main_window, models, tmp_path):
    rng = np.random.default_rng(11)
    small = rng.integers(0, 256, (40, 1000, 3), dtype=np.uint8)
    image = cv2.resize(small, (9000, 360), interpolation=cv2.INTER_CUBIC)  # 9000 px: the overview is 8192
    path = tmp_path / "wide.png"
    Image.fromarray(image).save(path)
    model = models("fixed_rgb_classes")
    model.with_suffix(".yaml").write_text("input:\n  resize: stretch\npostprocess:\n  min_area: 30\n")
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([path])
    view = window.state.shown
    labels = view.result.labels
    assert view.display_scale > 1 and view.display_mask.shape == view.display_pixels.shape[:2]
    assert not labels.ready  # before: the worker made the 9000×360 mask up front, and the legend counted it
    window.viewer.actual_size()
    render(window.viewer, QRectF(600, 100, 64, 64), 1.0)  # 1:1: full-resolution tiles
    assert window.viewer.detail.painted_tiles >= 1 and not labels.ready  # made window by window
    exact = view.result.class_pixels()  # the image-sized mask, made now
    assert view.class_counts.sum() == exact.sum() == 9000 * 360
    assert np.abs(view.class_counts - exact).max() <= 0.001 * exact.sum()  # the legend's estimate
    tile = window.viewer.detail.tile("mask", 1, 0)
    assert (tile.width(), tile.height()) == (512, 360)
    block = np.frombuffer(tile.constBits(), np.uint8).reshape(360, tile.bytesPerLine())[:, :512]
    assert (block != view.result.mask[:, 512:1024]).mean() < 0.002  # the tile is the full mask there


def test_a_big_image_compared_with_itself_shows_the_same_labels_on_both_sides(qtbot, make_main_window, models,
                                                                              tmp_path):
    """Model B's agreement makes both image-sized masks: A's display copy then comes from its mask, as B's does
    (decided at the display size, A's would differ from B's on label edges though the models agree: IoU 1)."""
    rng = np.random.default_rng(12)
    image = cv2.resize(rng.integers(0, 256, (40, 1000, 3), dtype=np.uint8), (9000, 360),
                       interpolation=cv2.INTER_CUBIC)
    path = tmp_path / "wide.png"
    Image.fromarray(image).save(path)
    model = models("fixed_rgb_classes")
    model.with_suffix(".yaml").write_text("input:\n  resize: stretch\npostprocess:\n  min_area: 30\n")
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([path])
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(model)
    view = window.state.shown
    assert view.display_scale > 1 and view.agreement.iou == pytest.approx(1.0)
    np.testing.assert_array_equal(view.display_mask, view.display_mask_b)
    np.testing.assert_array_equal(view.class_counts, view.result.class_pixels())  # exact: the mask was made
