"""The right-hand panel fits the window in every state a reader meets: nothing cut on the right (a title, a button,
the help text, the colour bar), at 1280×720 and at the window's default size."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import stripes
from PIL import Image
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QScrollArea, QWidget

from app.ui.settings import DEFAULT_SIZE
from tests.dicom_factory import write_series

TIMEOUT = 20_000
SIZES = ((1280, 720), DEFAULT_SIZE)


def settle() -> None:
    for _ in range(3):  # a layout request posts the next one (the scroll area after the panel)
        QApplication.sendPostedEvents()
        QApplication.processEvents()


def clipped(window) -> list[str]:
    """Every visible widget of the side panel that does not fit: outside the scroll area's viewport or its parent
    horizontally, or narrower than its text needs (a label without word wrap, a button, a check box)."""
    panel = window.panel
    area = panel.parentWidget().parentWidget()
    assert isinstance(area, QScrollArea)
    viewport = area.viewport()
    problems = []
    for widget in panel.findChildren(QWidget):
        if not widget.isVisible() or widget.isWindow():
            continue
        name = f"{type(widget).__name__} {getattr(widget, 'text', lambda: '')()!r:.40}" \
            if isinstance(widget, QLabel | QAbstractButton) else type(widget).__name__
        left = widget.mapTo(viewport, QPoint(0, 0)).x()
        if left < 0 or left + widget.width() > viewport.width():
            problems.append(f"{name}: x {left}..{left + widget.width()} outside the viewport 0..{viewport.width()}")
        parent = widget.parentWidget()
        if parent is not None and (widget.x() < 0 or widget.x() + widget.width() > parent.width()):
            problems.append(f"{name}: x {widget.x()}..{widget.x() + widget.width()} outside its parent "
                            f"{type(parent).__name__} 0..{parent.width()}")
        squeezable = isinstance(widget, QLabel) and (widget.wordWrap() or not widget.text())
        if isinstance(widget, QLabel | QAbstractButton) and not squeezable and \
                widget.width() < widget.minimumSizeHint().width():
            problems.append(f"{name}: {widget.width()} px wide, its text needs {widget.minimumSizeHint().width()}")
    return problems


def fits_at_every_size(window) -> None:
    for width, height in SIZES:
        window.resize(width, height)
        settle()
        assert window.width() == width
        problems = clipped(window)
        assert not problems, f"at {width}×{height}:\n" + "\n".join(problems)


@pytest.fixture
def folder(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    image = np.zeros((60, 80), np.uint8)
    image[:, 40:] = 255  # binary_logits finds the right half
    Image.fromarray(image).save(images / "case1.png")
    return images


def shown(qtbot, make_main_window, model, inputs):
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([inputs])
    return window


def test_edit_mode_fits(qtbot, make_main_window, models, folder):
    window = shown(qtbot, make_main_window, models("binary_logits"), folder)
    window.reviewer.mark("corrected")  # the review group shows its state and counts too
    assert window.editor.start()
    assert window.panel.edit.isVisible() and window.panel.review.isVisible()
    fits_at_every_size(window)


def test_difference_layer_fits(qtbot, make_main_window, models, folder, tmp_path):
    references = tmp_path / "references"
    references.mkdir()
    reference = np.zeros((60, 80), np.uint8)
    reference[:, 30:] = 1
    Image.fromarray(reference).save(references / "case1.png")
    window = shown(qtbot, make_main_window, models("binary_logits"), folder)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.set_reference_folder(references)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.set_layer("difference")
    assert window.state.shown.display_codes is not None
    fits_at_every_size(window)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.set_layer("probability")  # the colour bar and its caption
    fits_at_every_size(window)


def test_split_view_with_model_b_fits(qtbot, make_main_window, models, tmp_path):
    images = tmp_path / "stripes"
    images.mkdir()
    Image.fromarray(stripes(40, 60)).save(images / "s.png")
    window = shown(qtbot, make_main_window, models("rgb_classes"), images)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(models("permuted_classes"))
    window.panel.decision.set_split("ab")
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.set_layer("disagreement")
    fits_at_every_size(window)


def test_volume_with_its_slice_bar_fits(qtbot, make_main_window, ct_model, tmp_path):
    write_series(tmp_path / "ct", slices=4)
    window = shown(qtbot, make_main_window, ct_model, tmp_path / "ct")
    qtbot.waitUntil(lambda: "all 4 slices" in window.panel.legend.volume_text(), timeout=TIMEOUT)
    assert window.slices.isVisible() and window.panel.image_info.isVisible()
    fits_at_every_size(window)


def test_classifier_top_k_fits(qtbot, make_main_window, models, tmp_path):
    model = models("wide_classifier")
    (model.parent / "synset.txt").write_text("".join(f"n{k:08d} a rather long class name number {k}, synonym\n"
                                                     for k in range(1000)))
    model.with_suffix(".yaml").write_text("classes_file: synset.txt\noutput:\n  min_confidence: 0.99\n")
    image = np.zeros((40, 40, 3), np.uint8)
    image[..., 0] = 128
    Image.fromarray(image).save(tmp_path / "red.png")
    window = shown(qtbot, make_main_window, model, tmp_path / "red.png")
    qtbot.waitUntil(lambda: window.panel.findChild(QLabel, "uncertain") is not None, timeout=TIMEOUT)
    fits_at_every_size(window)


def test_folder_scores_after_run_on_all_fit(qtbot, make_main_window, models, tmp_path):
    images = tmp_path / "parts"
    images.mkdir()
    for k, level in enumerate((40, 120, 200, 250)):
        image = np.full((30, 40), level, np.uint8)
        Image.fromarray(image).save(images / f"part_with_a_long_name_{k}.png")
    window = shown(qtbot, make_main_window, models("anomaly_named"), images)
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(None)  # scores only
    qtbot.waitUntil(lambda: window.panel.folder.isVisible(), timeout=TIMEOUT)
    assert "drag the line" in window.panel.folder.counts_text()
    fits_at_every_size(window)


def test_the_panel_does_not_narrow_again_and_move_the_picture(qtbot, make_main_window, models, tmp_path):
    """Wide counts (a big image) widen the panel; the next model's empty counts must not narrow it again: the
    splitter would move and the picture be refitted at every step."""
    images = tmp_path / "big"
    images.mkdir()
    image = np.zeros((3000, 4000), np.uint8)
    image[:, 1000:] = 255
    Image.fromarray(image).save(images / "big.png")
    window = make_main_window(models("binary_logits"))
    window.resize(1280, 720)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images])
    settle()
    area = window.panel.parentWidget().parentWidget()
    wide = area.width()
    assert window.panel.legend.count_text(1) == "9,000,000 px  75.00 %"
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        window.open_model(models("binary_logits", "second"))
    settle()
    assert window.panel.legend.count_text(1) == "–"
    assert area.width() == wide


def test_a_long_reference_name_does_not_widen_the_panel(qtbot, make_main_window, models, tmp_path):
    """A DICOM series' per-slice correction is named by its UID (`1.2.826.0.1.3680043…_slice0019_mask.png`): no
    space to wrap at, so the comparison line once widened the side panel to ~640 px at 1280×720 (the picture
    squeezed to a third of the window). The name is shortened in the middle; the panel keeps its width."""
    widths = []
    for name in ("case1", "1.2.826.0.1.3680043.8.498.83371447267590019624817366194455839" + "_slice0019"):
        folder = tmp_path / f"in_{len(widths)}"
        references = tmp_path / f"references_{len(widths)}"
        folder.mkdir()
        references.mkdir()
        Image.fromarray(np.full((60, 80), 128, np.uint8)).save(folder / f"{name}.png")
        reference = np.zeros((60, 80), np.uint8)
        reference[:, 30:] = 1
        Image.fromarray(reference).save(references / f"{name}.png")
        window = make_main_window(models("binary_logits"), settings=f"s{len(widths)}.ini")
        window.resize(1280, 720)
        with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
            window.add_paths([folder])
        with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
            window.set_reference_folder(references)
        settle()
        assert "IoU" in window.panel.decision.comparison_text()
        widths.append(window.panel.parentWidget().parentWidget().width())
        window.close()
    assert widths[1] == widths[0]
    assert "…" in window.panel.decision.comparison_text().splitlines()[0]
