"""Menus, actions, keyboard shortcuts and file dialogs of the main window (files dropped on it and the hold-Space
peek: app/ui/input_filters.py).

The window is only a type here (app/ui/window_parts.py): actions call its public methods and its widgets' intents,
and the window imports this module (not the reverse), so there is no import circle.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction  # QKeySequence, QActionGroup with the menus (~0.6 ms, after the first paint)

from app.io.presets import CT_PRESETS
from app.ui.widgets.lazy_qt import Qt

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from PySide6.QtGui import QActionGroup
    from PySide6.QtWidgets import QMenu

    from app.ui.window_parts import WindowParts

DEVICES = ("auto", "cpu", "cuda")
OPACITY_STEP = 10  # percent per [ or ]


MENU_TITLES = ("&File", "&View", "&Model", "&Review", "&Results", "&Station", "&Help")


def menu_bar(window: WindowParts) -> list[QMenu]:
    """The menu bar's menus, still empty: their titles are part of the window's first paint, their actions not."""
    return [window.menuBar().addMenu(title) for title in MENU_TITLES]


def build_menus(window: WindowParts, menus: list[QMenu] | None = None) -> None:
    """The menus' actions and shortcuts, into `menus` (menu_bar's, at launch after the first paint) or new ones."""
    file_menu, view_menu, model_menu, review_menu, results_menu, station_menu, help_menu = menus or menu_bar(window)
    _file_menu(window, file_menu)
    _view_menu(window, view_menu)
    _model_menu(window, model_menu)
    _review_menu(window, review_menu)
    _add(window, results_menu, "Send to PACS…", lambda: pacs_controller(window).open_send_dialog())
    _add(window, results_menu, "Export instances as COCO JSON…", lambda: instances_dialog(window, "coco"))
    _add(window, results_menu, "Export instances as YOLO labels…", lambda: instances_dialog(window, "yolo"))
    _station_menu(window, station_menu)
    _add(window, help_menu, "About / Diagnostics…", lambda: _show_diagnostics(window))


def _file_menu(window: WindowParts, menu: QMenu) -> None:
    from PySide6.QtGui import QKeySequence

    _add(window, menu, "Open images…", lambda: open_files_dialog(window), QKeySequence.StandardKey.Open)
    _add(window, menu, "Open folder…", lambda: open_folder_dialog(window), "Ctrl+Shift+O")
    _recent_menu(menu.addMenu("Open recent"), window.recent_inputs, lambda path: window.add_paths([path]))
    _add(window, menu, "Open from PACS…", lambda: pacs_controller(window).open_dialog(), "Ctrl+Shift+P")
    menu.addSeparator()
    _add(window, menu, "Run on all…", lambda: run_all_dialog(window), "Ctrl+E")
    _add(window, menu, "Compare with reference masks…", lambda: reference_dialog(window))
    _add(window, menu, "Export review report…", lambda: report_dialog(window))
    menu.addSeparator()
    _add(window, menu, "Open log folder", _open_log_folder)
    _add(window, menu, "Quit", window.close, QKeySequence.StandardKey.Quit)


def _view_menu(window: WindowParts, menu: QMenu) -> None:
    from PySide6.QtGui import QKeySequence

    viewer, files, controls = window.viewer, window.files, window.panel.controls
    _add(window, menu, "Next image", lambda: files.step(1), "Right", "N")
    _add(window, menu, "Previous image", lambda: files.step(-1), "Left", "P")
    _add(window, menu, "Next slice (volumes; else next image)", lambda: window.volumes.step(1), "PgDown")
    _add(window, menu, "Previous slice (volumes; else previous image)", lambda: window.volumes.step(-1), "PgUp")
    window.volumes.bind_toggle(_add(window, menu, "Three planes (axial, coronal, sagittal)",
                                    window.volumes.toggle_planes, "T"))
    _add(window, menu, "Sort by IoU vs reference (worst first)",
         lambda: files.reorder(window.state.worst_first(files.paths())))
    _add(window, menu, "Sort by agreement of model B (worst first)",
         lambda: files.reorder(window.state.worst_first(files.paths(), by="agreements")))
    _add(window, menu, "Sort by name", lambda: files.reorder(sorted(files.paths(), key=_natural)))
    menu.addSeparator()
    toolbar = window.toolbar.toggleViewAction()
    toolbar.setText("Toolbar")
    menu.addAction(toolbar)
    _add(window, menu, "Fit to window", window.volumes.fit_to_window, "F")  # the three planes' panes when shown
    _add(window, menu, "Actual pixels (1:1)", viewer.actual_size, "1")
    _add(window, menu, "Zoom in", lambda: viewer.zoom_by(1.25), QKeySequence.StandardKey.ZoomIn, "+", "=")
    _add(window, menu, "Zoom out", lambda: viewer.zoom_by(0.8), QKeySequence.StandardKey.ZoomOut, "-")
    menu.addSeparator()
    _add(window, menu, "Show / hide overlay", controls.toggle_overlay, "O")
    _add(window, menu, "Filled / contour", controls.toggle_mode, "C")
    _add(window, menu, "More opaque", lambda: controls.nudge_opacity(OPACITY_STEP), "]")
    _add(window, menu, "More transparent", lambda: controls.nudge_opacity(-OPACITY_STEP), "[")
    decision = window.panel.decision
    _add(window, menu, "Mask / probability / uncertainty", decision.cycle_layer, "H")
    _add(window, menu, "Threshold up 0.01", lambda: decision.nudge(10), ".")
    _add(window, menu, "Threshold down 0.01", lambda: decision.nudge(-10), ",")
    presenter, window_menu = window.presenter, menu.addMenu("Window / level")
    _add(window, window_menu, "The image's own window", lambda: presenter.set_window(None), "W")
    _add(window, window_menu, "Automatic (0.5–99.5 %)", presenter.auto_window, "Shift+W")
    window_menu.addSeparator()
    for name, preset in CT_PRESETS.items():
        _add(window, window_menu, f"{name}  (L {preset[0]:g} / W {preset[1]:g})",
             functools.partial(presenter.set_window, preset))


def _model_menu(window: WindowParts, menu: QMenu) -> None:
    _add(window, menu, "Open model…", lambda: open_model_dialog(window), "Ctrl+M")
    _recent_menu(menu.addMenu("Recent models"), window.recent_models, window.open_model)
    _add(window, menu, "Compare with another model…", lambda: compare_model_dialog(window))
    _add(window, menu, "Compare all listed images with model B", window.compare_all)
    _add(window, menu, "Stop comparing", lambda: window.open_model_b(None))
    _add(window, menu, "Calibrate limits…", lambda: calibrate_dialog(window))
    bundled = menu.addMenu("Bundled models")
    # filled when first opened: telling a prompt pair's halves from models reads the sidecars (PyYAML), which the
    # window must not pay for before the reader needs the list (tests/ui/test_startup_imports.py)
    bundled.aboutToShow.connect(lambda: _fill_bundled(window, bundled))
    device_actions(window, menu.addMenu("Device"))


def _review_menu(window: WindowParts, menu: QMenu) -> None:
    from PySide6.QtGui import QKeySequence

    editor, reviewer = window.editor, window.reviewer
    _add(window, menu, "Result correct (then next unreviewed)", lambda: reviewer.mark("accepted"), "A")
    _add(window, menu, "Result wrong (then next unreviewed)", lambda: reviewer.mark("rejected"), "R")
    _add(window, menu, "Next unreviewed", reviewer.next_unreviewed, "U")
    menu.addSeparator()
    _add(window, menu, "Edit mask (brush)", editor.toggle, "E")
    # on an instance model's picture a new instance (controllers/smart_instances.py), else a mask
    _add(window, menu, "Smart tool (click or box → mask or instance)",
         lambda: _either(window.instances.smart_tool, editor.smart_tool), "S")
    # an instance picture's corrections first (controllers/instances.py), else the mask being edited
    _add(window, menu, "Undo edit", lambda: _either(window.instances.undo, editor.undo), QKeySequence.StandardKey.Undo)
    _add(window, menu, "Redo edit", lambda: _either(window.instances.redo, editor.redo), "Ctrl+Shift+Z",
         QKeySequence.StandardKey.Redo)
    _add(window, menu, "Save corrected mask", editor.save, QKeySequence.StandardKey.Save)
    _add(window, menu, "Delete instance", window.instances.delete, QKeySequence.StandardKey.Delete)
    edit = window.panel.edit
    _add(window, menu, "Brush larger", lambda: edit.set_radius(edit.radius() + max(1, edit.radius() // 8)), "Ctrl+]")
    _add(window, menu, "Brush smaller", lambda: edit.set_radius(edit.radius() - max(1, edit.radius() // 8)), "Ctrl+[")


def _either(first: Callable[[], bool], then: Callable[[], object]) -> None:
    """`then()` unless `first()` did the work (returned True)."""
    if not first():
        then()


def _recent_menu(menu: QMenu, recent, open_path: Callable[[str], object]) -> None:
    """A recent-items submenu, filled as it opens (so a path deleted meanwhile shows as missing)."""
    from app.ui.recent import fill_menu

    menu.aboutToShow.connect(lambda: fill_menu(menu, recent, open_path))


def _add(window: WindowParts, menu: QMenu, text: str, slot: Callable[[], object], *keys) -> QAction:
    action = shortcut(QAction(text, window), *keys)
    action.triggered.connect(lambda _checked=False: slot())
    menu.addAction(action)
    return action


def device_actions(window: WindowParts, menu: QMenu) -> QActionGroup:
    """One checkable action per device; choosing one rebuilds the session on that device."""
    from PySide6.QtGui import QActionGroup

    group = QActionGroup(window)
    for device in DEVICES:
        action = QAction(device.upper() if device != "auto" else "Auto (GPU if it works)", window, checkable=True)
        action.setData(device)
        action.setChecked(device == window.device)
        action.triggered.connect(lambda _checked=False, d=device: window.open_model(device=d))
        group.addAction(action)
        menu.addAction(action)
    menu.addSeparator()  # the model on a server (app/ui/controllers/remote.py): the last one, and the dialog
    last = QAction("Remote", window, checkable=True, visible=False)
    last.setData("remote")
    last.triggered.connect(lambda _checked=False: remote_controller(window).reopen())
    group.addAction(last)
    menu.addAction(last)
    _add(window, menu, "Remote server…", lambda: remote_controller(window).open_dialog())
    menu.aboutToShow.connect(lambda: _check_device(window, group, last))
    return group


def _check_device(window: WindowParts, group: QActionGroup, last: QAction) -> None:
    """The device in use checked: a local one, or "Remote: host/model" while the server's model is the device."""
    loader = window.loader
    shown = loader.remote or loader.last_remote
    last.setVisible(shown is not None)
    last.setText(f"Remote: {shown.host}/{shown.model}" if shown is not None else "Remote")
    for action in group.actions():
        action.setChecked(action.data() == ("remote" if loader.remote is not None else window.device))


def remote_controller(window: WindowParts):
    """The remote device's controller, made on first use: no thread or client library before the reader asks."""
    from app.ui.controllers.remote import RemoteController

    found = window.findChild(RemoteController)
    return found if found is not None else RemoteController(
        loader=window.loader, worker=window.worker, status=window.status, settings=window.settings,
        writable=lambda: window.persist_settings, dialog_parent=window, parent=window)


def _station_menu(window: WindowParts, menu: QMenu) -> None:
    _add(window, menu, "Start station…", lambda: start_station_dialog(window))
    _recent_menu(menu.addMenu("Recent stations"), _recent_stations(window),
                 lambda path: station_controller(window).start(path))
    _add(window, menu, "Stop station", lambda: station_controller(window).stop())
    _add(window, menu, "Station view / images", lambda: station_controller(window).toggle(), "F9")


def _recent_stations(window: WindowParts):
    from app.ui.recent import RecentList

    return RecentList(window.settings, "recent/stations", writable=lambda: window.persist_settings)


def station_controller(window: WindowParts):
    """The Station view's controller, made on first use: no station thread or view before the reader asks."""
    from app.ui.controllers.station import StationController

    found = window.findChild(StationController)
    if found is not None:
        return found
    return StationController(host=window, status=window.status, recent=_recent_stations(window),
                             open_paths=window.add_paths, select_path=window.files.select_path,
                             model_path=lambda: window.model_path, open_model=window.open_model, parent=window)


def start_station_dialog(window: WindowParts) -> None:
    """Station ▸ Start station…: a STATION.yaml, starting in the folder of the last one started."""
    last = _recent_stations(window).items()
    path, _ = _file_dialog().getOpenFileName(window, "Start station", last[0] if last else "",
                                          "Station files (*.yaml *.yml);;All files (*)")
    if path:
        station_controller(window).start(path)


def pacs_controller(window: WindowParts):
    """The PACS controller, made on first use: no PACS thread or networking library before the reader asks."""
    from app.ui.controllers.pacs import PacsController

    found = window.findChild(PacsController)
    if found is not None:
        return found
    return PacsController(window.state, files=window.files, status=window.status, worker=window.worker,
                          open_paths=window.add_paths, recount=window.volumes.count,
                          model_path=lambda: window.model_path, closing=window,
                          reference=window.set_reference_folder, parent=window)


def calibrate_dialog(window: WindowParts) -> None:
    """Model ▸ Calibrate limits…: its controller made on first use (app/ui/controllers/calibrator.py)."""
    from app.ui.controllers.calibrator import open_calibrate_dialog

    open_calibrate_dialog(window)


def shortcut(action: QAction, *keys) -> QAction:
    from PySide6.QtGui import QKeySequence

    action.setShortcuts([QKeySequence(k) for k in keys])
    return action


# -- dialogs ---------------------------------------------------------------------------------------------------

def _file_dialog():
    """QFileDialog, when a dialog opens: its Qt type and enums cost ~1 ms before the window shows."""
    from PySide6.QtWidgets import QFileDialog

    return QFileDialog


def open_files_dialog(window: WindowParts) -> None:
    files, _ = _file_dialog().getOpenFileNames(window, "Open images")
    if files:
        window.add_paths(files)


def open_folder_dialog(window: WindowParts) -> None:
    folder = _file_dialog().getExistingDirectory(window, "Open folder")
    if folder:
        window.add_paths([folder])


def open_model_dialog(window: WindowParts) -> None:
    path, _ = _file_dialog().getOpenFileName(window, "Open ONNX model", str(window.model_path or ""),
                                          "ONNX models (*.onnx)")
    if path:
        window.open_model(path)


def run_all_dialog(window: WindowParts) -> None:
    """Run on all: export into a folder the reader picks, or only score the folder (nothing written)."""
    choice = _run_all_choice(window)
    if choice is None:
        return
    if choice == "scores":
        window.run_all(None)
        return
    folder = _file_dialog().getExistingDirectory(window, "Export masks, overlays and report to")
    if not folder:
        return
    volumes = sum(item.volume is not None for item in window.files.inputs())
    options = None
    if volumes:
        from app.ui.widgets.volume_export import VolumeExportDialog

        dialog = VolumeExportDialog(volumes, window.state.overlay.opacity, window)
        accepted = dialog.exec()
        options = dialog.options()
        dialog.deleteLater()  # parented to the window: it would otherwise stay, hidden, until the window goes
        if not accepted:
            return
    window.run_all(folder, volumes=options)


def _run_all_choice(window: WindowParts) -> str | None:
    """"export", "scores" (the folder's histogram and verdicts, nothing written) or None (cancelled)."""
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(QMessageBox.Icon.Question, "Run on all",
                      "Run the model on every listed image.\n\nExport writes masks, overlays and the CSV report "
                      "into a folder you choose; Scores only fills the folder's score histogram and verdicts and "
                      "writes nothing.", parent=window)
    export = box.addButton("Export to a folder…", QMessageBox.ButtonRole.AcceptRole)
    scores = box.addButton("Scores only", QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(export)
    box.exec()
    clicked = box.clickedButton()
    box.deleteLater()  # as every dialog here: asked once, then gone, not kept hidden under the window
    return "export" if clicked == export else "scores" if clicked == scores else None


def _natural(path: str):
    from app.io.discover import natural_key

    return natural_key(path)


def compare_model_dialog(window: WindowParts) -> None:
    path, _ = _file_dialog().getOpenFileName(window, "Model B to compare with", "", "ONNX models (*.onnx)")
    if path:
        window.open_model_b(path)


def report_dialog(window: WindowParts) -> None:
    if window.reviewer.log is None:
        window.export_review_report()  # says why not
        return
    from app.runs.review.items import REPORT_NAME

    folder = window.reviewer.log.folder
    path, _ = _file_dialog().getSaveFileName(window, "Export review report", str(folder / REPORT_NAME),
                                          "HTML (*.html)")
    if not path:
        return
    from app.ui.widgets.report_options import ReportOptionsDialog

    options = ReportOptionsDialog(volumes=window.reviewer.listed_volumes(), parent=window)
    accepted, chosen = options.exec(), options.options()
    options.deleteLater()
    if accepted:
        window.export_review_report(path, **chosen)


def instances_dialog(window: WindowParts, fmt: str) -> None:
    """Results ▸ Export instances: a COCO JSON file, or a folder for YOLO's labels/ and data.yaml."""
    if window.summary is None or window.summary.spec.task != "instances":
        window.status.showMessage("Export instances: open an instance model (detect, segment, oriented boxes)", 8000)
        return
    if fmt == "coco":
        path, _ = _file_dialog().getSaveFileName(window, "Export instances as COCO JSON", "instances.json",
                                                 "COCO JSON (*.json)")
    else:
        path = _file_dialog().getExistingDirectory(window, "Export YOLO labels and data.yaml to")
    if path:
        window.instances.export(path, fmt)


def reference_dialog(window: WindowParts) -> None:
    folder = _file_dialog().getExistingDirectory(window, "Reference masks (ground truth) for the listed images")
    if folder:
        window.set_reference_folder(folder)


def _fill_bundled(window: WindowParts, bundled: QMenu) -> None:
    if bundled.actions():
        return
    for path in _bundled_models():
        action = QAction(path.stem, window)
        action.triggered.connect(lambda _checked=False, p=path: _open_bundled(window, p))
        bundled.addAction(action)


def _open_bundled(window: WindowParts, path: Path) -> None:
    """A bundled model, with its own samples while the list holds no images the reader opened."""
    from app.ui.controllers.loader import own_samples

    samples = own_samples(path, window.files.paths())
    window.open_model(path)
    if samples is not None:
        window.add_paths([samples])


def _bundled_models():
    from app.inference.describe.bundled import (
        bundled_models,  # the CLI's list: a prompt pair's encoder/decoder left out
    )

    return bundled_models()


def _open_log_folder() -> None:
    from app.logs import log_dir

    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QDesktopServices

    QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))


def _show_diagnostics(window: WindowParts) -> None:
    from app.ui.widgets.dialogs import DiagnosticsDialog

    dialog = DiagnosticsDialog(window.summary, window)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # each About opens a new one: the closed one goes
    dialog.show()
