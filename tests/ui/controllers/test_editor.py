"""The Editor driven with a fake viewer, edit panel and presenter (no window): when edit mode refuses to start and
why, what a brush stroke, an eraser, a fill, undo and redo do to the mask and ask the panel and presenter to show,
and what leaving edit mode saves (a real PNG in a real review folder) or refuses."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Qt, Signal

from app.inference.model.spec import ClassInfo
from app.runs.review.log import Correction
from app.ui.controllers.editor import Editor
from ui.controllers.fakes import Fake, FakePresenter, FakeViewer, on_screen, ready_state, seg_view

CLASSES = (ClassInfo("background", None), ClassInfo("lesion", (255, 0, 0)))
SPEC = SimpleNamespace(classes=CLASSES, path=Path("models") / "a.onnx", label_count=2)
NONE = Qt.KeyboardModifier.NoModifier


class FakeEditPanel(Fake):
    """EditPanel's face: the tool, class and radius the reader chose, and the buttons."""

    radius_changed = Signal(int)
    undo_requested = Signal()
    redo_requested = Signal()
    save_requested = Signal()
    done_requested = Signal()
    tool_changed = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.chosen_tool, self.chosen_label, self.chosen_radius = "brush", 1, 8

    def set_classes(self, classes) -> None:
        self.record("set_classes", tuple(classes))

    def show(self) -> None:
        self.record("show")

    def hide(self) -> None:
        self.record("hide")

    def tool(self) -> str:
        return self.chosen_tool

    def label(self) -> int:
        return self.chosen_label

    def radius(self) -> int:
        return self.chosen_radius

    def set_radius(self, radius: int) -> None:
        self.record("set_radius", radius)
        self.chosen_radius = radius
        self.radius_changed.emit(radius)

    def set_history(self, can_undo: bool, can_redo: bool) -> None:
        self.record("set_history", can_undo, can_redo)


@pytest.fixture
def rig(qtbot):
    viewer, panel, presenter = FakeViewer(), FakeEditPanel(), FakePresenter()
    state = ready_state(SPEC)
    editor = Editor(state, viewer=viewer, presenter=presenter, panel=panel)
    refused, masks = [], []
    editor.refused.connect(refused.append)
    editor.mask_changed.connect(lambda mask: masks.append(mask.copy()))
    return SimpleNamespace(editor=editor, state=state, viewer=viewer, panel=panel, presenter=presenter,
                           refused=refused, masks=masks)


def test_edit_mode_says_why_it_cannot_start(rig):
    assert not rig.editor.start()
    on_screen(rig.state, replace(seg_view(), display_mask=None))
    assert not rig.editor.start()
    on_screen(rig.state, replace(seg_view(), display_scale=2.0))
    assert not rig.editor.start()
    assert rig.refused == ["Nothing to edit: no picture is shown", "Only a segmentation mask can be edited",
                           "a.png is shown downscaled: editing needs the full-resolution display"]
    assert rig.viewer.calls == [] and rig.panel.calls == [] and not rig.editor.active


def test_starting_shows_the_panel_with_the_models_classes_and_the_brush_and_the_mask_being_edited(qtbot, rig):
    view = on_screen(rig.state, seg_view())
    with qtbot.waitSignal(rig.editor.started) as started:
        assert rig.editor.start()
    assert started.args == ["data/a.png"]
    assert rig.panel.calls == [("set_classes", CLASSES), ("show",)]
    assert rig.viewer.calls == [("set_editing", 8)]
    [(overlay,)] = rig.presenter.called("edit_overlay")
    assert overlay is not None and (rig.editor.mask == view.result.mask).all()


def test_a_brush_stroke_paints_the_class_chosen_and_undo_and_redo_step_through_it(rig):
    on_screen(rig.state, seg_view())
    rig.editor.start()
    rig.panel.chosen_radius = 1
    rig.viewer.edit_pressed.emit(0.0, 0.0, NONE)
    rig.viewer.edit_moved.emit(0.0, 3.0)
    rig.viewer.edit_released.emit()
    painted = rig.masks[-1]
    assert (painted[:, 0] == 1).all() and painted[1:3, 2:4].all()  # the stroke, and the square as it was
    assert rig.panel.called("set_history") == [(True, False)]
    assert "repaint_overlay" in rig.presenter.names()
    rig.panel.undo_requested.emit()
    assert (rig.masks[-1] == seg_view().result.mask).all()
    rig.panel.redo_requested.emit()
    assert (rig.masks[-1] == painted).all()
    assert rig.panel.called("set_history")[1:] == [(False, True), (True, False)]


def test_shift_erases_and_ctrl_fills(rig):
    on_screen(rig.state, seg_view())
    rig.editor.start()
    rig.panel.chosen_radius = 1
    rig.viewer.edit_pressed.emit(2.0, 1.0, Qt.KeyboardModifier.ShiftModifier)
    rig.viewer.edit_released.emit()
    assert rig.masks[-1][1, 2] == 0  # background under the eraser
    rig.viewer.edit_pressed.emit(0.0, 0.0, Qt.KeyboardModifier.ControlModifier)  # the background region, filled
    assert rig.masks[-1][0, 0] == 1 and rig.masks[-1][3, 5] == 1


def test_outside_edit_mode_the_viewers_mouse_changes_nothing(rig):
    on_screen(rig.state, seg_view())
    rig.viewer.edit_pressed.emit(0.0, 0.0, NONE)
    rig.viewer.edit_released.emit()
    rig.panel.undo_requested.emit()
    assert rig.masks == [] and rig.presenter.calls == []


def test_the_wheel_grows_the_brush_by_an_eighth_and_the_viewer_follows_in_edit_mode(rig):
    rig.panel.chosen_radius = 40
    rig.viewer.brush_wheel.emit(1)
    assert rig.panel.called("set_radius") == [(45,)]
    assert rig.viewer.calls == []  # not editing: no brush ring
    on_screen(rig.state, seg_view())
    rig.editor.start()
    rig.viewer.brush_wheel.emit(-1)
    assert rig.panel.called("set_radius")[-1] == (40,) and rig.viewer.calls[-1] == ("set_brush_radius", 40)


def test_leaving_edit_mode_saves_the_correction_and_shows_the_models_decision_again(qtbot, rig, tmp_path):
    root = tmp_path / "data"
    rig.editor.destination = lambda path, frame: Correction(tmp_path / "data_review", Path(path).name, root, frame)
    view = on_screen(rig.state, seg_view())
    rig.editor.start()
    rig.viewer.edit_pressed.emit(0.0, 0.0, Qt.KeyboardModifier.ControlModifier)
    with qtbot.waitSignal(rig.editor.saved) as saved, qtbot.waitSignal(rig.editor.stopped):
        rig.editor.stop()
    image_path, written = saved.args
    assert image_path == "data/a.png" and Path(written).parent == tmp_path / "data_review"
    assert (np.array(Image.open(written)) == rig.masks[-1]).all()
    assert rig.viewer.calls[-1] == ("set_editing", None) and rig.panel.calls[-1] == ("hide",)
    assert rig.presenter.calls[-2:] == [("edit_overlay", None), ("update_decision", view)]
    assert not rig.editor.active


def test_a_save_refused_is_said_in_one_line(rig, tmp_path):
    root = tmp_path / "data"
    rig.editor.destination = lambda path, frame: Correction(root, Path(path).name, root)  # inside the inputs: refused
    on_screen(rig.state, seg_view())
    rig.editor.start()
    rig.viewer.edit_pressed.emit(0.0, 0.0, Qt.KeyboardModifier.ControlModifier)
    assert rig.editor.save() is None
    [message] = rig.refused
    assert message.startswith("a.png: the corrected mask was not saved: ") and "\n" not in message
