"""Every window of the viewer fits a 1280×720 screen: the main window in each of its states (an image, a volume, the
three planes, the split of two models, edit mode, the Station view with an ERROR and a stall) and every dialog, with
long texts in them (a two-line ERROR reason, a long model name, a long UID). A window fails when its minimum size
(what its layout and labels ask) or its size is larger than the screen leaves, or when, at that size, a widget in it
is given less room than its own minimum (cut or drawn over its neighbour).

The offscreen screen is 800×800, so the budget for a window's minimum is fixed: a 1280×720 screen less a taskbar, a
title bar and borders (the same at 1920×1080 under 150 % scaling: 1280×720 device-independent pixels). A dialog
must open inside the screen it is on (offscreen's, narrower than 1280)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QPoint, QRect, QSize, QTimer
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QSizePolicy,
    QWidget,
)

from app.ui import actions

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 20_000
AVAILABLE = QSize(1280, 720 - 48)  # less a 48 px taskbar: the room for a window and its frame
BUDGET = QSize(AVAILABLE.width() - 16, AVAILABLE.height() - 32 - 8)  # less the borders and a 32 px title bar
UID = "1.2.826.0.1.3680043.8.498.10293847561029384756102938475610293847561029384756"
LONG_NAME = ("Surface anomaly — contrast-enhanced line camera, plant B, station 3, retrained on the 2026 spring "
             "batch with the new lighting rig (revision 14)")
TWO_LINE_ERROR = (f"cannot read frame /srv/line-3/incoming/{UID}/frame-000123456789.png: the file is truncated\n"
                  f"decoder said: image file is truncated (2458 bytes not processed) in {UID}.png")
CHECKED = (QLabel, QAbstractButton, QLineEdit, QComboBox, QAbstractSpinBox, QProgressBar)


def misfits(window: QWidget, *, at_budget: bool = True) -> list[str]:
    """What does not fit: the window's minimum against the budget; a main window resized to the budget, a dialog
    at the size and place it chose, inside its screen; then each visible label, button and field given less room
    than its own minimum (cut, or drawn over its neighbour)."""
    if at_budget:
        window.resize(BUDGET)
    QApplication.processEvents()
    found = [f"{type(window).__name__} {what} {size.width()}×{size.height()} > {BUDGET.width()}×{BUDGET.height()}"
             for what, size in (("minimumSizeHint", window.minimumSizeHint()), ("minimumSize", window.minimumSize()),
                                *((("size", window.size()),) if at_budget else ()))
             if size.width() > BUDGET.width() or size.height() > BUDGET.height()]
    screen, frame = window.screen().availableGeometry(), window.frameGeometry()
    slack = 8  # Qt centres a dialog over its parent before it knows its frame: a few pixels over, then moved in
    if not at_budget and not screen.adjusted(-slack, -slack, slack, slack).contains(frame):
        found.append(f"{type(window).__name__} frame {frame.getRect()} is not inside the screen {screen.getRect()}")
    return found + squeezed(window)


def assert_fits(window: QWidget, *, at_budget: bool = True) -> None:
    found = misfits(window, at_budget=at_budget)
    assert not found, "\n".join([*found, *_widest(window)])


def _widest(window: QWidget) -> list[str]:
    """The widgets asking for the most width, to say which one holds the window open."""
    shown = [w for w in window.findChildren(QWidget) if w.isVisibleTo(window)]
    shown.sort(key=lambda w: -w.minimumSizeHint().width())
    return [f"  wide: {_path(w)} {getattr(w, 'text', lambda: '')()[:40]!r} {w.minimumSizeHint().toTuple()}"
            for w in shown[:8]]


def _path(widget: QWidget) -> str:
    names = []
    while widget is not None and not widget.isWindow():
        names.append(type(widget).__name__)
        widget = widget.parentWidget()
    return "<".join(names[:5])


def squeezed(window: QWidget) -> list[str]:
    found = []
    for widget in window.findChildren(QWidget):
        if not isinstance(widget, CHECKED) or not widget.isVisibleTo(window) or widget.window() is not window:
            continue
        if isinstance(widget.parentWidget(), (QAbstractSpinBox, QComboBox)):
            continue  # the field inside a spin or combo box: the box is checked
        least = _least(widget)
        if widget.width() + 1 < least.width() or widget.height() + 1 < least.height():
            text = widget.text() if hasattr(widget, "text") else ""
            found.append(f"{type(widget).__name__} {text[:50]!r} squeezed to {widget.width()}×{widget.height()} "
                         f"(needs {least.width()}×{least.height()})")
    return found


def _least(widget: QWidget) -> QSize:
    """The least room a layout gives a widget (Qt's qSmartMinSize): its explicit minimum, else its minimum hint
    or its hint as its size policy says; a wrapped label's height at its width."""
    policy, hint, least = widget.sizePolicy(), widget.sizeHint(), widget.minimumSizeHint()
    explicit = widget.minimumSize()
    width = explicit.width() or _by_policy(policy.horizontalPolicy(), hint.width(), least.width())
    height = explicit.height() or _by_policy(policy.verticalPolicy(), hint.height(), least.height())
    if widget.hasHeightForWidth() and not explicit.height():
        height = max(widget.heightForWidth(widget.width()), 0)
    return QSize(width, height)


def _by_policy(policy: QSizePolicy.Policy, hint: int, least: int) -> int:
    if policy == QSizePolicy.Policy.Ignored:
        return 0
    return max(least if policy.value & QSizePolicy.PolicyFlag.ShrinkFlag.value else hint, 0)


# -- what the windows show -------------------------------------------------------------------------------------------


@pytest.fixture
def long_anomaly(tmp_path):
    """The bundled anomaly model under a long name (its sidecar's), and a long-named sample."""
    folder = tmp_path / "model"
    folder.mkdir()
    model = folder / f"surface_anomaly_line3_plantB_{UID}.onnx"
    shutil.copyfile(REPO / "models" / "surface_anomaly.onnx", model)
    sidecar = (REPO / "models" / "surface_anomaly.yaml").read_text(encoding="utf-8")
    model.with_suffix(".yaml").write_text(sidecar.replace(
        "name: Surface anomaly (demo, trained on clean surfaces)", f"name: {LONG_NAME}"), encoding="utf-8")
    images = tmp_path / "images"
    images.mkdir()
    shutil.copyfile(REPO / "resources" / "samples" / "anomaly" / "anomaly_04_scratch.png",
                    images / f"part_{UID}_scratch.png")
    return model, images


def _image_window(qtbot, make_main_window, long_anomaly):
    model, images = long_anomaly
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images])
    window.status.showMessage(TWO_LINE_ERROR)
    return window


def test_the_main_window_fits_with_an_image_two_models_and_edit_mode(qtbot, make_main_window, long_anomaly):
    window = _image_window(qtbot, make_main_window, long_anomaly)
    assert_fits(window)
    window.status.start_run(12345)  # Run on all's progress and Cancel join the status bar
    assert_fits(window)
    window.status.end_run()
    model, _ = long_anomaly
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT), \
            qtbot.waitSignal(window.comparer.model_b_changed, timeout=TIMEOUT):
        window.open_model_b(model)
    window.panel.decision.set_split("ab")  # A left, B right, each model's name on its side
    assert window.viewer.split == "ab"
    assert_fits(window)
    assert window.editor.start()
    assert_fits(window)


def test_the_main_window_fits_with_a_volume_and_its_three_planes(qtbot, make_main_window, ct_model, tmp_path):
    from tests.dicom_factory import write_series

    long_model = ct_model.with_name(f"ct_disc_{UID}.onnx")
    ct_model.rename(long_model)
    ct_model.with_suffix(".yaml").rename(long_model.with_suffix(".yaml"))
    folder = tmp_path / f"series_{UID}"
    write_series(folder, slices=6)
    window = make_main_window(long_model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    qtbot.waitUntil(lambda: "all 6 slices" in window.panel.legend.volume_text(), timeout=TIMEOUT)
    assert_fits(window)
    toggle = next(a for a in window.findChildren(type(window.menuBar().actions()[0]))
                  if a.text().startswith("Three planes"))
    qtbot.waitUntil(toggle.isEnabled, timeout=TIMEOUT)
    with qtbot.waitSignal(window.volumes.planes_shown, timeout=TIMEOUT):
        toggle.trigger()
    assert_fits(window)


def test_the_main_window_fits_with_a_3d_result_and_its_lesions(qtbot, make_main_window, tmp_path):
    import nibabel as nib
    from spec3d_models import sigmoid3d, with_sidecar

    model = with_sidecar(sigmoid3d(tmp_path / f"lesions3d_{UID}.onnx"),
                         f"name: {LONG_NAME}\ninput:\n  patch: [4, 16, 16]\n  scale: 0.01\nclasses:\n"
                         f"  - background\n  - {{name: 'lesion of the left lobe, segment {UID}', color: '#ff0000'}}\n")
    volume = np.zeros((32, 32, 12), np.int16)  # NIfTI (column, row, slice): two bright blocks, two lesions
    volume[4:10, 4:10, 2:6], volume[18:28, 18:28, 5:10] = 100, 100
    path = tmp_path / f"series_{UID}.nii.gz"
    nib.save(nib.Nifti1Image(volume, np.diag([0.7, 0.8, 2.0, 1.0])), str(path))
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([path])
    qtbot.waitUntil(lambda: "3D model over the whole volume" in window.status.currentMessage(), timeout=TIMEOUT)
    assert_fits(window)


def _verdict(state: str, reason: str):
    from app.runs.station.sinks import StationVerdict

    return StationVerdict(station="line-3", frame_id=f"incoming/{UID}/frame-000123456789.png", time=0.0,
                          verdict=state, score=None, reason=reason, latency_ms=41.0)


STALLED = (f"SOURCE STALLED: no frame for 12 s from /srv/line-3/incoming/{UID} (limit 0.5 s)",
           f"SINK FAILING: mqtt: cannot connect to broker.plant-b.example.com:8883 ({UID})")


def _station_view(make_main_window):
    """The Station view of a station with a long name and source, its last part an ERROR with a two-line reason,
    its source stalled and a sink failing (as the controller shows what the station's worker sends)."""
    from app.ui.state.station_messages import StationOpened

    window = make_main_window()
    controller = actions.station_controller(window)
    view = controller.view
    controller.show_station()
    view.show_starting("line-3")
    controller._on_opened(StationOpened(
        name=f"line-3 {LONG_NAME}", model=REPO / "models" / "surface_anomaly.onnx", own_verdict=False, device="CPU",
        device_note="CUDA was asked for but is not available: libcudnn.so.9 not found",
        source=f"watch folder /srv/line-3/incoming/{UID}", out=Path("/srv/line-3/out"), stall_after_s=0.5))
    view.show_state(_verdict("ERROR", TWO_LINE_ERROR))
    view.show_stats(_stalled(), STALLED)
    return window, view


def _stalled():
    from app.runs.station.stats import StationStats

    return StationStats(frames=1234, fps=3.2, latency_p50_ms=38, latency_p95_ms=61, since_frame_s=12.0, stalled=True)


def test_the_station_view_fits_with_a_two_line_error_and_a_stall(qtbot, make_main_window):
    window, view = _station_view(make_main_window)
    assert_fits(window)
    view.set_ended(f"The station ended: the source said: {TWO_LINE_ERROR}")
    assert_fits(window)
    banner, reason = (QRect(w.mapTo(view, QPoint(0, 0)), w.size()) for w in (view.banner, view.reason))
    assert banner.bottom() < reason.top(), "the reason is drawn over the banner"
    assert reason.bottom() < view.strip_title.mapTo(view, QPoint(0, 0)).y(), "the reason runs under the strip"


def test_the_station_badge_keeps_the_viewer_on_the_screen(qtbot, make_main_window):
    window, _view = _station_view(make_main_window)
    controller = actions.station_controller(window)
    controller._show_badge(_stalled(), STALLED)  # the station's word in the status bar while the viewer is shown
    controller.show_images()
    assert_fits(window)


def test_the_remote_badge_keeps_the_window_on_the_screen(qtbot, make_main_window, long_anomaly):
    from app.ui.state.remote_messages import RemoteRetrying

    window = _image_window(qtbot, make_main_window, long_anomaly)
    window.status.show_retrying(RemoteRetrying(
        line=f"Remote: grpcs://inference.plant-b.example.com:8001/{LONG_NAME} (version 14): the server did not "
             f"answer within 30 s ({UID}) — retrying in 4 s (attempt 3 of 4)"))
    assert_fits(window)


# -- the dialogs -----------------------------------------------------------------------------------------------------


def test_calibrate_limits_fits_the_screen(qtbot, make_main_window, long_anomaly):
    window = _image_window(qtbot, make_main_window, long_anomaly)
    actions.calibrate_dialog(window)
    dialog = _dialog_of("CalibrateDialog")
    dialog.set_folders(f"/srv/calibration/{UID}/ok", f"/srv/calibration/{UID}/ng")
    dialog.say(TWO_LINE_ERROR, error=True)
    assert_fits(dialog, at_budget=False)
    plot = np.full((480, 1120, 3), 200, np.uint8)
    dialog.show_result([f"line {n}: {UID}" for n in range(9)], plot)
    assert_fits(dialog, at_budget=False)


def _dialog_of(name: str) -> QWidget:
    (found,) = [w for w in QApplication.topLevelWidgets() if type(w).__name__ == name and w.isVisible()]
    return found


def test_the_pacs_dialogs_fit_the_screen(qtbot, make_main_window):
    from app.ui.widgets.pacs_send_dialog import PacsSendDialog

    window = make_main_window()
    dialog = actions.pacs_controller(window).open_dialog()
    assert dialog is not None
    dialog.set_nodes([f"research-node-{UID}"])
    dialog.say(f"Search failed: dimse://SEGLENS@pacs.plant-b.example.com:11112 refused the association ({UID})",
               error=True)
    assert_fits(dialog, at_budget=False)
    send = PacsSendDialog(kinds_available=("dicom-seg", "sc", "rtstruct"), parent=window)
    send.set_nodes([f"research-node-{UID}"])
    send.set_subject(f"{LONG_NAME} on series {UID} (120 slices)")
    send.say(f"Send failed: the node refused the SEG of {UID}: 0xA700 out of resources", error=True)
    send.show()
    assert_fits(send, at_budget=False)


def test_the_remote_dialog_fits_the_screen(qtbot, make_main_window):
    window = make_main_window()
    dialog = actions.remote_controller(window).open_dialog()
    assert dialog is not None
    dialog.url.setText(f"grpcs://inference.plant-b.example.com:8001/{UID}")
    dialog.say(f"Cannot connect to grpcs://inference.plant-b.example.com:8001: certificate verify failed ({UID})",
               ok=False)
    assert_fits(dialog, at_budget=False)


def test_the_export_report_and_about_dialogs_fit_the_screen(qtbot, make_main_window, long_anomaly):
    from app.ui.widgets.dialogs import DiagnosticsDialog
    from app.ui.widgets.report_options import ReportOptionsDialog
    from app.ui.widgets.volume_export import VolumeExportDialog

    window = _image_window(qtbot, make_main_window, long_anomaly)
    for dialog in (VolumeExportDialog(12, 0.45, window), ReportOptionsDialog(volumes=12, parent=window),
                   DiagnosticsDialog(window.summary, window)):
        dialog.show()
        assert_fits(dialog, at_budget=False)
        dialog.close()


def test_the_message_boxes_fit_the_screen(qtbot, make_main_window):
    window = make_main_window()
    seen: list[list[str]] = []

    def check_and_close() -> None:
        box = QApplication.activeModalWidget()
        assert isinstance(box, QMessageBox)
        seen.append(misfits(box, at_budget=False))
        box.reject()

    QTimer.singleShot(0, check_and_close)
    assert actions._run_all_choice(window) is None
    assert seen == [[]]
    actions.station_controller(window)._say(TWO_LINE_ERROR, error=True)  # a station's failure, not modal
    (box,) = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
    assert_fits(box, at_budget=False)
    box.close()


def test_a_long_image_name_does_not_widen_the_file_list(qtbot, make_main_window, tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(folder / f"{UID}_{UID}.png")
    window = make_main_window()
    window.add_paths([folder])
    qtbot.waitUntil(lambda: window.files.count() == 1, timeout=TIMEOUT)
    assert_fits(window)


def test_a_fit_label_wraps_inside_a_long_word_and_elides_past_its_lines(qtbot):
    from app.ui.widgets.fit import FitLabel

    label = FitLabel(TWO_LINE_ERROR, lines=3)
    qtbot.addWidget(label)
    label.resize(300, 200)
    label.show()
    shown = label.shown_text().split("\n")
    assert len(shown) == 3 and shown[-1].endswith("…")  # the UID broken inside, the rest elided
    assert all(label.fontMetrics().horizontalAdvance(line) <= label.contentsRect().width() for line in shown)
    assert label.text() == TWO_LINE_ERROR and label.toolTip() == TWO_LINE_ERROR  # the whole, on hover
    assert label.minimumSizeHint().width() < 100
    label.resize(3000, 200)
    assert label.shown_text() == TWO_LINE_ERROR and label.toolTip() == ""  # room enough: as written, no tooltip
