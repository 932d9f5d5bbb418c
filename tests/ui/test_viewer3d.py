"""A 3D model in the viewer (app/ui/controllers/volume3d.py, app/ui/workers/worker_volume3d.py,
app/runs/view/result3d.py): run once over the volume shown with its progress, then every slice's overlay, the
threshold, the legend's mL and the three planes from the kept result — no second model run; a plain image gets one
line; Cancel leaves no result."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PIL import Image
from spec3d_models import sigmoid3d, with_sidecar
from waiting import round_trip

from app.inference.model.builder import load_spec
from app.inference.runtime.session import LocalSession
from app.inference.volume3d.predict import predict_volume
from app.io.discover import discover
from app.io.stack import VolumeStack
from tests.dicom_factory import write_series

TIMEOUT = 20_000
SPACING = (2.0, 0.8, 0.7)  # mm along slices, rows, columns
SHAPE = (12, 32, 32)  # slices, rows, columns
CENTRES = ((4, 10, 10), (7, 20, 22))  # two blobs: a small one and a larger one
RADII = (2.5, 4.0)  # in voxels


def blobs() -> np.ndarray:
    """[D, H, W] values 0..100: two Gaussian blobs, so the model's probability falls off smoothly from each centre
    (the threshold moves the edge)."""
    k, r, c = np.meshgrid(*[np.arange(n, dtype=np.float32) for n in SHAPE], indexing="ij")
    out = np.zeros(SHAPE, np.float32)
    for (k0, r0, c0), radius in zip(CENTRES, RADII, strict=True):
        out = np.maximum(out, 100 * np.exp(-((k - k0) ** 2 + (r - r0) ** 2 + (c - c0) ** 2) / (2 * radius ** 2)))
    return out


def write_blobs(path):
    import nibabel as nib

    data = np.round(blobs()).astype(np.int16).transpose(2, 1, 0)  # NIfTI (i, j, k) = (column, row, slice)
    affine = np.diag([SPACING[2], SPACING[1], SPACING[0], 1.0])
    nib.save(nib.Nifti1Image(data, affine), str(path))
    return path


@pytest.fixture
def model3d(tmp_path):
    """sigmoid(20 · (x/100 − 0.5)): a binary 3D model, 50 the edge; patches of 4 × 16 × 16 (45 over the volume)."""
    return with_sidecar(sigmoid3d(tmp_path / "blob3d.onnx"), "input:\n  patch: [4, 16, 16]\n  scale: 0.01\n"
                                                            "classes:\n  - background\n"
                                                            "  - {name: lesion, color: '#ff0000'}\n")


def reference(model, path):
    """predict_volume's own answer for the file at `path` (its image read as the viewer reads it)."""
    (item,) = discover([path])
    stack = VolumeStack(item.volume)
    while not stack.complete:
        stack.step()
    from app.inference.runtime.session import open_session

    session = open_session(load_spec(model), "cpu")
    return predict_volume(stack.array, spacing=item.volume.spacing, affine=item.volume.affine, spec=session.spec,
                          run_raw=session.run)


def open_volume(qtbot, win, path):
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([path])
    qtbot.waitUntil(lambda: "all 12 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)


def show_slice(qtbot, win, k):
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.show_path(win.files.current_path(), k)
    assert win.state.on_screen.frame == k


def test_each_slices_overlay_is_predict_volumes_labels_and_stepping_runs_nothing(
        qtbot, make_main_window, model3d, tmp_path, model_runs):
    nifti = write_blobs(tmp_path / "blobs.nii.gz")
    expected = reference(model3d, nifti)
    win = make_main_window(model3d)
    progress = []
    win.worker.volume_progress.connect(lambda p: progress.append((p.stage, p.done, p.total)))
    open_volume(qtbot, win, nifti)
    runs = len(model_runs)
    assert ("patches", 45, 45) in progress and progress[-1][0] == "done"
    for k in (0, 4, 7, 11, 3):  # back and forth through the volume
        show_slice(qtbot, win, k)
        np.testing.assert_array_equal(win.state.on_screen.display_mask, expected.labels[k])
    assert len(model_runs) == runs, "a slice of a 3D result is no model run"
    voxel_ml = SPACING[0] * SPACING[1] * SPACING[2] / 1000
    assert win.panel.legend.volume_figures() == {1: f"{expected.labels.sum() * voxel_ml:,.2f} mL"}
    assert "3D model over the whole volume, 45 patches" in win.status.currentMessage()


def test_the_threshold_moves_the_mask_and_the_volume_without_a_run(qtbot, make_main_window, model3d, tmp_path,
                                                                    model_runs):
    nifti = write_blobs(tmp_path / "blobs.nii.gz")
    expected = reference(model3d, nifti)
    win = make_main_window(model3d)
    open_volume(qtbot, win, nifti)
    show_slice(qtbot, win, 7)
    runs = len(model_runs)
    before = int(win.state.on_screen.display_mask.sum())
    with qtbot.waitSignal(win.tuner.retuned_shown, timeout=TIMEOUT):
        win.panel.decision.nudge(400)  # 0.5 → 0.9
    assert win.state.tuning.threshold == pytest.approx(0.9)
    mask = win.state.on_screen.display_mask
    np.testing.assert_array_equal(mask, expected.probabilities[0, 7].astype(np.float32) > 0.9)
    assert 0 < mask.sum() < before
    voxel_ml = SPACING[0] * SPACING[1] * SPACING[2] / 1000
    whole = int((expected.probabilities[0].astype(np.float32) > 0.9).sum())
    qtbot.waitUntil(lambda: win.panel.legend.volume_figures() == {1: f"{whole * voxel_ml:,.2f} mL"},
                    timeout=TIMEOUT)
    show_slice(qtbot, win, 4)  # another slice at the new threshold: from the kept probabilities too
    np.testing.assert_array_equal(win.state.on_screen.display_mask,
                                  expected.probabilities[0, 4].astype(np.float32) > 0.9)
    assert len(model_runs) == runs, "the threshold decides again from the kept probabilities"


def test_cancel_stops_the_run_and_leaves_no_result(qtbot, make_main_window, model3d, tmp_path, monkeypatch):
    nifti = write_blobs(tmp_path / "blobs.nii.gz")
    win = make_main_window(model3d)
    release, calls = threading.Event(), []
    original = LocalSession.run

    def held(self, tensor):  # the first patch waits until the reader has pressed Cancel
        calls.append(tensor.shape)
        release.wait(TIMEOUT / 1000)
        return original(self, tensor)

    monkeypatch.setattr(LocalSession, "run", held)
    results = []
    win.worker.result_ready.connect(results.append)
    win.add_paths([nifti])
    qtbot.waitUntil(lambda: win.volume3d.running == str(nifti), timeout=TIMEOUT)
    assert win.status.run_shown
    win.status.cancel_requested.emit()  # the status bar's Cancel
    release.set()
    qtbot.waitUntil(lambda: "was cancelled" in win.status.currentMessage(), timeout=TIMEOUT)
    round_trip(qtbot, through=win.worker)  # the slice's own request, answered after the stop, and that answer taken
    assert len(calls) < 45 and not results
    assert win.state.on_screen is None and win.viewer.overlay_item.pixmap().isNull()
    assert not win.status.run_shown and win.files.status(str(nifti)) == "pending"
    assert win.panel.legend.volume_text() == ""


def test_a_plain_image_with_a_3d_model_gets_one_line(qtbot, make_main_window, model3d, tmp_path):
    Image.fromarray(np.full((32, 32), 100, np.uint8)).save(tmp_path / "photo.png")
    win = make_main_window(model3d)
    with qtbot.waitSignal(win.image_failed, timeout=TIMEOUT) as failed:
        win.add_paths([tmp_path / "photo.png"])
    assert failed.args[1] == (f"{tmp_path / 'photo.png'}: blob3d.onnx is a 3D model: open a volume — a DICOM "
                              "series or a NIfTI file")
    assert win.status.currentMessage() == f"Error: {failed.args[1]}"


def test_a_dicom_series_runs_through_the_3d_model_too(qtbot, make_main_window, model3d, tmp_path, model_runs):
    write_series(tmp_path / "ct", slices=12)  # discs of +60 HU in air: 0.6 after the scale, over the edge
    expected = reference(model3d, tmp_path / "ct")
    win = make_main_window(model3d)
    open_volume(qtbot, win, tmp_path / "ct")
    runs = len(model_runs)
    show_slice(qtbot, win, 5)
    np.testing.assert_array_equal(win.state.on_screen.display_mask, expected.labels[5])
    assert expected.labels[5].any() and len(model_runs) == runs


def _toggle(win):
    (action,) = [a for a in win.findChildren(type(win.menuBar().actions()[0])) if a.text().startswith("Three planes")]
    return action


def test_the_lesion_list_names_each_component_and_a_click_goes_to_its_centre(qtbot, make_main_window, model3d,
                                                                             tmp_path):
    from app.inference.decide.lesions import lesions

    nifti = write_blobs(tmp_path / "blobs.nii.gz")
    expected = reference(model3d, nifti)
    voxel_ml = SPACING[0] * SPACING[1] * SPACING[2] / 1000
    large, small = lesions(expected.labels, voxel_ml=voxel_ml, connectivity=26)
    assert large.voxels > small.voxels
    win = make_main_window(model3d)
    open_volume(qtbot, win, nifti)
    group = win.panel.lesion_list()
    assert group.isVisible()

    def row(lesion, name):
        (k0, k1), (r0, r1), (c0, c1) = lesion.bbox
        longest = max((k1 - k0) * SPACING[0], (r1 - r0) * SPACING[1], (c1 - c0) * SPACING[2])
        size = f"{longest:.1f} mm" if longest < 10 else f"{longest:.0f} mm"
        return name, f"{lesion.ml:.2f}", f"{k0 + 1}–{k1}", size

    assert group.rows() == [row(large, "lesion 1"), row(small, "lesion 2")]
    assert group.summary_text() == "lesion: 2\n26-connected (faces, edges and corners touch)"
    k = round(small.centroid[0])
    assert k != win.state.on_screen.frame
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        group.click_row(1)  # one pane: the slice through the small lesion's centre
    assert win.state.on_screen.frame == k
    toggle = _toggle(win)
    qtbot.waitUntil(toggle.isEnabled, timeout=TIMEOUT)
    with qtbot.waitSignal(win.volumes.planes_shown, timeout=TIMEOUT):
        toggle.trigger()
    planes = win.volumes.planes
    np.testing.assert_array_equal(planes.volume.labels, expected.labels)  # the panes show the 3D result
    with qtbot.waitSignal(planes.point_changed, timeout=TIMEOUT):
        group.click_row(0)
    assert planes.point == tuple(round(v) for v in large.centroid)
    assert planes.volume.labels[planes.point] == 1  # on the lesion


def test_a_2d_models_counted_volume_lists_its_components(qtbot, make_main_window, ct_model, tmp_path):
    write_series(tmp_path / "ct", slices=6)  # one disc per slice, growing: one 26-connected component
    win = make_main_window(ct_model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "ct"])
    qtbot.waitUntil(lambda: "all 6 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: win.panel.lesion_list().isVisible(), timeout=TIMEOUT)
    ((name, ml, slices, _size),) = win.panel.lesion_list().rows()
    assert (name, slices) == ("disc 1", "1–6")
    assert win.panel.legend.volume_figures() == {1: f"{ml} mL"}  # the one component is the whole class
