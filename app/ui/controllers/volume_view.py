"""A volume in the viewer: the slice bar, the orientation letters and the legend's whole-volume mL, kept in step
with the picture shown; slice steps go back to the window as `slice_wanted`. Once the whole label volume is known
(the whole-volume count), View ▸ Three planes shows it in axial, coronal and sagittal panes (widgets/three_plane.py,
made on first use) in place of the one-pane view; the image volume is read for it a few slices at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QObject, QTimer, Signal

if TYPE_CHECKING:
    import numpy as np
    from PySide6.QtGui import QAction

    from app.io.volumes import Volume
    from app.runs.volume_stack import VolumeStack
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

NOTE_MS = 8000
FOLLOW_MS = 250  # a crosshair dragged through the volume runs the model once it rests, not on every slice


class VolumeView(QObject):
    slice_wanted = Signal(object, int)  # path (str; never a QString), slice: the window shows it (show_path)
    fill_requested = Signal(object)  # messages.FillRequest: the worker counts the whole volume
    planes_shown = Signal(bool)  # the three-plane view came up (True) or went back to one pane (False)

    def __init__(self, state: ViewState, *, files: FileList, viewer: ImageViewer, slices: SliceBar,
                 panel: SidePanel, worker: InferenceWorker, status: StatusBar | None = None,
                 presenter: Presenter | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state, self._files, self._viewer, self._slices = state, files, viewer, slices
        self._panel, self._worker, self._status, self._presenter = panel, worker, status, presenter
        self._counted: str | None = None  # the volume whose whole-volume counts the legend shows
        self._labels: tuple[str, np.ndarray, tuple] | None = None  # (path, label volume, (model, threshold))
        self._requested: tuple = (None, None)  # the (model, threshold) the count was last asked for
        self._image: tuple[str, np.ndarray, bool] | None = None  # (path, image volume, inverted) read for it
        self._stack: tuple[str, VolumeStack] | None = None  # the image volume being read
        self.planes: ThreePlaneView | None = None  # made on first use: not at start-up
        self._planes_path: str | None = None  # the volume the three-plane view shows (None: one pane)
        self._toggle: QAction | None = None
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
        if self.planes is not None and self._planes_path is not None:
            self.planes.step_hovered(delta)
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
        volume = self._files.volume(path)
        if self._planes_path is not None and path != self._planes_path:
            self.show_planes(False)  # another picture: back to one pane
        self._slices.show_volume(volume, frame)
        self._slices.setVisible(volume is not None and self._planes_path is None)
        self._viewer.set_orientation(volume.orientation_labels() if volume is not None else None)
        self._panel.image_info.external_slices = volume is not None
        if volume is None or self._counted != path:
            self._panel.legend.clear_volume()
            self._worker.stop_fill()
            self._counted = None
        if self._labels is not None and self._labels[0] != path:
            self._labels = None  # one volume's masks kept, not every volume's the reader passed through
        if self._image is not None and self._image[0] != path:
            self._image = None
        self._update_toggle()
        return volume

    def count(self, path: str) -> None:
        """A volume's slice is on screen: count the rest of the volume in the background (legend in mL)."""
        volume = self._files.volume(path)
        shown, model = self._state.shown, self._state.model
        if volume is None or shown is None or str(shown.path) != path or model is None \
                or model.spec.task != "segmentation":
            return
        self._counted = path
        self._requested = (model, shown.tuning.threshold)
        from app.ui.state.messages import FillRequest

        self.fill_requested.emit(FillRequest(path, volume, shown.tuning.threshold))

    def _on_retuned(self, view: ViewResult) -> None:
        shown = self._state.shown
        if shown is view and self._counted == str(view.path) and self._requested[1] != view.tuning.threshold:
            self.count(str(view.path))

    def _on_counted(self, count: VolumeCount) -> None:
        if count.path == self._files.current_path() and count.path == self._counted:
            self._panel.legend.set_volume(count.millilitres, count.done, count.total, count.voxels)
            labels = count.labels
            if labels is not None and (self._labels is None or self._labels[1] is not labels):
                self._labels = (count.path, labels, self._requested)  # the worker counts the latest request only
                self._update_toggle()
                if self.planes is not None and self._planes_path == count.path:
                    self.planes.set_labels(self._first_time_point(labels))
            if self.planes is not None and self._planes_path == count.path:
                self._note_recount(count)

    def _on_count_failed(self, failed: VolumeCountFailed) -> None:
        if failed.path == self._files.current_path() and failed.path == self._counted:
            self._panel.legend.set_volume_failed(failed.why)
            if self.planes is not None and self._planes_path == failed.path:
                self.planes.set_labels(None)  # no whole-volume mask to show: never a partial one
                self.planes.set_note(f"No mask: the whole-volume count failed ({failed.why})")

    def _note_recount(self, count: VolumeCount) -> None:
        """While the volume is counted again (another threshold, another model), the panes say whose mask they
        show: the previous threshold's, or none for another model (its mask would be read as this one's)."""
        assert self.planes is not None and self._labels is not None
        shown_for = self._labels[2]
        if count.labels is not None or shown_for == self._requested:
            self.planes.set_note("")
            return
        progress = f"{count.done} / {count.total} slices"
        if shown_for[0] is not self._requested[0]:
            self.planes.set_labels(None)
            self.planes.set_note(f"No mask yet: the volume is being counted with the new model ({progress})")
        else:
            self.planes.set_note(f"The mask shown is at the previous threshold; the volume is being counted at "
                                 f"the new one ({progress})")

    # -- the three-plane view ----------------------------------------------------------------------------

    def bind_toggle(self, action: QAction) -> None:
        """View ▸ Three planes: checkable, enabled while the volume shown has its whole label volume."""
        self._toggle = action
        action.setCheckable(True)
        action.setStatusTip("Axial, coronal and sagittal panes with a linked crosshair (once the whole volume "
                            "is counted)")
        self._update_toggle()

    def toggle_planes(self) -> None:
        self.show_planes(self._toggle.isChecked() if self._toggle is not None else self._planes_path is None)

    def show_planes(self, on: bool) -> None:
        """The three-plane view of the volume shown (on), or the one-pane view again (off)."""
        if not on:
            self._leave_planes()
            return
        path = self._files.current_path() or ""
        why = self.planes_problem(path)
        if why:
            self._say(why)
            self._check(False)
            return
        if self._image is not None and self._image[0] == path:
            self._open_planes(path)
        else:
            self._read(path)

    def planes_problem(self, path: str) -> str:
        """Why the three-plane view cannot show `path` now ("" when it can)."""
        volume = self._files.volume(path)
        if volume is None:
            return "Three planes: for a volume (a DICOM series or a NIfTI file)"
        if self._labels is None or self._labels[0] != path or self._labels[2][0] is not self._state.model:
            if self._state.model is None or self._state.model.spec.task != "segmentation":
                return "Three planes: open a segmentation model first"
            return "Three planes: once the whole volume is counted (the legend's mL)"
        return ""

    def _read(self, path: str) -> None:
        from app.errors import SegLensError, one_line
        from app.runs.volume_stack import VolumeStack

        try:
            self._stack = (path, VolumeStack(self._files.volume(path)))  # the size is checked before allocating
        except SegLensError as exc:
            self._say(f"Three planes: {one_line(exc)}")
            self._check(False)
            return
        QTimer.singleShot(0, self._read_step)

    def _read_step(self) -> None:
        """A few slices of the image volume, between the window's other events."""
        if self._stack is None:
            return
        path, stack = self._stack
        if path != self._files.current_path():
            self._stack = None  # the reader moved on
            return
        try:
            stack.step()
        except Exception as exc:  # an unreadable slice: said in one line, the one-pane view stays
            from app.errors import one_line

            self._stack = None
            self._say(f"Three planes: {one_line(exc)}")
            self._check(False)
            return
        if not stack.complete:
            self._say(f"Three planes: reading slice {stack.done} of {stack.depth}…")
            QTimer.singleShot(0, self._read_step)
            return
        self._stack, self._image = None, (path, stack.array, stack.invert)
        self._open_planes(path)

    def _open_planes(self, path: str) -> None:
        from app.ui.widgets.three_plane import PlaneVolume

        volume = self._files.volume(path)
        assert volume is not None and self._image is not None and self._labels is not None
        _, image, invert = self._image
        labels = self._first_time_point(self._labels[1])
        if labels.shape != image.shape:  # the masks are at the model's size, not the image's
            self._say(f"Three planes: the mask ({labels.shape}) does not match the image volume ({image.shape})")
            self._check(False)
            return
        planes = self.planes or self._make_planes()
        unit = "HU" if volume.series.get("Modality") == "CT" else ""  # a CT series' values are rescaled to HU
        data = PlaneVolume(image, labels, volume.spacing, volume.affine, self._window(volume, image),
                           self._colors(), self._names(), invert, unit)
        planes.set_volume(data, _start_point(labels, self._frame(path)))
        planes.set_style(opacity=self._state.overlay.opacity, visible=self._state.overlay.visible,
                         contour=self._contour())
        self._planes_path = path
        self._viewer.hide()
        self._slices.hide()
        planes.show()
        planes.panes["axial"].setFocus()
        self._check(True)
        self._say("Three planes: a click moves the crosshair; the wheel steps the pane under the mouse")
        self.planes_shown.emit(True)

    def _leave_planes(self) -> None:
        path, self._planes_path = self._planes_path, None
        self._stack = None
        self._check(False)
        if self.planes is None or path is None:
            return
        k = self.planes.point[0]
        self.planes.hide()
        self._viewer.show()
        volume = self._files.volume(path)
        self._slices.setVisible(volume is not None)
        self.planes_shown.emit(False)
        if path == self._files.current_path() and k != self._frame(path):
            self.slice_wanted.emit(path, k)  # the one-pane view opens at the crosshair's slice

    def _make_planes(self) -> ThreePlaneView:
        from PySide6.QtWidgets import QBoxLayout, QWidget

        from app.ui.widgets.three_plane import ThreePlaneView

        planes = self.planes = ThreePlaneView()
        # the image column: the picture over the slice bar
        column = cast(QBoxLayout, cast(QWidget, self._viewer.parentWidget()).layout())
        column.insertWidget(column.indexOf(self._viewer), planes, 1)
        planes.hide()
        self._follow = QTimer(self)  # the one-pane view (hidden) follows the axial slice, once the crosshair rests
        self._follow.setSingleShot(True)
        self._follow.setInterval(FOLLOW_MS)
        self._follow.timeout.connect(self._follow_slice)
        planes.point_changed.connect(lambda *_point: self._follow.start())
        if self._presenter is not None:  # window/level is the one-pane view's: dragged here, shown in both
            planes.window_dragged.connect(self._presenter.drag_window)
            self._presenter.window_shown.connect(self._on_window)
        for signal in (self._panel.opacity_changed, self._panel.visible_changed, self._panel.mode_changed,
                       self._panel.hidden_changed):
            signal.connect(self._restyle)
        return planes

    def fit_to_window(self) -> None:
        """View ▸ Fit to window (F): every pane of the three planes when they are shown, else the picture."""
        if self.planes is not None and self._planes_path is not None:
            self.planes.fit()
        else:
            self._viewer.fit_to_window()

    def peek(self, visible: bool) -> None:
        """Hold Space: the three planes' overlay hidden while it is held, as the one-pane view's."""
        if self.planes is not None:
            self.planes.peek(visible)

    def _follow_slice(self) -> None:
        """The slice under the axial crosshair becomes the one-pane view's: the legend's and the image panel's
        per-slice figures are of the slice the reader looks at, and leaving opens there."""
        path = self._planes_path
        if self.planes is not None and path is not None and path == self._files.current_path() \
                and self.planes.point[0] != self._frame(path):
            self.slice_wanted.emit(path, self.planes.point[0])

    def _on_window(self, window) -> None:
        if self.planes is not None and self._planes_path is not None and self.planes.display_window is not None:
            self.planes.set_window(window)

    def _restyle(self, *_args) -> None:
        """The side panel changed the overlay (the presenter has updated the state first: it connected first)."""
        if self.planes is not None:
            style = self._state.overlay
            self.planes.set_style(opacity=style.opacity, visible=style.visible, contour=self._contour(),
                                  colors=self._colors())

    # -- helpers ----------------------------------------------------------------------------------------

    def _first_time_point(self, labels: np.ndarray) -> np.ndarray:
        """A 4D NIfTI's slices are (t, k) pairs, t-major: the three planes show the first time point."""
        depth = self._image[1].shape[0] if self._image is not None else labels.shape[0]
        return labels[:depth]

    def _window(self, volume: Volume, image: np.ndarray) -> tuple[float, float] | None:
        import numpy as np

        if image.dtype == np.uint8 or (volume.window is None and float(image.max()) <= 255
                                       and float(image.min()) >= 0 and self._state.display_window is None):
            return None  # 8-bit grey levels: shown as they are
        if self._state.display_window is not None:
            return self._state.display_window
        if volume.window is not None:
            return volume.window
        from app.io.window import auto_window

        return auto_window(image[:: max(1, image.shape[0] // 16)])

    def _colors(self) -> np.ndarray:
        from app.ui.widgets.three_plane import label_colors

        model = self._state.model
        return label_colors(model.spec.classes if model is not None else (), self._state.overlay.hidden)

    def _names(self) -> tuple[str, ...]:
        model = self._state.model
        return tuple(info.name for info in model.spec.classes) if model is not None else ()

    def _contour(self) -> bool:
        from app.ui.state.view_state import DisplayMode

        return self._state.overlay.mode is DisplayMode.CONTOUR

    def _frame(self, path: str) -> int:
        shown = self._state.on_screen
        return shown.frame if shown is not None and str(shown.path) == path else 0

    def _update_toggle(self) -> None:
        if self._toggle is not None:
            path = self._files.current_path() or ""
            self._toggle.setEnabled(self._planes_path is not None or not self.planes_problem(path))

    def _check(self, on: bool) -> None:
        if self._toggle is not None:
            self._toggle.blockSignals(True)
            self._toggle.setChecked(on)
            self._toggle.blockSignals(False)
        self._update_toggle()

    def _say(self, text: str) -> None:
        if self._status is not None:
            self._status.showMessage(text, NOTE_MS)


def _start_point(labels: np.ndarray, k: int) -> tuple[int, int, int]:
    """Where the crosshair starts: on the reader's slice `k`, at the labelled voxel nearest that slice's labelled
    centre (on a structure, not beside a ring's hole); the slice's centre when nothing there is labelled."""
    import numpy as np

    k = min(max(k, 0), labels.shape[0] - 1)
    found = np.argwhere(labels[k] > 0)
    if not len(found):
        return k, labels.shape[1] // 2, labels.shape[2] // 2
    centre = found.mean(axis=0)
    row, col = found[int(np.argmin(((found - centre) ** 2).sum(axis=1)))]
    return k, int(row), int(col)
