"""The viewer, offscreen: drop, overlay pixels, controls, worker thread, errors, close, status bar."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from conftest import stripes
from onnx_factory import class_metadata
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from app.ui.state.view_state import DisplayMode

TIMEOUT = 20_000
GREEN_CLASS = (0, 200, 0)  # sidecar colours, easy to check in pixels
BLUE_CLASS = (0, 0, 255)


@pytest.fixture
def model(models):
    path = models("rgb_classes", metadata=class_metadata(["bg", "green", "blue"]))
    path.with_suffix(".yaml").write_text(
        "classes:\n  - {name: bg}\n  - {name: green, color: '#00c800'}\n  - {name: blue, color: '#0000ff'}\n")
    return path


@pytest.fixture
def images(tmp_path):
    root = tmp_path / "images"
    (root / "nested").mkdir(parents=True)
    Image.fromarray(stripes(60, 90)).save(root / "a1.png")
    (root / "a2.png").write_bytes(b"this is text, not a PNG")
    Image.fromarray(stripes(30, 45)).save(root / "nested" / "b.png")
    (root / "readme.txt").write_text("ignored: not an image extension")
    return root


@pytest.fixture
def window(make_main_window, model):
    return make_main_window(model)


def drop(window, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    try:  # Qt 6.12 takes QPointF; earlier versions QPoint
        enter = QDragEnterEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    except TypeError:
        enter = QDragEnterEvent(QPointF(10, 10).toPoint(), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, event)


def show_and_wait(qtbot, window, row):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.files.setCurrentRow(row)


def pixel(window, x, y):
    color = window.viewer.render_scene().pixelColor(x, y)
    return np.array([color.red(), color.green(), color.blue()])


def test_drop_folder_populates_list_and_bad_file_is_error(qtbot, window, images):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        drop(window, [images])
    assert [p.split("images/")[1] for p in window.files.paths()] == ["a1.png", "a2.png", "nested/b.png"]
    assert window.files.status(window.files.paths()[0]) == "done"
    with qtbot.waitSignal(window.image_failed, timeout=TIMEOUT):
        window.files.setCurrentRow(1)
    bad = window.files.paths()[1]
    assert window.files.status(bad) == "error"
    assert "a2.png" in window.files.currentItem().toolTip() and "not an image" in window.files.currentItem().toolTip()
    assert "a2.png" in window.status.currentMessage()
    show_and_wait(qtbot, window, 2)  # the next image still works
    assert window.files.status(window.files.paths()[2]) == "done"


def test_overlay_pixels_carry_class_colours_at_the_opacity(qtbot, window, images):
    window.add_paths([images / "a1.png"])
    qtbot.waitUntil(lambda: window.files.status(str(images / "a1.png")) == "done", timeout=TIMEOUT)
    window.panel.controls.set_opacity(0.4)
    red, green, blue = stripes(60, 90)[30, 10], stripes(60, 90)[30, 45], stripes(60, 90)[30, 80]
    assert np.abs(pixel(window, 10, 30) - red).max() <= 2  # background: not painted
    expected_green = 0.6 * green + 0.4 * np.array(GREEN_CLASS)
    expected_blue = 0.6 * blue + 0.4 * np.array(BLUE_CLASS)
    assert np.abs(pixel(window, 45, 30) - expected_green).max() <= 3
    assert np.abs(pixel(window, 80, 30) - expected_blue).max() <= 3

    window.panel.controls.set_opacity(1.0)
    assert np.abs(pixel(window, 45, 30) - GREEN_CLASS).max() <= 2

    window.panel.legend.set_hidden(1, True)  # hide "green"
    assert np.abs(pixel(window, 45, 30) - green).max() <= 2
    assert np.abs(pixel(window, 80, 30) - BLUE_CLASS).max() <= 2
    window.panel.legend.set_hidden(1, False)

    window.panel.controls.set_mode(DisplayMode.CONTOUR)  # inside plain, edges coloured
    assert np.abs(pixel(window, 45, 30) - green).max() <= 2
    assert np.abs(pixel(window, 30, 30) - GREEN_CLASS).max() <= 2  # the green region's left border

    window.panel.controls.set_overlay_visible(False)
    assert np.abs(pixel(window, 30, 30) - green).max() <= 2


def test_switching_model_rebuilds_the_session_on_the_worker_thread(qtbot, window, models):
    other = models("binary_logits", name="other")
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        window.open_model(other)
    assert window.summary.spec.path == other
    threads = window.worker.session_threads
    assert len(threads) == 2 and threads[0] == threads[1] != threading.get_ident()
    assert window.panel.legend.hidden() == set() and "other" in window.windowTitle()


def test_status_bar_shows_provider_and_latency(qtbot, window, images):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images / "a1.png"])
    assert window.status.provider.text() == "CPU"
    assert "inference" in window.status.latency.text() and window.status.latency.text().endswith("ms")
    assert window.status.image_size.text() == "90×60"
    assert window.status.gpu_memory.text().startswith(("GPU mem n/a", "GPU"))


def test_cuda_request_without_gpu_is_shown_as_a_warning(qtbot, window):
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        window.open_model(device="cuda")
    info = window.summary.info
    if info.on_gpu:
        pytest.skip("CUDA works here: there is no fallback to warn about (see the test with a GPU)")
    assert window.status.provider.text().startswith("⚠ CPU — CUDA requested but unavailable")
    assert info.fallback_reason in window.status.provider.toolTip()


def test_cuda_request_with_gpu_shows_the_gpu(qtbot, window):
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        window.open_model(device="cuda")
    info = window.summary.info
    if not info.on_gpu:
        pytest.skip(f"no working CUDA here ({info.fallback_reason}): the warning is tested instead")
    assert window.status.provider.text() == info.provider_label and "GPU" in info.provider_label
    assert info.fallback_reason is None


def test_run_on_all_exports_with_the_cli_writer(qtbot, window, images, tmp_path):
    window.add_paths([images])
    out = tmp_path / "export"
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(out)
    assert (out / "a1.png_mask.png").is_file() and (out / "nested" / "b.png_overlay.png").is_file()
    provenance = json.loads(Image.open(out / "a1.png_mask.png").text["SegLens"])  # the CLI's provenance too
    record = json.loads((out / "seglens_report.csv.run.json").read_text())
    assert provenance["model_sha256"] == record["model_sha256"][:12] and record["provider"] == provenance["provider"]
    report = (out / "seglens_report.csv").read_text().splitlines()
    assert len(report) == 4 and ",error," in report[2]
    assert [window.files.status(p) for p in window.files.paths()] == ["done", "error", "done"]


@pytest.mark.parametrize("where", ["the folder", "inside it"])
def test_run_on_all_into_an_input_folder_is_refused_before_anything_is_written(qtbot, window, images, where):
    window.add_paths([images])
    out = images if where == "the folder" else images / "nested" / "export"
    before = sorted(p.name for p in images.rglob("*"))
    with qtbot.waitSignal(window.runner.refused, timeout=TIMEOUT) as refused:
        window.run_all(out)
    assert str(images) in refused.args[0] and "not started" in window.status.currentMessage()
    assert not window.status.run_shown
    assert sorted(p.name for p in images.rglob("*")) == before  # nothing written, no user image replaced


def test_run_on_all_that_fails_unexpectedly_still_ends(qtbot, window, images, tmp_path, monkeypatch):
    import app.runs.folder.batch

    def broken(*_args, **_kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(app.runs.folder.batch, "run_inputs", broken)
    window.add_paths([images])
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT) as finished:
        window.run_all(tmp_path / "export")
    assert "unexpected error (OSError: [Errno 5] Input/output error)" in finished.args[1]
    assert not window.status.run_shown  # the progress bar and Cancel are gone


def test_run_on_all_leaves_a_core_to_the_window(qtbot, window, images, tmp_path):
    """On the CPU, Run on all uses its own session with one intra-op thread fewer than there are cores, created on
    the worker thread and kept for the next run; the interactive session is untouched."""
    import os

    window.add_paths([images])
    interactive = window.worker.session_info
    for run in range(2):
        with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
            window.run_all(tmp_path / f"export{run}")
    assert window.worker.session_info is interactive
    assert (tmp_path / "export1" / "a1.png_mask.png").is_file()
    threads = window.worker.session_threads
    if (os.cpu_count() or 1) < 2:
        assert window.worker.batch_session_threads is None and len(threads) == 1  # no core to leave free
        return
    assert window.worker.batch_session_threads == os.cpu_count() - 1
    assert len(threads) == 2 and threads[0] == threads[1] != threading.get_ident()  # once, on the worker thread


def test_close_joins_the_worker_threads(qtbot, window):
    threads = (window.worker_thread, window.display_thread)
    window.close()
    assert all(thread.isFinished() and not thread.isRunning() for thread in threads)


def test_settings_persist(qtbot, window, tmp_path):
    window.panel.controls.set_opacity(0.7)
    window.panel.controls.set_mode(DisplayMode.CONTOUR)
    window.close()
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    assert float(settings.value("opacity")) == pytest.approx(0.7)
    assert settings.value("contour", type=bool) is True and settings.value("device") == "cpu"


def test_settings_are_restored(make_main_window, model, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    settings.setValue("opacity", 0.3)
    settings.setValue("contour", True)
    settings.sync()
    window = make_main_window(model, load=False)
    assert window.state.overlay.opacity == pytest.approx(0.3)
    assert window.state.overlay.mode is DisplayMode.CONTOUR


def test_huge_image_gets_a_downscaled_display_copy_and_full_size_results(qtbot, make_main_window, models, tmp_path):
    win = make_main_window(models("fixed_size_classes", size=64))
    big = tmp_path / "big.png"
    Image.fromarray(stripes(3000, 12000)).save(big)  # 36 MP: wider than the display limit
    with qtbot.waitSignal(win.overlay_shown, timeout=60_000):
        win.add_paths([big])
    view = win.cached_view(str(big))
    assert view.result.mask.shape == (3000, 12000)
    assert max(view.display_pixels.shape[:2]) == 8192 and view.display_mask.shape == view.display_pixels.shape[:2]
    assert win.status.image_size.text() == "12000×3000"
    assert win.viewer.sceneRect().width() == 12000  # scene in full-resolution pixels


def test_stepping_quickly_skips_images_nobody_looks_at(qtbot, window, tmp_path):
    """Requests the window no longer wants are dropped by the worker unprocessed (one LatestRequest, shared), and
    their files go back to pending instead of staying 'running' for ever."""
    folder = tmp_path / "many"
    folder.mkdir()
    for index in range(6):
        Image.fromarray(stripes(200, 300)).save(folder / f"img{index}.png")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    paths = window.files.paths()
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT, check_params_cb=lambda path: path == paths[-1]):
        for row in range(1, len(paths)):  # faster than the worker: no events are processed in between
            window.files.setCurrentRow(row)
    qtbot.waitUntil(lambda: "running" not in [window.files.status(p) for p in paths], timeout=TIMEOUT)
    statuses = [window.files.status(p) for p in paths]
    assert statuses[0] == statuses[-1] == "done"
    assert "pending" in statuses[2:-1], statuses  # skipped, never run
    assert all(window.cached_view(p) is None for p, s in zip(paths, statuses, strict=True) if s == "pending")


def menu_action(window, menu: str, text: str):
    menus = {action.text().replace("&", ""): action.menu() for action in window.menuBar().actions()}
    found = [a for a in menus[menu].actions() if a.text() == text]
    for action in menus[menu].actions():
        if action.menu() is not None:
            found += [a for a in action.menu().actions() if a.text() == text]
    assert len(found) == 1, (menu, text)
    return found[0]


def test_keyboard_steps_through_the_list(qtbot, window, images):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images])
    window.activateWindow()
    menu_action(window, "View", "Next image").trigger()
    assert window.files.currentRow() == 1


def test_overlay_keys_change_mode_opacity_and_visibility(qtbot, window, images):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images / "a1.png"])
    start = window.state.overlay
    assert [a.shortcuts()[0].toString() for a in (menu_action(window, "View", "Filled / contour"),
                                                    menu_action(window, "View", "More opaque"),
                                                    menu_action(window, "View", "Show / hide overlay"))] == \
        ["C", "]", "O"]
    menu_action(window, "View", "Filled / contour").trigger()
    menu_action(window, "View", "More opaque").trigger()
    menu_action(window, "View", "Show / hide overlay").trigger()
    style = window.state.overlay
    assert style.mode is not start.mode and style.opacity == pytest.approx(start.opacity + 0.1)
    assert not style.visible and not window.viewer.overlay_item.isVisible()
    menu_action(window, "View", "Filled / contour").trigger()
    menu_action(window, "View", "More transparent").trigger()
    assert window.state.overlay.mode is start.mode and window.state.overlay.opacity == pytest.approx(start.opacity)


def test_holding_space_peeks_under_the_overlay_once_there_is_one(qtbot, window, images):
    from PySide6.QtCore import QCoreApplication, QEvent, Qt
    from PySide6.QtGui import QKeyEvent

    def space(kind, target):
        QCoreApplication.sendEvent(target, QKeyEvent(kind, Qt.Key.Key_Space, Qt.KeyboardModifier.NoModifier))

    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=TIMEOUT)
    overlay = window.viewer.overlay_item
    space(QEvent.Type.KeyPress, window.viewer)  # no overlay yet: nothing to peek under, the key is not taken
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images / "a1.png"])
    assert overlay.isVisible()
    for target in (window.viewer, window.files):  # whichever widget has the focus
        space(QEvent.Type.KeyPress, target)
        assert not overlay.isVisible()
        space(QEvent.Type.KeyRelease, target)
        assert overlay.isVisible()


def drag_right(window, start, end):
    from PySide6.QtCore import QPoint
    from PySide6.QtTest import QTest

    viewport = window.viewer.viewport()
    QTest.mousePress(viewport, Qt.MouseButton.RightButton, pos=QPoint(*start))
    QTest.mouseMove(viewport, QPoint(*end))
    QTest.mouseRelease(viewport, Qt.MouseButton.RightButton, pos=QPoint(*end))


def test_dicom_window_level_by_right_drag_presets_and_info(qtbot, make_main_window, models):
    """Window/level pixels are made on the display thread: the drag changes the window at once, the pixels and the
    status text when they come back."""
    from pydicom.data import get_testdata_file

    from app.io.window import apply_window

    win = make_main_window(models("binary_logits"))
    ct = get_testdata_file("CT_small.dcm")
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([ct])
    info = win.panel.image_info.text.text()
    assert "Modality</b>: CT" in info and "1CT1" in info
    before = win.viewer.render_scene().copy()
    start_window = win.display_window

    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT, check_params_cb=lambda shown: shown == win.display_window):
        drag_right(win, (100, 100), (160, 130))
    assert win.display_window[1] > start_window[1]  # dragged right: wider window
    assert win.viewer.render_scene() != before
    assert f"W {win.display_window[1]:.0f}" in win.status.image_size.text()
    assert f"W {win.display_window[1]:.0f}" in win.panel.image_info.text.text()  # rounded as the status bar shows it

    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT):
        win.presenter.set_window((40.0, 400.0))  # soft-tissue preset
    assert win.display_window == (40.0, 400.0) and "L 40 W 400" in win.status.image_size.text()
    win.panel.controls.set_overlay_visible(False)  # compare the image's own pixels, everywhere
    scene = win.viewer.render_scene()
    expected = apply_window(win.cached_view(ct).display_raw, 40, 400)
    shown = np.array([[scene.pixelColor(x, y).red() for x in range(0, 128, 7)] for y in range(0, 128, 7)])
    assert np.abs(shown - expected[::7, ::7].astype(int)).max() <= 1

    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT):
        win.presenter.set_window(None)  # the image's own again
    assert win.display_window == start_window


def test_16_bit_image_auto_window_is_made_off_the_gui_thread(qtbot, make_main_window, models, tmp_path):
    """A 16-bit PNG keeps its values: a preset changes the pixels; Shift+W's automatic window (percentiles, on the
    display thread) brings back the image's own automatic window."""
    values = np.tile(np.linspace(1000, 30000, 64, dtype=np.uint16), (48, 1))
    path = tmp_path / "counts.png"
    Image.fromarray(values).save(path)
    win = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([path])
    own = win.display_window
    assert own is not None and win.cached_view(path).high_range
    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT):
        win.presenter.set_window((2000.0, 500.0))
    assert win.display_window == (2000.0, 500.0) and "L 2000 W 500" in win.status.image_size.text()
    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT) as shown:
        menu_action(win, "View", "Automatic (0.5–99.5 %)").trigger()
    assert shown.args[0] == win.display_window == pytest.approx(own)
    assert f"L {own[0]:.0f} W {own[1]:.0f}" in win.status.image_size.text()


def write_multiframe_dicom(path, frames: np.ndarray, window: tuple[float, float]):
    import pydicom  # noqa: F401 (pydicom.dataset needs the package initialised)
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID = SecondaryCaptureImageStorage, generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.Modality, ds.SamplesPerPixel, ds.PhotometricInterpretation = "CT", 1, "MONOCHROME2"
    ds.NumberOfFrames, ds.Rows, ds.Columns = frames.shape
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
    ds.WindowCenter, ds.WindowWidth = window
    ds.PixelData = frames.astype(np.int16).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def test_another_frame_keeps_the_readers_window_a_new_image_its_own(qtbot, make_main_window, models, tmp_path):
    """The window rule, end to end: frame 2 of a multi-frame file is drawn through the reader's window (windowed on
    the display thread before it is shown); another file starts at its own."""
    ramp = np.tile(np.arange(0, 1000, 1000 / 40, dtype=np.float32), (30, 1))
    multi = write_multiframe_dicom(tmp_path / "multi.dcm", np.stack([ramp, ramp + 100, ramp + 200]), (500, 1000))
    win = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([multi])
    assert win.display_window == (500, 1000)
    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT):
        win.presenter.set_window((300.0, 200.0))
    with qtbot.waitSignal(win.window_shown, timeout=TIMEOUT, check_params_cb=lambda shown: shown == (300.0, 200.0)):
        win.slices.slider.setValue(2)  # a multi-frame file is a volume: the slice bar under the image steps it
    assert win.state.on_screen.frame == 2 and win.display_window == (300.0, 200.0)
    assert "Slice 3 / 3" in win.slices.label.text() and not win.panel.image_info.frame.isVisible()
    other = write_multiframe_dicom(tmp_path / "other.dcm", np.stack([ramp]), (400, 800))
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([other])
    assert win.display_window == (400, 800)


def test_an_image_waiting_for_the_model_is_its_warm_up_run(qtbot, make_main_window, model, images):
    """Opened with images, the session's first run is the first image's (no extra run on zeros before it);
    opened without, the session is warmed up on zeros as soon as it exists."""
    win = make_main_window(model, load=False)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        # images first: the "waiting" note must reach the worker before it has built the session. The other order
        # (as app.py's start-up) races a fast model load and then warms up on zeros: slower, never wrong, and it
        # made this test fail under CPU load
        win.add_paths([images / "a1.png"])
        win.open_model()
    assert win.summary.info.first_run_ms == 0.0  # no warm-up run: the image's run was the first
    assert win.cached_view(str(images / "a1.png")).result.mask is not None
    with qtbot.waitSignal(win.model_changed, timeout=TIMEOUT):
        win.open_model()  # rebuild with nothing waiting
    assert win.summary.info.first_run_ms > 0.0


def test_markup_in_a_model_or_class_name_is_shown_as_text(qtbot, window, models):
    from PySide6.QtWidgets import QLabel

    model = models("rgb_classes", name="evil")
    model.with_suffix(".yaml").write_text(
        "name: '<img src=\"http://example.invalid/x.png\"><b>Trusted</b>'\n"
        "classes:\n  - {name: bg}\n  - {name: '<a href=\"http://example.invalid\">click</a>'}\n  - {name: blue}\n")
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        window.open_model(model)
    texts = [label.text() for label in window.panel.findChildren(QLabel)]
    assert any("&lt;img src=" in t for t in texts) and not any("<img" in t for t in texts)
    class_label = next(label for label in window.panel.findChildren(QLabel) if "click</a>" in label.text())
    assert class_label.textFormat() == Qt.TextFormat.PlainText


def test_a_tiled_model_reports_tile_progress_and_gives_a_full_size_mask(qtbot, make_main_window, models, tmp_path):
    model = models("fixed_bright_spots")
    model.with_suffix(".yaml").write_text("input:\n  resize: tile\n  tile: {overlap: 0.25, blend: gaussian}\n")
    image = np.zeros((600, 700), np.uint8)
    image[300:304, 500:504] = 255  # one small spot far from the first tile
    Image.fromarray(image).save(tmp_path / "big.png")
    window = make_main_window(model)
    ticks = []
    window.worker.tile_progress.connect(lambda tiles: ticks.append((tiles.done, tiles.total)))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([tmp_path / "big.png"])
    assert ticks and ticks[-1][0] == ticks[-1][1] > 1  # every tile, reported as it went
    mask = window.state.shown.result.mask
    assert mask.shape == (600, 700) and mask[301, 501] > 0 and mask[:200, :200].max() == 0


def test_the_bundled_models_menu_lists_models_not_the_halves_of_a_prompt_pair(make_main_window):
    """models/ holds the demo prompt pair (prompt_demo_encoder/decoder.onnx, issue 28): they are not image models
    and were listed in Model ▸ Bundled models beside them (the CLI's `models` already left them out)."""
    window = make_main_window(load=False)
    menus = {action.text().replace("&", ""): action.menu() for action in window.menuBar().actions()}
    [bundled] = [a.menu() for a in menus["Model"].actions() if a.menu() is not None and "Bundled" in a.text()]
    bundled.aboutToShow.emit()  # filled when first opened
    names = [a.text() for a in bundled.actions()]
    assert "ct_demo" in names and "ct3d_demo" in names
    assert not [n for n in names if n.startswith("prompt_demo")], names
