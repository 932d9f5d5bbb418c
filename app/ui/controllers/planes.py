"""View ▸ Three planes: a volume whose whole label volume is known (the whole-volume count's VolumeCount.labels)
shown in axial, coronal and sagittal panes (widgets/three_plane.py, made on first use, not at start-up) in place
of the one-pane view. The image volume is read for it a few slices at a time (app.io.stack); the panes
follow the side panel's overlay style and the shared window, and say whose mask they show while the volume is
counted again. Another volume chosen while they are open opens in them (its image first, its mask once its whole
label volume is known); a plain picture goes back to one pane. VolumeView (volume_view.py) owns the count and hands
its answers here."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QObject, QTimer, Signal

if TYPE_CHECKING:
    import numpy as np
    from PySide6.QtGui import QAction

    from app.io.stack import VolumeStack
    from app.io.volumes import Volume
    from app.ui.controllers.presenter import Presenter
    from app.ui.state.messages import VolumeCount, VolumeCountFailed
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.slices import SliceBar
    from app.ui.widgets.status import StatusBar
    from app.ui.widgets.three_plane import ThreePlaneView
    from app.ui.widgets.viewer import ImageViewer

NOTE_MS = 8000
FOLLOW_MS = 250  # a crosshair dragged through the volume runs the model once it rests, not on every slice


class ThreePlanes(QObject):
    slice_wanted = Signal(object, int)  # path, slice: the (hidden) one-pane view follows the axial crosshair
    shown = Signal(bool)  # the three-plane view came up (True) or went back to one pane (False)

    def __init__(self, state: ViewState, *, files: FileList, viewer: ImageViewer, slices: SliceBar,
                 panel: SidePanel, status: StatusBar | None = None, presenter: Presenter | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state, self._files, self._viewer, self._slices = state, files, viewer, slices
        self._panel, self._status, self._presenter = panel, status, presenter
        self.requested: tuple = (None, None)  # the (model, threshold) the count was last asked for
        self._labels: tuple[str, np.ndarray, tuple] | None = None  # (path, label volume, (model, threshold))
        self._image: tuple[str, np.ndarray, bool] | None = None  # (path, image volume, inverted) read for it
        self._stack: tuple[str, VolumeStack] | None = None  # the image volume being read
        self.view: ThreePlaneView | None = None  # made on first use
        self._path: str | None = None  # the volume the view shows (None: one pane)
        self._toggle: QAction | None = None

    @property
    def active(self) -> bool:
        return self.view is not None and self._path is not None

    def showing(self, path: str) -> None:
        """The window shows `path`: another volume opens in the three planes when they are open, a plain picture
        leaves them; another volume's data is dropped (one volume's masks and image kept, not every volume's the
        reader passed through)."""
        switch = self._path is not None and path != self._path
        if switch and self._files.volume(path) is None:
            self.show_planes(False)
            switch = False
        if self._labels is not None and self._labels[0] != path:
            self._labels = None
        if self._image is not None and self._image[0] != path:
            self._image = None
        if switch:
            self._switch(path)
        self._update_toggle()

    def _switch(self, path: str) -> None:
        """The three planes stay open for the volume `path`: read its image (the panes keep the one before,
        without its mask, and say so), then open it, with its mask once known."""
        assert self.view is not None
        self.view.set_labels(None)
        self.view.set_note(f"Reading {self._files.name_of(path, whole=True)}…")  # the panes have room
        self._read(path)

    def counted(self, count: VolumeCount) -> None:
        """The count of the volume shown (VolumeView checked it is): its label volume once complete."""
        labels = count.labels
        if labels is not None and (self._labels is None or self._labels[1] is not labels):
            self._labels = (count.path, labels, self.requested)  # the worker counts the latest request only
            self._update_toggle()
            if self.view is not None and self._path == count.path:
                self._set_labels(count.path)
        if self.view is not None and self._path == count.path:
            self._note_recount(count)

    def _set_labels(self, path: str) -> None:
        """The panes of `path` get its label volume (when it fits the image read)."""
        assert self.view is not None and self._labels is not None
        labels = self._first_time_point(self._labels[1])
        if self._image is not None and labels.shape != self._image[1].shape:
            self.view.set_note(f"No mask: the mask ({labels.shape}) does not match the image volume "
                               f"({self._image[1].shape})")
            return
        self.view.set_labels(labels)
        self.view.set_note("")

    def count_failed(self, failed: VolumeCountFailed) -> None:
        if self.view is not None and self._path == failed.path:
            self.view.set_labels(None)  # no whole-volume mask to show: never a partial one
            self.view.set_note(f"No mask: the whole-volume count failed ({failed.why})")

    def _note_recount(self, count: VolumeCount) -> None:
        """While the volume is counted again (another threshold, another model), the panes say whose mask they
        show: the previous threshold's, or none for another model (its mask would be read as this one's)."""
        assert self.view is not None
        if self._labels is None:
            return  # the panes say they wait for the mask (_open)
        shown_for = self._labels[2]
        if count.labels is not None or shown_for == self.requested:
            self.view.set_note("")
            return
        progress = f"{count.done} / {count.total} slices"
        if shown_for[0] is not self.requested[0]:
            self.view.set_labels(None)
            self.view.set_note(f"No mask yet: the volume is being counted with the new model ({progress})")
        else:
            self.view.set_note(f"The mask shown is at the previous threshold; the volume is being counted at "
                               f"the new one ({progress})")

    # -- the reader's commands ---------------------------------------------------------------------------

    def bind_toggle(self, action: QAction) -> None:
        """View ▸ Three planes: checkable, enabled while the volume shown has its whole label volume."""
        self._toggle = action
        action.setCheckable(True)
        action.setStatusTip("Axial, coronal and sagittal panes with a linked crosshair (once the whole volume "
                            "is counted)")
        self._update_toggle()

    def toggle(self) -> None:
        self.show_planes(self._toggle.isChecked() if self._toggle is not None else self._path is None)

    def show_planes(self, on: bool) -> None:
        """The three-plane view of the volume shown (on), or the one-pane view again (off)."""
        if not on:
            self._leave()
            return
        path = self._files.current_path() or ""
        why = self.problem(path)
        if why:
            self._say(why)
            self._check(False)
            return
        if self._image is not None and self._image[0] == path:
            self._open(path)
        else:
            self._read(path)

    def _leave_or_say(self, text: str) -> None:
        """A volume the open panes were switching to cannot be shown: back to one pane, saying why."""
        self._say(text)
        if self._path is not None:
            self._leave()
        self._check(False)

    def problem(self, path: str) -> str:
        """Why the three-plane view cannot show `path` now ("" when it can)."""
        if self._files.volume(path) is None:
            return "Three planes: for a volume (a DICOM series or a NIfTI file)"
        if self._labels is None or self._labels[0] != path or self._labels[2][0] is not self._state.model:
            if self._state.model is None or self._state.model.spec.task != "segmentation":
                return "Three planes: open a segmentation model first"
            return "Three planes: once the whole volume is counted (the legend's mL)"
        return ""

    def step(self, delta: int) -> None:
        """PgUp / PgDn: the slice of the pane under the mouse."""
        if self.view is not None:
            self.view.step_hovered(delta)

    def fit_to_window(self) -> None:
        if self.view is not None:
            self.view.fit()

    def peek(self, visible: bool) -> None:
        """Hold Space: the overlay hidden while it is held, as the one-pane view's."""
        if self.view is not None:
            self.view.peek(visible)

    # -- reading the image volume, opening and leaving ---------------------------------------------------

    def _read(self, path: str) -> None:
        from app.errors import SegLensError, one_line
        from app.io.stack import VolumeStack

        try:
            self._stack = (path, VolumeStack(self._files.volume(path)))  # the size is checked before allocating
        except SegLensError as exc:
            self._leave_or_say(f"Three planes: {one_line(exc)}")
            return
        QTimer.singleShot(0, self, self._read_step)

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
            self._leave_or_say(f"Three planes: {one_line(exc)}")
            return
        if not stack.complete:
            self._say(f"Three planes: reading slice {stack.done} of {stack.depth}…")
            QTimer.singleShot(0, self, self._read_step)
            return
        self._stack, self._image = None, (path, stack.array, stack.invert)
        self._open(path)

    def _open(self, path: str) -> None:
        from app.ui.widgets.three_plane import PlaneVolume

        volume = self._files.volume(path)
        assert volume is not None and self._image is not None
        _, image, invert = self._image
        known = self._labels is not None and self._labels[0] == path
        labels = self._first_time_point(self._labels[1]) if known and self._labels is not None else None
        if labels is not None and labels.shape != image.shape:  # the masks are at the model's size, not the image's
            self._leave_or_say(f"Three planes: the mask ({labels.shape}) does not match the image volume "
                               f"({image.shape})")
            return
        view = self.view or self._make()
        unit = "HU" if volume.series.get("Modality") == "CT" else ""  # a CT series' values are rescaled to HU
        data = PlaneVolume(image, labels, volume.spacing, volume.affine, self._window(volume, image),
                           self._colors(), self._names(), invert, unit)
        view.set_volume(data, start_point(labels, self._frame(path), image.shape))
        view.set_style(opacity=self._state.overlay.opacity, visible=self._state.overlay.visible,
                       contour=self._contour())
        view.set_note("" if labels is not None else "No mask yet: waiting for the whole volume's result")
        switched = self._path is not None
        self._path = path
        self._viewer.hide()
        self._slices.hide()
        view.show()
        view.panes["axial"].setFocus()
        self._check(True)
        if switched:
            return  # the panes were open already: another volume in them
        self._say("Three planes: a click moves the crosshair; the wheel steps the pane under the mouse")
        self.shown.emit(True)

    def _leave(self) -> None:
        path, self._path = self._path, None
        self._stack = None
        self._check(False)
        if self.view is None or path is None:
            return
        k = self.view.point[0]
        self.view.hide()
        self._viewer.show()
        self._slices.setVisible(self._files.volume(path) is not None)
        self.shown.emit(False)
        if path == self._files.current_path() and k != self._frame(path):
            self.slice_wanted.emit(path, k)  # the one-pane view opens at the crosshair's slice

    def _make(self) -> ThreePlaneView:
        from PySide6.QtWidgets import QBoxLayout, QWidget

        from app.ui.widgets.three_plane import ThreePlaneView

        view = self.view = ThreePlaneView()
        # the image column: the picture over the slice bar
        column = cast(QBoxLayout, cast(QWidget, self._viewer.parentWidget()).layout())
        column.insertWidget(column.indexOf(self._viewer), view, 1)
        view.hide()
        self._follow = QTimer(self)  # the one-pane view (hidden) follows the axial slice, once the crosshair rests
        self._follow.setSingleShot(True)
        self._follow.setInterval(FOLLOW_MS)
        self._follow.timeout.connect(self._follow_slice)
        view.point_changed.connect(lambda *_point: self._follow.start())
        if self._presenter is not None:  # window/level is the one-pane view's: dragged here, shown in both
            view.window_dragged.connect(self._presenter.drag_window)
            self._presenter.window_shown.connect(self._on_window)
        for signal in (self._panel.opacity_changed, self._panel.visible_changed, self._panel.mode_changed,
                       self._panel.hidden_changed):
            signal.connect(self._restyle)
        return view

    def _follow_slice(self) -> None:
        """The slice under the axial crosshair becomes the one-pane view's: the legend's and the image panel's
        per-slice figures are of the slice the reader looks at, and leaving opens there."""
        path = self._path
        if self.view is not None and path is not None and path == self._files.current_path() \
                and self.view.point[0] != self._frame(path):
            self.slice_wanted.emit(path, self.view.point[0])

    def _on_window(self, window) -> None:
        if self.active and self.view is not None and self.view.display_window is not None:
            self.view.set_window(window)

    def _restyle(self, *_args) -> None:
        """The side panel changed the overlay (the presenter has updated the state first: it connected first)."""
        if self.view is not None:
            style = self._state.overlay
            self.view.set_style(opacity=style.opacity, visible=style.visible, contour=self._contour(),
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
            self._toggle.setEnabled(self._path is not None or not self.problem(path))

    def _check(self, on: bool) -> None:
        if self._toggle is not None:
            self._toggle.blockSignals(True)
            self._toggle.setChecked(on)
            self._toggle.blockSignals(False)
        self._update_toggle()

    def _say(self, text: str) -> None:
        if self._status is not None:
            self._status.showMessage(text, NOTE_MS)


def start_point(labels: np.ndarray | None, k: int, shape: tuple[int, ...] | None = None) -> tuple[int, int, int]:
    """Where the crosshair starts: on the reader's slice `k`, at the labelled voxel nearest that slice's labelled
    centre (on a structure, not beside a ring's hole); the slice's centre when nothing there is labelled, or no
    labels are known yet (`shape`: the image volume's)."""
    import numpy as np

    shape = labels.shape if labels is not None else shape
    assert shape is not None
    k = min(max(k, 0), shape[0] - 1)
    found = np.argwhere(labels[k] > 0) if labels is not None else np.empty((0, 2))
    if not len(found):
        return k, shape[1] // 2, shape[2] // 2
    centre = found.mean(axis=0)
    row, col = found[int(np.argmin(((found - centre) ** 2).sum(axis=1)))]
    return k, int(row), int(col)
