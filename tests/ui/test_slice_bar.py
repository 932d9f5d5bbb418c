"""The slice bar below a volume's picture."""

from __future__ import annotations

from app.ui.widgets.slices import SliceBar


def test_a_slider_value_set_while_no_volume_is_shown_is_passed_on_without_describing_a_slice(qtbot):
    # _describe read the volume's depth from None (AttributeError in the slot) when the slider moved with no volume
    bar = SliceBar()
    qtbot.addWidget(bar)
    moved: list[int] = []
    bar.slice_changed.connect(moved.append)

    bar.slider.setValue(3)

    assert moved == [3]
    assert bar.label.text() == ""
