"""A 3D model's run in the viewer as a reader lives through it (app/ui/controllers/volume3d.py, the slice preview,
app/ui/workers/worker_volume3d.py): the volume's slices are on the canvas while the model runs (the image first,
the overlay when it comes, the progress drawn over the canvas), and they stay after Cancel; a result is kept for
the session, so going back to a volume runs nothing, Three planes stays open across the switch, and the side panel
shows the facts of the volume selected, never those of a volume whose run ends meanwhile."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QPushButton
from spec3d_models import sigmoid3d, with_sidecar
from waiting import round_trip

from app.inference.runtime.session import LocalSession

TIMEOUT = 20_000
SPACING = (2.0, 0.8, 0.7)  # mm along slices, rows, columns
SIDE = 32
PATCHES = {12: 45, 10: 36}  # patches of 4 × 16 × 16 over a volume of that many slices


def blob_volume(depth: int, centre: tuple[int, int, int], radius: float) -> np.ndarray:
    """[D, 32, 32] values 0..100: one Gaussian blob (the model's edge at 50)."""
    k, r, c = np.meshgrid(np.arange(depth, dtype=np.float32), np.arange(SIDE, dtype=np.float32),
                          np.arange(SIDE, dtype=np.float32), indexing="ij")
    k0, r0, c0 = centre
    return 100 * np.exp(-((k - k0) ** 2 + (r - r0) ** 2 + (c - c0) ** 2) / (2 * radius ** 2))


def write_nifti(path, data: np.ndarray):
    import nibabel as nib

    voxels = np.round(data).astype(np.int16).transpose(2, 1, 0)  # NIfTI (i, j, k) = (column, row, slice)
    nib.save(nib.Nifti1Image(voxels, np.diag([SPACING[2], SPACING[1], SPACING[0], 1.0])), str(path))
    return path


@pytest.fixture
def volumes(tmp_path):
    """Two volumes in one folder: A (12 slices, a blob at slice 7) and B (10 slices, a blob at slice 3)."""
    folder = tmp_path / "volumes"
    folder.mkdir()
    a = write_nifti(folder / "a.nii.gz", blob_volume(12, (7, 20, 22), 4.0))
    b = write_nifti(folder / "b.nii.gz", blob_volume(10, (3, 12, 12), 3.5))
    return folder, str(a), str(b)


@pytest.fixture
def model3d(tmp_path):
    """sigmoid(20 · (x/100 − 0.5)): a binary 3D model, 50 the edge; patches of 4 × 16 × 16."""
    return with_sidecar(sigmoid3d(tmp_path / "blob3d.onnx"), "input:\n  patch: [4, 16, 16]\n  scale: 0.01\n"
                                                            "classes:\n  - background\n"
                                                            "  - {name: lesion, color: '#ff0000'}\n")


class Held:
    """LocalSession.run held at its `at`-th call (1-based) until `release()`: a run the test stops in the middle."""

    def __init__(self, monkeypatch, at: int = 1) -> None:
        self.calls: list[tuple] = []
        self.at, self.reached, self._go = at, threading.Event(), threading.Event()
        original = LocalSession.run

        def run(session, tensor):
            self.calls.append(tensor.shape)
            if len(self.calls) == self.at:
                self.reached.set()
                self._go.wait(TIMEOUT / 1000)
            return original(session, tensor)

        monkeypatch.setattr(LocalSession, "run", run)

    def release(self) -> None:
        self._go.set()


def centre_pixels(win) -> np.ndarray:
    """The middle half of the canvas as [H, W, 3] (away from the orientation letters at its edges)."""
    image = win.viewer.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB888)
    width, height = image.width(), image.height()
    pixels = np.frombuffer(image.constBits(), np.uint8, image.bytesPerLine() * height).reshape(height, -1)
    pixels = pixels[:, :width * 3].reshape(height, width, 3)
    return pixels[height // 4: 3 * height // 4, width // 4: 3 * width // 4].copy()


def shows_a_picture(win) -> bool:
    """The canvas is not uniformly its empty background: pixels of an image are drawn there."""
    pixels = centre_pixels(win)
    return len(np.unique(pixels.reshape(-1, 3), axis=0)) > 1


def select(qtbot, win, path: str) -> None:
    win.files.select_path(path)  # as a click on its row
    qtbot.waitUntil(lambda: win.files.current_path() == path, timeout=TIMEOUT)


def done_runs(win) -> list[str]:
    done: list[str] = []
    win.worker.volume_progress.connect(lambda p: done.append(p.path) if p.stage == "done" else None)
    return done


def test_the_slices_are_on_the_canvas_while_the_model_runs(qtbot, make_main_window, model3d, volumes, monkeypatch):
    _folder, a, _b = volumes
    win = make_main_window(model3d)
    held = Held(monkeypatch)
    win.add_paths([a])
    qtbot.waitUntil(lambda: win.volume3d.running == a and held.reached.is_set(), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: shows_a_picture(win), timeout=TIMEOUT)  # the image, before any overlay
    assert win.viewer.overlay_item.pixmap().isNull()
    banner = win.volume3d.banner
    qtbot.waitUntil(lambda: banner.isVisible() and "3D model" in banner.text(), timeout=TIMEOUT)
    assert "Cancel" in banner.cancel_text()
    first = centre_pixels(win)
    win.show_path(a, 7)  # paging while the model runs: slice 7's picture (its blob)
    qtbot.waitUntil(lambda: shows_a_picture(win) and not np.array_equal(centre_pixels(win), first),
                    timeout=TIMEOUT)
    assert "8 / 12" in win.panel.image_info.text.text()  # the facts of the slice shown
    held.release()
    qtbot.waitUntil(lambda: win.state.on_screen is not None, timeout=TIMEOUT)  # the overlay when it comes
    assert win.state.on_screen.frame == 7 and not win.viewer.overlay_item.pixmap().isNull()
    qtbot.waitUntil(lambda: not banner.isVisible(), timeout=TIMEOUT)


def test_after_cancel_the_image_stays_and_paging_changes_it(qtbot, make_main_window, model3d, volumes, monkeypatch):
    _folder, a, _b = volumes
    win = make_main_window(model3d)
    held = Held(monkeypatch)
    win.add_paths([a])
    qtbot.waitUntil(lambda: win.volume3d.running == a and held.reached.is_set(), timeout=TIMEOUT)
    qtbot.waitUntil(win.volume3d.banner.isVisible, timeout=TIMEOUT)
    (cancel,) = win.volume3d.banner.findChildren(QPushButton)
    qtbot.mouseClick(cancel, Qt.MouseButton.LeftButton)  # the Cancel drawn over the canvas
    held.release()
    qtbot.waitUntil(lambda: "was cancelled" in win.status.currentMessage(), timeout=TIMEOUT)
    round_trip(qtbot, through=win.worker)
    qtbot.waitUntil(lambda: shows_a_picture(win), timeout=TIMEOUT)
    assert win.state.on_screen is None and win.viewer.overlay_item.pixmap().isNull()  # no result of the run
    assert win.volume3d.banner.isVisible() and cancel.text() == "Run again"  # the one volume: run it again here
    before = centre_pixels(win)
    win.show_path(a, 7)
    qtbot.waitUntil(lambda: shows_a_picture(win) and not np.array_equal(centre_pixels(win), before),
                    timeout=TIMEOUT)
    assert win.viewer.overlay_item.pixmap().isNull() and len(held.calls) < PATCHES[12]
    qtbot.mouseClick(cancel, Qt.MouseButton.LeftButton)  # Run again
    qtbot.waitUntil(lambda: "3D model over the whole volume" in win.status.currentMessage(), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: not win.viewer.overlay_item.pixmap().isNull(), timeout=TIMEOUT)  # its result


def _toggle(win):
    (action,) = [a for a in win.findChildren(type(win.menuBar().actions()[0])) if a.text().startswith("Three planes")]
    return action


def open_folder(qtbot, win, folder, done) -> tuple[str, str]:
    """The folder of two volumes opened and the first one's run done: (the first volume, the other)."""
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([folder])
    first = win.files.current_path()
    qtbot.waitUntil(lambda: done == [first], timeout=TIMEOUT)
    (other,) = [path for path in win.files.paths() if path != first]
    return first, other


def test_going_back_to_a_volume_runs_the_model_twice_not_three_times(qtbot, make_main_window, model3d, volumes,
                                                                     model_runs):
    folder, a, b = volumes
    win = make_main_window(model3d)
    warm_up = len(model_runs)
    done = done_runs(win)
    first, other = open_folder(qtbot, win, folder, done)
    depth = {a: 12, b: 10}
    select(qtbot, win, other)
    qtbot.waitUntil(lambda: win.state.on_screen is not None and str(win.state.on_screen.path) == other,
                    timeout=TIMEOUT)
    runs = len(model_runs)
    assert done == [first, other] and runs - warm_up == PATCHES[12] + PATCHES[10]
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        select(qtbot, win, first)
    qtbot.waitUntil(lambda: f"all {depth[first]} slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    round_trip(qtbot, through=win.worker)
    assert done == [first, other], "the first volume's kept result is shown again: no third run"
    assert len(model_runs) == runs
    assert str(win.state.on_screen.path) == first and not win.viewer.overlay_item.pixmap().isNull()


def test_three_planes_stays_open_across_a_switch_to_another_volume_and_back(qtbot, make_main_window, model3d,
                                                                            volumes):
    folder, a, b = volumes
    win = make_main_window(model3d)
    done = done_runs(win)
    first, other = open_folder(qtbot, win, folder, done)
    toggle = _toggle(win)
    qtbot.waitUntil(toggle.isEnabled, timeout=TIMEOUT)
    with qtbot.waitSignal(win.volumes.planes_shown, timeout=TIMEOUT):
        toggle.trigger()
    planes = win.volumes.planes
    depth = {a: 12, b: 10}

    def planes_show(path):
        return (planes.isVisible() and planes.volume is not None and planes.volume.image.shape[0] == depth[path]
                and planes.volume.labels is not None)

    select(qtbot, win, other)
    qtbot.waitUntil(lambda: planes_show(other), timeout=TIMEOUT)
    assert toggle.isChecked() and not win.viewer.isVisible()
    select(qtbot, win, first)
    qtbot.waitUntil(lambda: planes_show(first), timeout=TIMEOUT)
    assert toggle.isChecked() and planes.volume.labels.any()


def test_the_panel_shows_the_selected_volumes_facts_while_another_run_finishes(qtbot, make_main_window, model3d,
                                                                               volumes, monkeypatch):
    _folder, a, b = volumes
    win = make_main_window(model3d)
    held = Held(monkeypatch, at=PATCHES[12])  # A's last patch waits
    done = done_runs(win)
    counted: list[str] = []
    win.worker.volume_counted.connect(lambda count: counted.append(count.path))
    win.add_paths([a, b])
    qtbot.waitUntil(lambda: held.reached.is_set(), timeout=TIMEOUT)
    select(qtbot, win, b)
    qtbot.waitUntil(lambda: "1 / 10" in win.panel.image_info.text.text() and shows_a_picture(win), timeout=TIMEOUT)
    held.release()
    qtbot.waitUntil(lambda: a in done and a in counted, timeout=TIMEOUT)  # A's run ended, its result came back
    round_trip(qtbot)
    text = win.panel.image_info.text.text()
    assert "1 / 10" in text and "/ 12" not in text
    assert win.state.on_screen is None or str(win.state.on_screen.path) == b
    assert win.panel.legend.volume_text() == "" or "10 slices" in win.panel.legend.volume_text()
    qtbot.waitUntil(lambda: win.state.on_screen is not None, timeout=TIMEOUT)  # B's own result, on B
    assert str(win.state.on_screen.path) == b and not win.viewer.overlay_item.pixmap().isNull()
    assert "1 / 10" in win.panel.image_info.text.text()
    calls = len(held.calls)
    select(qtbot, win, a)  # A finished before it was left: kept, not run again
    qtbot.waitUntil(lambda: win.state.on_screen is not None and str(win.state.on_screen.path) == a, timeout=TIMEOUT)
    assert len(held.calls) == calls and done.count(a) == 1


def test_a_volume_shown_with_a_result_then_another_running_shows_the_others_facts(qtbot, make_main_window, model3d,
                                                                                  volumes, monkeypatch):
    _folder, a, b = volumes
    win = make_main_window(model3d)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([a, b])
    assert "1 / 12" in win.panel.image_info.text.text()
    held = Held(monkeypatch)
    select(qtbot, win, b)
    qtbot.waitUntil(lambda: win.volume3d.running == b and held.reached.is_set(), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: "1 / 10" in win.panel.image_info.text.text(), timeout=TIMEOUT)
    assert "/ 12" not in win.panel.image_info.text.text()
    assert win.viewer.overlay_item.pixmap().isNull()  # A's mask is not drawn over B
    assert win.panel.legend.volume_text() == ""
    held.release()
