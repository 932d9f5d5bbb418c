"""A volume's slices each keep their own correction (issue 28): editing slice 5 and then slice 6 of a series saved
both under the series' one `<name>_mask.png`, so slice 6's save overwrote slice 5's, and slice 5's correction was
the starting mask (and the reference) of every other slice."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image
from PySide6.QtCore import Qt

from app.runs.review.log import Correction
from app.ui.state.messages import ViewKey
from ui.controllers.fakes import on_screen, seg_view
from ui.controllers.test_editor import rig  # noqa: F401 (the fixture)

SERIES = "data/1.2.840.99"  # a series' path: <folder>/<SeriesInstanceUID>


def _slice(k: int):
    view = seg_view(SERIES)
    return replace(view, key=ViewKey(SERIES, k), frame_count=32)


def _paint_and_leave(editing, qtbot, view, xy: tuple[float, float]) -> tuple[str, np.ndarray]:
    """(the correction written, the mask edit mode started from) after a fill at `xy`."""
    on_screen(editing.state, view)
    editing.editor.start()
    starting = editing.editor.mask.copy()
    editing.viewer.edit_pressed.emit(*xy, Qt.KeyboardModifier.ControlModifier)
    with qtbot.waitSignal(editing.editor.saved) as saved:
        editing.editor.stop()
    return saved.args[1], starting


def test_two_slices_corrections_are_both_kept(qtbot, rig, tmp_path):  # noqa: F811
    folder, root = tmp_path / "data_review", tmp_path / "data"
    rig.editor.destination = lambda path, frame: Correction(folder, "1.2.840.99", root, frame)
    rig.panel.chosen_label = 1
    model_mask = _slice(4).result.mask
    fifth, _ = _paint_and_leave(rig, qtbot, _slice(4), (0.0, 0.0))  # slice 5: the background filled with 1
    assert (np.array(Image.open(fifth)) == 1).all()
    rig.panel.chosen_label = 0
    sixth, starting = _paint_and_leave(rig, qtbot, _slice(5), (2.0, 1.0))  # slice 6: the square erased
    assert (starting == model_mask).all()  # slice 6 starts from the model's mask, not from slice 5's correction
    assert fifth != sixth
    assert (np.array(Image.open(fifth)) == 1).all()  # slice 5's correction is still slice 5's
    assert (np.array(Image.open(sixth)) == 0).all()
    assert [Path(fifth).name, Path(sixth).name] == ["1.2.840.99_slice0005_mask.png", "1.2.840.99_slice0006_mask.png"]
    on_screen(rig.state, _slice(4))
    rig.editor.start()
    assert (rig.editor.mask == 1).all()  # back on slice 5: edit mode starts from its own correction
    rig.editor.stop()


def test_a_one_frame_picture_keeps_its_plain_name(qtbot, rig, tmp_path):  # noqa: F811
    rig.editor.destination = lambda path, frame: Correction(tmp_path / "data_review", Path(path).name,
                                                            tmp_path / "data", frame)
    written, _ = _paint_and_leave(rig, qtbot, seg_view(), (0.0, 0.0))
    assert Path(written).name == "a.png_mask.png"
