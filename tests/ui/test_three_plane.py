"""The three-plane view (app/ui/widgets/three_plane.py, wired by app/ui/controllers/volume_view.py): axial, coronal
and sagittal panes of a volume whose whole label volume is known, with the label colour at the crosshair, the
patient's letters and proportions, and one crosshair the panes share (a click, the keys, the wheel)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from tests.dicom_factory import disc_slice, write_nifti, write_series

TIMEOUT = 20_000
AXIAL_LETTERS = {"left": "R", "right": "L", "top": "A", "bottom": "P"}
CORONAL_LETTERS = {"left": "R", "right": "L", "top": "S", "bottom": "I"}
SAGITTAL_LETTERS = {"left": "A", "right": "P", "top": "S", "bottom": "I"}


def _open_planes(qtbot, make_main_window, ct_model, tmp_path, slices: int = 6):
    """A CT series (slice k: a +60 HU disc of radius 4 + 2k, 2.5 mm slices of 0.7 × 0.8 mm pixels) in the viewer,
    counted whole, then View ▸ Three planes."""
    write_series(tmp_path / "ct", slices=slices)
    win = make_main_window(ct_model)
    win.resize(1400, 800)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "ct"])
    qtbot.waitUntil(lambda: f"all {slices} slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    toggle = _toggle(win)
    qtbot.waitUntil(toggle.isEnabled, timeout=TIMEOUT)  # the whole label volume is known
    with qtbot.waitSignal(win.volumes.planes_shown, timeout=TIMEOUT):
        toggle.trigger()
    planes = win.volumes.planes
    assert planes is not None and planes.isVisible() and not win.viewer.isVisible() and toggle.isChecked()
    QApplication.processEvents()
    return win, planes


def _toggle(win):
    (action,) = [a for a in win.findChildren(type(win.menuBar().actions()[0])) if a.text().startswith("Three planes")]
    return action


def _pixel(pane, point: QPointF) -> tuple[int, int, int]:
    image = pane.viewport().grab().toImage()
    color = image.pixelColor(point.toPoint())
    return color.red(), color.green(), color.blue()


def test_panes_show_the_label_colour_at_the_crosshair_with_letters_and_true_proportions(
        qtbot, make_main_window, ct_model, tmp_path):
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    assert planes.panes["axial"].letters == AXIAL_LETTERS  # a standard axial DICOM series
    assert planes.panes["coronal"].letters == CORONAL_LETTERS
    assert planes.panes["sagittal"].letters == SAGITTAL_LETTERS
    k, row, col = planes.point
    assert k == 0 and win.volumes.planes.volume.labels[k, row, col] == 1  # starts on the reader's slice, on the disc
    assert planes.info.text().endswith("·   60 HU   ·   disc") and planes.info.text().startswith(
        f"Slice 1 · row {row + 1} · column {col + 1}   ·   ")  # the voxel, its position, value and class
    win.panel.controls.set_opacity(1.0)  # the side panel's opacity reaches the panes: the pure class colour
    planes.set_point(3, 16, 16)
    QApplication.processEvents()
    for pane in planes.panes.values():
        assert _pixel(pane, pane.cross_position()) == (255, 0, 0), pane.title  # the disc's colour, '#ff0000'
    axial = planes.panes["axial"]
    assert _pixel(axial, axial.position_of(0, 0)) == (0, 0, 0)  # air through the CT window: black, no overlay
    # anisotropic voxels: the coronal pane is 6 slices × 2.5 mm tall and 32 columns × 0.8 mm wide on screen
    coronal, sagittal = planes.panes["coronal"].picture_rect(), planes.panes["sagittal"].picture_rect()
    assert abs(coronal.height() / coronal.width() - 6 * 2.5 / (32 * 0.8)) < 0.02
    assert abs(sagittal.height() / sagittal.width() - 6 * 2.5 / (32 * 0.7)) < 0.02
    axial_rect = axial.picture_rect()
    assert abs(axial_rect.height() / axial_rect.width() - 32 * 0.7 / (32 * 0.8)) < 0.02


def test_a_click_in_the_coronal_pane_moves_the_axial_slice(qtbot, make_main_window, ct_model, tmp_path):
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    coronal = planes.panes["coronal"]
    # coronal of an axial series: columns across, slices down with the head (the last slice) at the top
    target = coronal.position_of(20, 6 - 1 - 4)  # column 20 of slice 4
    with qtbot.waitSignal(planes.point_changed, timeout=TIMEOUT) as moved:
        qtbot.mouseClick(coronal.viewport(), Qt.MouseButton.LeftButton, pos=target.toPoint())
    k, row, col = moved.args
    assert (k, col) == (4, 20) and planes.point == (4, row, 20)
    assert planes.panes["axial"].title == "Axial  5 / 6" and planes.panes["sagittal"].title == "Sagittal  21 / 32"
    axial = planes.panes["axial"]
    shown = np.asarray(planes.volume.labels[4])  # the axial pane now draws slice 4's disc (radius 12)
    assert shown.sum() == int((disc_slice(4, 32, 32) > 0).sum())
    win.panel.controls.set_opacity(1.0)
    QApplication.processEvents()
    assert _pixel(axial, axial.position_of(8, 24)) == (255, 0, 0)  # 11.3 px out: inside radius 12 on slice 4 …
    planes.set_point(0, 16, 16)
    QApplication.processEvents()
    assert _pixel(axial, axial.position_of(8, 24)) == (0, 0, 0)  # … air outside radius 4 on slice 0


def test_keys_and_the_wheel_step_the_slice_of_the_pane_under_the_mouse(qtbot, make_main_window, ct_model, tmp_path):
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    planes.set_point(2, 16, 16)
    path = win.files.current_path()
    sagittal = planes.panes["sagittal"]
    qtbot.mouseMove(sagittal.viewport(), sagittal.position_of(10, 2).toPoint())
    sagittal.hovered.emit()  # offscreen Qt sends no enter event for a synthetic move: say where the mouse is
    sagittal.setFocus()
    qtbot.keyClick(sagittal, Qt.Key.Key_Down)
    assert planes.point == (2, 16, 17)  # the sagittal pane steps through columns
    qtbot.keyClick(sagittal, Qt.Key.Key_Right)  # over a pane, Right steps its slice, not to the next image
    qtbot.keyClick(sagittal, Qt.Key.Key_PageDown)
    assert planes.point == (2, 16, 19) and win.files.current_path() == path
    qtbot.keyClick(sagittal, Qt.Key.Key_Up)
    assert planes.point == (2, 16, 18)
    axial = planes.panes["axial"]
    axial.hovered.emit()
    _wheel(axial, -120)  # wheel down: the next slice
    assert planes.point == (3, 16, 18)
    win.volumes.step(-1)  # the window's PgUp: the pane under the mouse
    assert planes.point == (2, 16, 18)
    zooms = {name: pane.zoom() for name, pane in planes.panes.items()}
    _wheel(axial, 120, Qt.KeyboardModifier.ControlModifier)  # Ctrl + wheel zooms that pane only, no slice step
    assert abs(axial.zoom() / zooms["axial"] - 1.25) < 1e-6 and planes.point == (2, 16, 18)
    assert planes.panes["coronal"].zoom() == zooms["coronal"]
    qtbot.keyClick(axial, Qt.Key.Key_F)  # View ▸ Fit to window: the panes, not the hidden one-pane view
    assert abs(axial.zoom() - zooms["axial"]) < 1e-6


def test_the_one_pane_view_follows_the_axial_slice_and_opens_there(qtbot, make_main_window, ct_model, tmp_path):
    """The legend's and image panel's per-slice figures are of the crosshair's slice, once it rests; leaving the
    three planes shows that slice."""
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    planes.set_point(4, 10, 10)
    qtbot.waitUntil(lambda: win.state.on_screen.frame == 4, timeout=TIMEOUT)
    assert planes.isVisible() and not win.viewer.isVisible() and not win.slices.isVisible()
    assert int((win.state.on_screen.result.mask > 0).sum()) == int((disc_slice(4, 32, 32) > 0).sum())
    _toggle(win).trigger()
    assert not planes.isVisible() and win.viewer.isVisible() and win.slices.isVisible()
    assert win.state.on_screen.frame == 4 and "Slice 5 / 6" in win.slices.label.text()
    assert not _toggle(win).isChecked()


def test_three_planes_are_for_a_counted_volume(qtbot, make_main_window, ct_model, tmp_path):
    from PIL import Image

    Image.fromarray(np.zeros((16, 16), np.uint8)).save(tmp_path / "plain.png")
    win = make_main_window(ct_model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "plain.png"])
    assert not _toggle(win).isEnabled()
    win.volumes.show_planes(True)
    assert win.statusBar().currentMessage() == "Three planes: for a volume (a DICOM series or a NIfTI file)"
    assert win.volumes.planes is None and win.viewer.isVisible()  # not even made: made on first use


def test_a_nifti_is_shown_radiologically_whatever_its_storage(qtbot, tmp_path):
    """A NIfTI stored in neurological order (i toward the patient's right): the axial pane still puts the
    patient's right on the screen's left, so a marker at the right edge of the data shows on the left."""
    from app.io.discover import discover
    from app.io.stack import VolumeStack
    from app.ui.widgets.three_plane import PlaneVolume, ThreePlaneView, label_colors

    affine = np.diag([0.9, 1.1, 3.0, 1.0])  # +i → R, +j → A, +k → S
    data = write_nifti(tmp_path / "brain.nii.gz", shape=(24, 20, 5), affine=affine)
    data[:] = 0
    data[23, 10, 2] = 1000  # the patient's right-most column, mid-way front to back
    import nibabel as nib

    nib.save(nib.Nifti1Image(data, affine), str(tmp_path / "brain.nii.gz"))
    (item,) = discover([tmp_path / "brain.nii.gz"])
    stack = VolumeStack(item.volume)
    while not stack.complete:
        stack.step()
    assert stack.array.shape == (5, 20, 24) and stack.array[2, 10, 23] == 1000  # [k, row = j, col = i]
    view = ThreePlaneView()
    qtbot.addWidget(view)
    view.resize(900, 400)
    view.show()
    view.set_volume(PlaneVolume(stack.array, None, item.volume.spacing, item.volume.affine, (500, 1000),
                                label_colors(())), point=(2, 10, 23))
    QApplication.processEvents()
    axial = view.panes["axial"]
    assert axial.letters == AXIAL_LETTERS and view.panes["coronal"].letters == CORONAL_LETTERS
    assert view.panes["sagittal"].letters == SAGITTAL_LETTERS
    assert axial.cross_position().x() < axial.picture_rect().center().x()  # the right-most voxel: screen left
    assert _pixel(axial, axial.cross_position())[0] > 200  # the marker is drawn there (bright)
    assert "R 20.7" in view.info.text()  # its patient position, said in letters: 23 × 0.9 mm to the right


def _wheel(pane, delta: int, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    at = QPointF(pane.viewport().rect().center())
    event = QWheelEvent(at, pane.viewport().mapToGlobal(at), QPoint(), QPoint(0, delta), Qt.MouseButton.NoButton,
                        modifiers, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(pane.viewport(), event)


def test_another_threshold_recounts_the_mask_and_says_so_meanwhile(qtbot, make_main_window, ct_model, tmp_path):
    """The panes never pass the previous threshold's mask off as the current one: a note says whose it is until
    the volume is counted again, then the new mask replaces it."""
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    before = planes.volume.labels
    notes, asked = [], []
    note = planes.set_note
    planes.set_note = lambda text: (notes.append(text), note(text))  # every note the panes showed, in order
    win.volumes.fill_requested.connect(asked.append)
    win.panel.decision.nudge(400)  # 0.5 → 0.9: the volume is counted again (was: only at the next slice step)
    qtbot.waitUntil(lambda: planes.volume.labels is not before, timeout=TIMEOUT)
    assert [request.threshold for request in asked] == [pytest.approx(0.9)]  # the legend's mL follow too
    assert notes[0].startswith("The mask shown is at the previous threshold; the volume is being counted at the "
                               "new one (0 / 6 slices)"), notes
    assert planes.note.text() == "" and not planes.note.isVisible()
    assert planes.volume.labels.shape == before.shape


def test_another_model_clears_the_mask_until_it_has_counted_the_volume(qtbot, make_main_window, ct_model, models,
                                                                      tmp_path):
    """A mask of the previous model would be read as the new one's: none is shown, and a note says why, until the
    new model has counted the whole volume; then its mask is shown."""
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    notes = []
    note = planes.set_note
    planes.set_note = lambda text: (notes.append(text), note(text))
    other = models("binary_logits", "other")
    other.with_suffix(".yaml").write_text("input:\n  window: [500, 400]\n")  # the disc (+60 HU) is below: empty
    with qtbot.waitSignal(win.model_changed, timeout=TIMEOUT):
        win.open_model(other)
    before = planes.volume.labels
    qtbot.waitUntil(lambda: bool(notes), timeout=TIMEOUT)
    assert notes[0].startswith("No mask yet: the volume is being counted with the new model"), notes
    qtbot.waitUntil(lambda: planes.volume.labels is not None and planes.volume.labels is not before
                    and not planes.note.isVisible(), timeout=TIMEOUT)
    assert planes.isVisible() and int(planes.volume.labels.max()) == 0  # the new model's (empty) mask


def test_holding_space_hides_the_panes_overlay(qtbot, make_main_window, ct_model, tmp_path):
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow, timeout=TIMEOUT)
    axial = planes.panes["axial"]
    qtbot.keyPress(axial, Qt.Key.Key_Space)
    assert not any(pane._overlay_item.isVisible() for pane in planes.panes.values())
    qtbot.keyRelease(axial, Qt.Key.Key_Space)
    assert all(pane._overlay_item.isVisible() for pane in planes.panes.values())


def test_a_right_drag_in_a_pane_sets_the_window_of_every_pane_and_the_one_pane_view(qtbot, make_main_window,
                                                                                   ct_model, tmp_path):
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    assert planes.display_window == (40.0, 400.0)  # the series' own window
    sagittal = planes.panes["sagittal"].viewport()
    start = sagittal.rect().center()
    qtbot.mousePress(sagittal, Qt.MouseButton.RightButton, pos=start)
    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT):
        qtbot.mouseMove(sagittal, start + QPoint(40, 0))  # right: a wider window
    qtbot.mouseRelease(sagittal, Qt.MouseButton.RightButton, pos=start + QPoint(40, 0))
    assert planes.display_window == win.display_window and planes.display_window[1] > 400
    from app.io.window import apply_window

    win.panel.controls.set_overlay_visible(False)  # the disc's own grey level, through the dragged window
    QApplication.processEvents()
    axial = planes.panes["axial"]
    grey = int(apply_window(np.array([60.0]), *planes.display_window)[0])
    assert grey != int(apply_window(np.array([60.0]), 40, 400)[0])
    assert _pixel(axial, axial.position_of(18, 14)) == (grey, grey, grey)  # +60 HU, off the crosshair's lines


@pytest.mark.parametrize("acquired", ["axial", "coronal", "sagittal", "oblique"])
def test_every_acquisition_plane_gets_the_standard_panes(acquired):
    """Whatever plane a series was acquired in, each pane shows its patient plane the standard way: a voxel at the
    patient's left shows right of the axial pane's centre, one superior shows above the coronal pane's centre."""
    from app.io.geometry import dicom_affine
    from app.ui.widgets.three_plane_axes import plane_axes
    from tests.dicom_factory import AXIAL, CORONAL, SAGITTAL, oblique

    orientation = {"axial": AXIAL, "coronal": CORONAL, "sagittal": SAGITTAL, "oblique": oblique(20)}[acquired]
    affine = dicom_affine(orientation, (0.0, 0.0, 0.0), step=2.0, pixel_spacing=(1.0, 1.0))
    shape = (9, 9, 9)
    panes = plane_axes(affine)
    assert panes["axial"].letters(affine)["left"][0] == "R" and panes["axial"].letters(affine)["top"][0] == "A"
    assert panes["coronal"].letters(affine)["top"][0] == "S" and panes["sagittal"].letters(affine)["left"][0] == "A"
    assert len({pane.normal for pane in panes.values()}) == 3  # three distinct planes, even when oblique

    def voxel_toward(ras) -> tuple[int, int, int]:
        """The native voxel (k, row, col) 4 voxels from the centre toward RAS direction `ras`."""
        to_native = np.linalg.inv(affine)
        centre = affine @ np.array([4.0, 4.0, 4.0, 1.0])
        i, j, k = (to_native @ (centre + np.array([*ras, 0.0]) * 4 * np.array([1.0, 1.0, 1.0, 0])))[:3]
        return round(k), round(j), round(i)

    for pane_name, direction, axis, sign in (("axial", (-1, 0, 0), 0, +1), ("coronal", (0, 0, 1), 1, -1),
                                             ("sagittal", (0, -1, 0), 0, +1)):
        volume = np.zeros(shape, np.uint8)
        point = voxel_toward(direction)  # the patient's left / superior / posterior of the centre
        volume[point] = 1
        pane = panes[pane_name]
        picture = pane.view(volume, point[pane.normal])
        assert picture.base is not None  # a view into the volume, not a copy
        y, x = np.argwhere(picture == 1)[0]
        offset = (x - 4) if axis == 0 else (y - 4)
        assert offset * sign > 0, (pane_name, (y, x))
        assert pane.to_screen(point, shape) == (x, y)
        assert pane.from_screen((4, 4, 4), int(x), int(y), shape)[pane.across] == point[pane.across]


def test_a_volume_without_geometry_claims_no_anatomy(qtbot):
    """No affine (a series without positions): no letters, square voxels, and the panes named for how they cut
    the stored slices, not Axial / Coronal / Sagittal."""
    from app.ui.widgets.three_plane import PlaneVolume, ThreePlaneView, label_colors

    view = ThreePlaneView()
    qtbot.addWidget(view)
    view.resize(900, 400)
    view.show()
    image = np.zeros((4, 10, 12), np.uint8)
    view.set_volume(PlaneVolume(image, None, None, None, None, label_colors(())), point=(1, 2, 3))
    assert [pane.letters for pane in view.panes.values()] == [None, None, None]
    assert [pane.title for pane in view.panes.values()] == ["Slices as stored  2 / 4", "Across rows  3 / 10",
                                                             "Across columns  4 / 12"]
    rect = view.panes["coronal"].picture_rect()
    assert abs(rect.height() / rect.width() - 4 / 12) < 0.02
    assert "mm" not in view.info.text() and view.info.text().startswith("Slice 2 · row 3 · column 4")


def test_switching_volumes_with_the_panes_open_names_the_next_as_its_row_does(qtbot, make_main_window, ct_model,
                                                                              tmp_path):
    """"Reading <series>…" over the panes names the series by its label, never by its SeriesInstanceUID."""
    win, planes = _open_planes(qtbot, make_main_window, ct_model, tmp_path)
    write_series(tmp_path / "ct2", slices=4, description="Second series")
    notes = []
    note = planes.set_note
    planes.set_note = lambda text: (notes.append(text), note(text))
    win.add_paths([tmp_path / "ct2"])
    second = next(path for path in win.files.paths() if win.files.volume(path).slices[0].path.parent.name == "ct2")
    win.files.select_path(second)
    qtbot.waitUntil(lambda: any(text.startswith("Reading") for text in notes), timeout=TIMEOUT)
    reading = next(text for text in notes if text.startswith("Reading"))
    assert reading == f"Reading {win.files.volume(second).label}…" and "Second series" in reading, notes
