"""A volume in the viewer: the slice bar, the orientation letters and the legend's whole-volume mL, kept in step
with the picture shown; slice steps go back to the window as `slice_wanted`. The whole-volume count's answers also
feed View ▸ Three planes (controllers/planes.py, `three`), which this class's commands hand on to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from app.ui.controllers.planes import ThreePlanes

if TYPE_CHECKING:
    from PySide6.QtGui import QAction

    from app.ui.controllers.presenter import Presenter
    from app.ui.state.messages import ViewResult, VolumeCount, VolumeCountFailed
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.slices import SliceBar
    from app.ui.widgets.status import StatusBar
    from app.ui.widgets.three_plane import ThreePlaneView
    from app.ui.widgets.viewer import ImageViewer
    from app.ui.workers.worker import InferenceWorker


class VolumeView(QObject):
    slice_wanted = Signal(object, int)  # path (str; never a QString), slice: the window shows it (show_path)
    fill_requested = Signal(object)  # messages.FillRequest: the worker counts the whole volume
    showing = Signal(object, int)  # path (str), slice: about to be shown, before its picture is asked for (a 3D
    # model's run, the slice's picture while it runs)

    def __init__(self, state: ViewState, *, files: FileList, viewer: ImageViewer, slices: SliceBar,
                 panel: SidePanel, worker: InferenceWorker, status: StatusBar | None = None,
                 presenter: Presenter | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state, self._files, self._viewer, self._slices = state, files, viewer, slices
        self._panel, self._worker = panel, worker
        self.presenter = presenter
        self._counted: str | None = None  # the volume whose whole-volume counts the legend shows
        self.three = ThreePlanes(state, files=files, viewer=viewer, slices=slices, panel=panel, status=status,
                                 presenter=presenter, parent=self)  # a QObject only: its widget on first use
        self.planes_shown = self.three.shown  # the three-plane view came up (True) or went back (False)
        self.three.slice_wanted.connect(self.slice_wanted)
        slices.slice_changed.connect(lambda k: self.slice_wanted.emit(files.current_path() or "", k))
        viewer.slice_wheel.connect(self.step)
        self.fill_requested.connect(worker.fill_volume)
        worker.volume_counted.connect(self._on_counted)
        worker.volume_count_failed.connect(self._on_count_failed)
        # a new threshold retunes the slice shown without a new overlay_shown: the whole volume is counted at it
        # too (the legend's mL, the three planes' mask), as a step to another slice would; after the tuner, which
        # connected first and puts the retuned view in the state
        worker.retuned.connect(self._on_retuned)

    def step(self, delta: int) -> None:
        """PgUp / PgDn and Ctrl + wheel: the previous / next slice of a volume (in the three-plane view, of the
        pane under the mouse); in a plain image, the previous / next image (as PgUp / PgDn always did)."""
        if self.three.active:
            self.three.step(delta)
            return
        path = self._files.current_path()
        volume = self._files.volume(path)
        if volume is None:
            self._files.step(delta)
            return
        wanted = self._state.wanted
        current = wanted.frame if wanted is not None and wanted.path == path else 0
        target = min(max(current + delta, 0), volume.depth - 1)
        if target != current:
            self.slice_wanted.emit(path, target)

    def show(self, path: str, frame: int):
        """The slice bar, orientation letters and legend for `path` at `frame`; its Volume, or None."""
        self.showing.emit(path, frame)
        volume = self._files.volume(path)
        self.three.showing(path)
        self._slices.show_volume(volume, frame)
        self._slices.setVisible(volume is not None and not self.three.active)
        self._viewer.set_orientation(volume.orientation_labels() if volume is not None else None)
        self._panel.image_info.external_slices = volume is not None
        if volume is None or self._counted != path:
            self._panel.legend.clear_volume()
            self._worker.stop_fill()
            self._counted = None
        return volume

    def count(self, path: str) -> None:
        """A volume's slice is on screen: count the rest of the volume in the background (legend in mL)."""
        volume = self._files.volume(path)
        shown, model = self._state.shown, self._state.model
        if volume is None or shown is None or str(shown.path) != path or model is None \
                or model.spec.task != "segmentation":
            return
        self._counted = path
        self.three.requested = (model, shown.tuning.threshold)
        from app.ui.state.messages import FillRequest

        self.fill_requested.emit(FillRequest(path, volume, shown.tuning.threshold))

    def _on_retuned(self, view: ViewResult) -> None:
        shown = self._state.shown
        if shown is view and self._counted == str(view.path) and self.three.requested[1] != view.tuning.threshold:
            self.count(str(view.path))

    def _on_counted(self, count: VolumeCount) -> None:
        if count.path == self._files.current_path() and count.path == self._counted:
            self._panel.legend.set_volume(count.millilitres, count.done, count.total, count.voxels)
            self.three.counted(count)

    def _on_count_failed(self, failed: VolumeCountFailed) -> None:
        if failed.path == self._files.current_path() and failed.path == self._counted:
            self._panel.legend.set_volume_failed(failed.why)
            self.three.count_failed(failed)

    # -- the three-plane view's commands (actions.py calls these) --------------------------------------------

    @property
    def planes(self) -> ThreePlaneView | None:
        """The three-plane widget, once made (None before the first View ▸ Three planes)."""
        return self.three.view

    def bind_toggle(self, action: QAction) -> None:
        self.three.bind_toggle(action)

    def toggle_planes(self) -> None:
        self.three.toggle()

    def show_planes(self, on: bool) -> None:
        self.three.show_planes(on)

    def fit_to_window(self) -> None:
        """View ▸ Fit to window (F): every pane of the three planes when they are shown, else the picture."""
        if self.three.active:
            self.three.fit_to_window()
        else:
            self._viewer.fit_to_window()

    def peek(self, visible: bool) -> None:
        self.three.peek(visible)
