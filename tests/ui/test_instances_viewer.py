"""An instance model (a constant Ultralytics head, tests/yolo_models.py) in the viewer: the overlay draws each instance
in its class colour, the list and the legend count them, the score threshold hides the weaker ones without a run,
and the reader's corrections (delete, add, redraw) are what the COCO and YOLO exports hold."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from PySide6.QtCore import QRectF, Qt
from yolo_models import classify_model, instance_model

from app.ui.controllers.instances import InstanceController
from app.ui.state.view_state import DisplayMode
from tests.ui.conftest import TIMEOUT

PIT, SCRATCH = (230, 159, 0), (86, 180, 233)  # the classes' colours (the model's palette)
GRAY = 128


def picture(folder, name="part.png"):
    path = folder / name
    cv2.imwrite(str(path), np.full((320, 320, 3), GRAY, np.uint8))
    return path


def shown(make_main_window, qtbot, tmp_path, *, task="segment", names=("part.png",)):
    """A window showing the first of `names` (320×320 gray) with a constant `task` model."""
    window = make_main_window(instance_model(tmp_path / "best.onnx", task=task))
    folder = tmp_path / "images"
    folder.mkdir()
    paths = [picture(folder, name) for name in names]
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder] if len(paths) > 1 else paths)
    return window


def pixels(window) -> np.ndarray:
    image = window.viewer.render_scene().convertToFormat(window.viewer.render_scene().Format.Format_RGB888)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())[
        :, :image.width() * 3].reshape(image.height(), image.width(), 3)


def test_each_instance_is_outlined_in_its_class_colour_and_filled_at_the_overlay_opacity(make_main_window, qtbot,
                                                                                           tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    seen = pixels(window)
    pit = window.instances.shown().items[0]  # 0.90, its mask inside the box (60, 60)–(100, 100)
    left = pit.mask_box[0] + int(np.argmax(pit.mask[20]))  # its first pixel on row 80: the outline runs through it
    assert pit.class_name == "pit" and 60 <= left < 70
    assert tuple(seen[80, left]) == PIT and tuple(seen[80, left - 2]) == (GRAY,) * 3
    inside = seen[80, 80].astype(int)
    assert tuple(inside) != PIT and not (inside == GRAY).all()  # filled, at half opacity: between both
    assert abs(inside[0] - (GRAY + PIT[0]) / 2) <= 2
    assert tuple(seen[219, 160]) != (GRAY,) * 3 and tuple(seen[5, 5]) == (GRAY,) * 3  # the scratch; outside: none
    window.panel.controls.set_opacity(0.0)
    seen = pixels(window)
    assert tuple(seen[80, 80]) == (GRAY,) * 3 and tuple(seen[80, left]) == PIT  # no fill: the outline stays
    window.panel.controls.set_opacity(0.5)
    window.panel.controls.set_mode(DisplayMode.CONTOUR)  # outlines alone
    seen = pixels(window)
    assert tuple(seen[80, 80]) == (GRAY,) * 3 and tuple(seen[80, left]) == PIT
    window.panel.controls.set_mode(DisplayMode.FILLED)
    assert tuple(pixels(window)[80, 80]) != (GRAY,) * 3
    window.panel.legend.set_hidden(0, True)  # the pits hidden: neither outline nor fill
    assert tuple(pixels(window)[80, left]) == (GRAY,) * 3


def test_detect_and_obb_models_draw_their_boxes(make_main_window, qtbot, tmp_path):
    for task in ("detect", "obb"):
        folder = tmp_path / task
        folder.mkdir()
        window = shown(make_main_window, qtbot, folder, task=task)
        seen = pixels(window)
        assert tuple(seen[80, 60]) == PIT and tuple(seen[60, 60]) == PIT  # a box: its corner outlined too
        assert tuple(seen[80, 62]) not in (PIT, (GRAY,) * 3) and tuple(seen[80, 56]) == (GRAY,) * 3  # filled
        assert window.panel.instance_list().rows()[0][:3] == ("pit 1", "0.90", "1,600")


def test_the_list_has_a_row_per_instance_and_a_click_zooms_to_it(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    listed = window.panel.instance_list()
    assert listed.rows() == [("pit 1", "0.90", "1,000", "60,60 40×40"),
                             ("scratch 1", "0.80", "3,904", "60,208 200×24"),
                             ("pit 2", "0.60", "744", "224,64 32×32")]
    assert listed.summary_text() == "3 instances\npit: 2 · scratch: 1"
    legend = window.panel.legend
    assert (legend.count_text(0), legend.count_text(1), legend.count_text(2)) == ("2 instances", "1 instance",
                                                                                   "0 instances")
    before = window.viewer.zoom()
    listed.click_row(2)
    assert window.viewer.zoom() > 2 * before
    visible = window.viewer.mapToScene(window.viewer.viewport().rect()).boundingRect()
    assert visible.contains(QRectF(224, 64, 32, 32)) and visible.width() < 160  # the pit of 0.60, close up
    assert window.viewer.instances_item.highlight is listed.chosen_instance()
    assert listed.chosen_instance().score == pytest.approx(0.6)


def test_the_threshold_is_a_live_score_threshold_without_a_run(make_main_window, qtbot, tmp_path, monkeypatch):
    window = shown(make_main_window, qtbot, tmp_path)
    from app.inference.image import pipeline

    runs = []
    monkeypatch.setattr(pipeline, "run_image", lambda *a, **k: runs.append(a) or pytest.fail("a run"))
    decision = window.panel.decision
    assert decision.threshold_kind() == "min_score" and decision.isVisible()
    item = window.viewer.instances_item
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        decision.nudge(700 - round(0.25 * 1000))  # from the model's 0.25 to 0.70
    listed = window.panel.instance_list()
    assert [row[0] for row in listed.rows()] == ["pit 1", "scratch 1"]
    assert window.panel.legend.count_text(0) == "1 instance"
    assert "score ≥ 0.70" in listed.summary_text()
    assert tuple(pixels(window)[80, 240]) == (GRAY,) * 3  # the pit of 0.60 not drawn either
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        decision.nudge(-400)  # 0.30: the pit of 0.60 is back
    assert len(listed.rows()) == 3 and not runs
    assert tuple(pixels(window)[80, 240]) != (GRAY,) * 3
    assert window.viewer.instances_item is item  # the shapes made once: a threshold drag only repaints them


def export_coco(window, tmp_path) -> dict:
    path = tmp_path / "out" / "instances.json"
    path.parent.mkdir(exist_ok=True)
    assert window.instances.export(path, "coco") >= 1
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_deleted_instance_is_gone_from_the_list_the_overlay_and_the_coco_export(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    assert len(export_coco(window, tmp_path)["annotations"]) == 3
    listed = window.panel.instance_list()
    listed.click_row(0)  # pit 0.90
    qtbot.keyClick(window.viewer, Qt.Key.Key_Delete)  # the Review menu's Delete, from the canvas
    assert [row[0] for row in listed.rows()] == ["scratch 1", "pit 1"]
    assert tuple(pixels(window)[80, 80]) == (GRAY,) * 3  # neither its fill
    document = export_coco(window, tmp_path)
    assert sorted(a["score"] for a in document["annotations"]) == pytest.approx([0.6, 0.8])
    assert [image["file_name"] for image in document["images"]] == ["part.png"]
    assert "corrected by you" in listed.summary_text()


def test_an_added_and_a_redrawn_instance_are_exported_as_yolo_labels(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    controller: InstanceController = window.instances
    listed = window.panel.instance_list()
    listed._class.setCurrentIndex(2)  # stain
    listed._add.click()
    assert controller.drawing and window.viewer.editing
    viewer = window.viewer
    start = viewer.mapFromScene(10, 10)
    end = viewer.mapFromScene(50, 40)
    qtbot.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(viewer.viewport(), pos=end)
    qtbot.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, pos=end)
    assert not controller.drawing and not viewer.editing
    added = [row for row in listed.rows() if row[0] == "stain 1"]
    assert len(added) == 1 and added[0][1] == "1.00"
    assert tuple(pixels(window)[25, 10]) == (0, 158, 115)  # the stain's colour around it
    listed.click_row(1)  # scratch 0.80, drawn again as a box
    controller.finish_box(("redraw", listed.chosen_instance()), (100.0, 100.0, 140.0, 120.0))
    out = tmp_path / "yolo"
    assert controller.export(out, "yolo") == 1
    lines = (out / "labels" / "part.txt").read_text().splitlines()
    classes = sorted(int(line.split()[0]) for line in lines)
    assert classes == [0, 0, 1, 2]
    scratch = next(line for line in lines if line.startswith("1 "))
    xs = [float(v) for v in scratch.split()[1::2]]
    assert min(xs) == pytest.approx(100 / 320, abs=1 / 320) and max(xs) == pytest.approx(140 / 320, abs=1 / 320)
    assert "names" in (out / "data.yaml").read_text()


def test_a_picture_marked_result_wrong_is_left_out_of_the_export(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path, names=("a.png", "b.png"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.reviewer.mark("rejected")  # a.png: wrong, then the next unreviewed (b.png)
    document = export_coco(window, tmp_path)
    assert [image["file_name"] for image in document["images"]] == ["b.png"]


def test_a_yolo_classify_export_shows_its_top_classes(make_main_window, qtbot, tmp_path):
    window = make_main_window(classify_model(tmp_path / "cls.onnx"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([picture(tmp_path)])
    assert window.panel.top_classes() == [("scratch", "70.0%"), ("stain", "20.0%"), ("pit", "10.0%")]
    assert window.viewer.instances_item is None


def test_the_area_is_in_mm2_too_when_the_pixel_size_is_known(qtbot):
    from app.inference.model.instances import Instance
    from app.inference.model.spec import ClassInfo
    from app.ui.widgets.instance_list import InstanceList

    listed = InstanceList()
    qtbot.addWidget(listed)
    pit = Instance(0, "pit", 0.5, (10.0, 20.0, 30.0, 30.0))
    classes = (ClassInfo("pit", (230, 159, 0)),)
    listed.set_instances([pit], classes=classes, pixel_mm=(0.5, 0.25))
    assert listed.rows() == [("pit 1", "0.50", "200", "25.00", "10,20 20×10")]
    listed.set_instances([pit], classes=classes, pixel_mm=None)
    assert listed.rows() == [("pit 1", "0.50", "200", "10,20 20×10")]


def test_a_click_on_an_instance_chooses_it_and_delete_removes_that_one(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    viewer, listed = window.viewer, window.panel.instance_list()
    qtbot.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, pos=viewer.mapFromScene(160, 220))  # scratch
    assert listed.chosen_instance().class_name == "scratch" and viewer.instances_item.highlight.score == \
        pytest.approx(0.8)
    qtbot.keyClick(viewer, Qt.Key.Key_Delete)
    assert [row[0] for row in listed.rows()] == ["pit 1", "pit 2"]
    qtbot.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, pos=viewer.mapFromScene(10, 300))  # nothing
    assert listed.chosen_instance() is None and viewer.instances_item.highlight is None


def test_a_brush_stroke_paints_a_new_instance_with_its_mask(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    controller: InstanceController = window.instances
    listed, viewer = window.panel.instance_list(), window.viewer
    listed._class.setCurrentIndex(1)  # scratch
    listed._paint.click()
    assert controller.drawing and viewer.editing and controller.brush_radius == 3  # 320 px / 100
    points = [viewer.mapFromScene(20 + 10 * i, 150) for i in range(6)]
    qtbot.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, pos=points[0])
    for point in points[1:]:
        qtbot.mouseMove(viewer.viewport(), pos=point)
    qtbot.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, pos=points[-1])
    assert not controller.drawing
    painted = controller.shown().items[-1]
    assert painted.class_name == "scratch" and painted.score == 1.0 and painted.mask is not None
    x0, y0, x1, y1 = painted.box
    # the stroke from x 20 to 70 at y 150, 3 px each side (a screen pixel off at most, the window fitted)
    assert abs(x0 - 17) <= 2 and abs(x1 - 74) <= 2 and abs(y0 - 147) <= 2 and abs(y1 - 154) <= 2
    assert tuple(pixels(window)[150, 45]) != (GRAY,) * 3
    assert len(export_coco(window, tmp_path)["annotations"]) == 4


def test_ctrl_z_takes_an_instance_correction_back_and_ctrl_shift_z_makes_it_again(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    listed = window.panel.instance_list()
    listed.click_row(1)  # the scratch
    qtbot.keyClick(window.viewer, Qt.Key.Key_Delete)
    assert len(listed.rows()) == 2
    qtbot.keyClick(window.viewer, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert [row[0] for row in listed.rows()] == ["pit 1", "scratch 1", "pit 2"]
    assert "corrected by you" not in listed.summary_text()
    qtbot.keyClick(window.viewer, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert [row[0] for row in listed.rows()] == ["pit 1", "pit 2"]


def test_corrections_stay_when_the_model_is_reopened_and_go_with_another_model(make_main_window, qtbot, tmp_path):
    window = shown(make_main_window, qtbot, tmp_path)
    listed = window.panel.instance_list()
    listed.click_row(0)
    window.instances.delete()
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.open_model(device="cpu")  # the same file again (as a device change does)
    assert len(listed.rows()) == 2
    other = instance_model(tmp_path / "other.onnx", task="detect")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.open_model(other)
    assert len(listed.rows()) == 3 and "corrected" not in listed.summary_text()


def test_a_corrected_picture_is_judged_on_the_corrections(make_main_window, qtbot, tmp_path):
    """NG past one pit: the model's two pits are NG; one deleted, the verdict is judged on what the reader kept
    (and says so); the deletion taken back, the model's verdict again."""
    (tmp_path / "best.yaml").write_text("verdict:\n  fail_if: {count_above: {pit: 1}}\n", encoding="utf-8")
    window = shown(make_main_window, qtbot, tmp_path)
    decision = window.panel.decision
    assert decision.verdict_text().startswith("NG — pit count 2 > 1")
    window.panel.instance_list().click_row(0)  # pit 0.90
    qtbot.keyClick(window.viewer, Qt.Key.Key_Delete)
    assert decision.verdict_text().startswith("OK (as corrected)")
    qtbot.keyClick(window.viewer, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert decision.verdict_text().startswith("NG — pit count 2 > 1")


def disc(hw=(320, 320), centre=(160, 130), r=28) -> np.ndarray:
    yy, xx = np.mgrid[: hw[0], : hw[1]]
    return (xx - centre[0]) ** 2 + (yy - centre[1]) ** 2 <= r * r


def disc_shown(make_main_window, qtbot, tmp_path, *, task="segment"):
    """A dark disc on a bright ground, away from the constant model's instances, shown with a `task` model."""
    window = make_main_window(instance_model(tmp_path / "best.onnx", task=task))
    image = np.full((320, 320, 3), 200, np.uint8)
    image[disc()] = 20
    path = tmp_path / "disc.png"
    cv2.imwrite(str(path), image)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([path])
    return window


def test_the_smart_tool_adds_an_instance_of_the_class_chosen_from_a_click(make_main_window, qtbot, tmp_path):
    window = disc_shown(make_main_window, qtbot, tmp_path)
    listed, viewer, controller = window.panel.instance_list(), window.viewer, window.instances
    listed._class.setCurrentIndex(2)  # stain
    qtbot.keyClick(window, Qt.Key.Key_S)  # the Smart tool, on an instance picture: no mask editing
    assert controller.drawing and not window.editor.active
    with qtbot.waitSignal(controller.changed, timeout=TIMEOUT):
        qtbot.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, pos=viewer.mapFromScene(160, 130))
    assert not controller.drawing
    added = [i for i in controller.shown().items if i.class_name == "stain"]
    assert len(added) == 1 and added[0].score == 1.0 and added[0].mask is not None
    made = added[0].full_mask((320, 320))
    assert (made & disc()).sum() / (made | disc()).sum() >= 0.8
    assert added[0].mask.shape == (added[0].mask_box[3] - added[0].mask_box[1],
                                   added[0].mask_box[2] - added[0].mask_box[0])  # kept inside its box
    assert [row[0] for row in listed.rows()][-1] == "stain 1"
    assert tuple(pixels(window)[130, 160]) != (20, 20, 20)  # filled in the stain's colour
    document = export_coco(window, tmp_path)
    stains = [a for a in document["annotations"] if a["category_id"] == next(
        c["id"] for c in document["categories"] if c["name"] == "stain")]
    assert len(stains) == 1 and stains[0]["area"] == pytest.approx(disc().sum(), rel=0.2)
    qtbot.keyClick(viewer, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert [row[0] for row in listed.rows()] == ["pit 1", "scratch 1", "pit 2"]


def test_a_smart_box_on_an_oriented_box_model_adds_the_masks_rotated_box(make_main_window, qtbot, tmp_path):
    """grabCut (no prompt model) takes the box dragged; an obb model's new instance is the mask's rotated box."""
    window = disc_shown(make_main_window, qtbot, tmp_path, task="obb")
    window.panel.edit.choose_prompt_model("grabcut")
    listed, viewer, controller = window.panel.instance_list(), window.viewer, window.instances
    listed._class.setCurrentIndex(1)  # scratch
    listed._smart.click()
    assert controller.drawing
    start, end = viewer.mapFromScene(120, 90), viewer.mapFromScene(200, 170)
    with qtbot.waitSignal(controller.changed, timeout=TIMEOUT):
        qtbot.mousePress(viewer.viewport(), Qt.MouseButton.LeftButton, pos=start)
        qtbot.mouseMove(viewer.viewport(), pos=end)
        qtbot.mouseRelease(viewer.viewport(), Qt.MouseButton.LeftButton, pos=end)
    added = controller.shown().items[-1]
    assert added.class_name == "scratch" and added.mask is None and added.rotated is not None
    cx, cy, w, h, _angle = added.rotated
    assert abs(cx - 160) <= 3 and abs(cy - 130) <= 3 and 50 <= min(w, h) <= max(w, h) <= 62  # the disc's square
    assert "scratch" in listed.summary_text()
