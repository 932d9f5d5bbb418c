"""A click in a three-plane pane names the voxel under the *centre* of the screen pixel clicked (as the viewer's
edit mode does): the pane mapped the pixel's corner, so below 100 % a click could name the voxel before the one
drawn under the mouse."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import QPointF

from app.ui.widgets.three_plane_pane import PlanePane


@pytest.mark.parametrize("voxels", [400, 37])  # a 300 px pane: ~0.75 and ~8 screen pixels per voxel
def test_a_click_names_the_voxel_drawn_under_the_mouse(qtbot, voxels):
    pane = PlanePane()
    qtbot.addWidget(pane)
    pane.resize(300, 300)
    pane.show()
    pane.set_geometry((voxels, voxels), (1.0, 1.0), None)
    assert pane.transform().m11() != 1.0
    wrong = []
    for v in range(voxels):
        centre = pane.position_of(v, v)
        pixel = QPointF(math.floor(centre.x()), math.floor(centre.y()))  # a mouse event's position: integers
        if pane.voxel_at(pixel) != (v, v) and _drawn_under(pane, pixel) == (v, v):
            wrong.append((v, pane.voxel_at(pixel)))
    assert not wrong


def _drawn_under(pane: PlanePane, pixel: QPointF) -> tuple[int, int]:
    """The voxel the screen pixel's centre shows."""
    scene = pane.viewportTransform().inverted()[0].map(QPointF(pixel.x() + 0.5, pixel.y() + 0.5))
    return math.floor(scene.x()), math.floor(scene.y())
