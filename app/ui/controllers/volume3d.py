"""A 3D model in the viewer: asked to run over the volume shown before its first slice is asked for (a FillRequest,
which the worker's Volume3DRunner answers with the whole volume's VolumeCount; a result it keeps is not run again),
its progress ("patch k of n") and Cancel in the status bar and over the canvas (RunBanner), a stop when the reader
moves to another file or model; meanwhile, and after a Cancel, the volume's slices on the canvas as pictures alone
(slice_preview.py), the overlay joining them when the result comes; and the lesion list of the volume shown (a 3D
model's result, or a 2D model's whole-volume count), whose rows move the three-plane crosshair and the one-pane view
to a component's centre. Every slice shown afterwards comes from the kept result (the worker's process_view), never
a second model run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from app.inference.decide.lesions import Lesion
    from app.ui.controllers.loader import ModelLoader
    from app.ui.controllers.slice_preview import SlicePreview
    from app.ui.controllers.volume_view import VolumeView
    from app.ui.state.messages import VolumeCount, VolumeCountFailed, VolumeProgress
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.run_banner import RunBanner
    from app.ui.widgets.status import StatusBar
    from app.ui.widgets.viewer import ImageViewer
    from app.ui.workers.worker import InferenceWorker

NOTE_MS = 15000
STAGES = {"reading": "reading slice", "patches": "patch"}


class Volume3D(QObject):
    fill_requested = Signal(object)  # messages.FillRequest: the 3D model over the whole volume, to the worker

    def __init__(self, state: ViewState, *, files: FileList, status: StatusBar, panel: SidePanel,
                 viewer: ImageViewer, worker: InferenceWorker, volumes: VolumeView, loader: ModelLoader,
                 show_slice: Callable[[str, int], None], banner: RunBanner | None = None,
                 preview: SlicePreview | None = None, parent: QObject | None = None) -> None:
        """`show_slice(path, k)`: the window shows slice `k` of `path` (a lesion row chosen); `loader`: another
        model being loaded stops the run in progress; `banner`, `preview`: made here unless given (tests)."""
        super().__init__(parent)
        self._state, self._files, self._status, self._panel = state, files, status, panel
        self._viewer, self._worker, self._volumes, self._show_slice = viewer, worker, volumes, show_slice
        self._asked: tuple[str, int] | None = None  # (path, model generation) whose run was asked for
        self._running: str | None = None  # the volume whose run the status bar shows
        self._cancelled: str | None = None  # the reader cancelled this volume's run: not asked again until left
        self._listed: str | None = None  # the volume whose components the lesion list shows
        self._stage = ""  # of the run shown: "reading" or "patches"
        self._labels: np.ndarray | None = None  # the label volume whose components are listed
        self._lesions: tuple[Lesion, ...] | None = None  # those components
        self._list_wired = False
        self._ready: set[str] = set()  # volumes whose result the worker holds under this model: no preview
        self._busy = ""  # the side panel's line for the run shown
        if banner is None:
            from app.ui.widgets.run_banner import RunBanner

            banner = RunBanner(viewer)
        if preview is None:
            from app.ui.controllers.slice_preview import SlicePreview

            assert volumes.presenter is not None, "the window's volume view has its presenter"
            preview = SlicePreview(state, viewer=viewer, panel=panel, presenter=volumes.presenter, status=status,
                                   busy=self._busy_line, parent=self)
        self.banner, self.preview = banner, preview
        banner.cancel_requested.connect(self.cancel)
        banner.rerun_requested.connect(self.run_again)
        self.fill_requested.connect(worker.fill_volume)
        volumes.showing.connect(self.showing)  # before the picture is asked for: the run is queued first
        worker.volume_progress.connect(self._on_progress)  # bound methods: run on this thread, not the worker's
        worker.volume_counted.connect(self._on_counted)
        worker.volume_count_failed.connect(self._on_failed)
        status.cancel_requested.connect(self.cancel)
        loader.load_requested.connect(self.model_opening)

    # -- the run -------------------------------------------------------------------------------------------------

    def showing(self, path: str, frame: int = 0) -> None:
        """Slice `frame` of `path` is about to be shown: with a 3D model and a volume, its run is asked for (the
        worker answers at once from a result it keeps) and, until the result is known, the slice is shown as a
        picture alone; a run for any other volume stops. A plain image gets the refusal line from its own
        request."""
        model, volume = self._state.model, self._files.volume(path)
        if path != self._listed:
            self._panel.hide_lesions()
            self._listed = None
        if path != self._cancelled and self._cancelled is not None:
            self._cancelled = None
            self.banner.hide()  # its Run again was for the volume left
        if self._running is not None and self._running != path:
            self._end_progress()  # the run of the volume left stops at its next batch: its bar goes now
        if model is None or not model.spec.is_3d or volume is None:
            self._worker.want_volume(None)
            self.preview.forget()
            self._asked = None  # a volume shown next is asked for again (its kept result answers at once)
            return
        if path not in self._ready:
            self.preview.ask(path, frame, volume)
        if path == self._cancelled:
            self._worker.want_volume(None)
            self._status.showMessage(self._cancelled_line(path), NOTE_MS)
            return
        self._worker.want_volume(path)  # a plain attribute write: read by the worker between batches
        key = (path, self._state.generation)
        if self._asked == key:
            return
        from app.ui.state.messages import FillRequest

        self._asked = key
        self.fill_requested.emit(FillRequest(path, volume, self._state.tuning.threshold))

    def model_opening(self, _request: object = None) -> None:
        """Another model is being loaded: the run in progress stops, the next model runs afresh."""
        self._worker.want_volume(None)
        if self._cancelled is not None:
            self.banner.hide()
        self._asked = self._cancelled = None
        self._ready.clear()
        self.preview.forget()
        self._panel.hide_lesions()
        self._listed = None
        self._end_progress()

    def cancel(self) -> None:
        """Cancel (the status bar's, the canvas's): the run of the volume shown stops after its current batch; its
        slices stay on the canvas, without a result."""
        path = self._running
        if path is None:
            return
        self._cancelled, self._asked = path, None
        self._worker.want_volume(None)
        self._status.showMessage(f"Cancelling the 3D model's run over {self._files.name_of(path)}…", NOTE_MS)

    def run_again(self) -> None:
        """Run again (the canvas's, after a Cancel): the volume shown is run once more, from the slice shown."""
        path = self._cancelled
        if path is None or path != self._files.current_path():
            return
        self._cancelled = None
        self.banner.hide()
        wanted = self._state.wanted
        # as a slice step: the run is queued (showing), then the slice's picture, answered with the result
        self._show_slice(path, wanted.frame if wanted is not None and wanted.path == path else 0)

    @property
    def running(self) -> str | None:
        """The volume whose run is in progress (as the status bar shows it), None when none is."""
        return self._running

    def _on_progress(self, progress: VolumeProgress) -> None:
        path, stage = progress.path, progress.stage
        if stage in ("done", "stopped"):
            if stage == "done":
                self._ready.add(path)
            if self._running == path:
                self._end_progress()
            if path == self._files.current_path():
                self._ended(progress)
            return
        if path != self._files.current_path() or path == self._cancelled:
            return  # a run the reader left: it stops at its next batch
        self._ready.discard(path)  # run again (the worker let its result go to keep within its memory)
        if self._running != path:
            self._start(path)
        if self._running == path:
            if stage != self._stage:  # the bar counts slices read, then patches run
                self._stage = stage
                self._status.start_run(max(1, progress.total))
            self._status.run_progress(progress.done)
            stage_name = STAGES.get(stage, stage)
            what = f"{stage_name} {progress.done} of {progress.total}"
            self._busy = f"Running the 3D model over the whole volume: {what}"
            self._panel.show_busy(self._busy)
            self._status.showMessage(f"{self._files.name_of(path)}: 3D model, {what} (Cancel stops it)", 0)
            self.banner.show_progress(f"3D model: {stage_name} {progress.done} / {progress.total}")

    def _start(self, path: str) -> None:
        """The run of the volume shown starts: the status bar and the canvas show its progress and Cancel (unless
        Run on all holds the bar); the picture before it, another file's, leaves the screen for this volume's
        slice without a result."""
        if self._status.run_shown:
            return
        self._running, self._stage, self._busy = path, "", ""
        on_screen = self._state.on_screen
        if (on_screen is None or str(on_screen.path) != path) and not self.preview.shows(path):
            self._state.clear_screen()
            self._viewer.clear()
            self._panel.clear_result()
            wanted, volume = self._state.wanted, self._files.volume(path)
            if wanted is not None and wanted.path == path and volume is not None:
                self.preview.ask(path, wanted.frame, volume)

    def _end_progress(self) -> None:
        if self._running is not None:
            self._running = None
            self._status.end_run()
            self._panel.show_busy(None)
            self.banner.hide()

    def _busy_line(self, path: str) -> str:
        """The side panel's line while the volume `path` has no result: its run's progress, or its Cancel."""
        if path == self._cancelled:
            return "No result: the 3D model's run over this volume was cancelled"
        if path == self._running and self._busy:
            return self._busy
        return "Waiting for the 3D model's run over the whole volume…"

    def _ended(self, progress: VolumeProgress) -> None:
        name = self._files.name_of(progress.path)  # a series as its row says it, not its UID
        if progress.stage == "done":
            self._status.showMessage(f"{name}: 3D model over the whole volume, {progress.total} patches in "
                                     f"{progress.seconds:.1f} s; slices, threshold and heatmap from its result",
                                     NOTE_MS)
            return
        if progress.path == self._cancelled:  # no result: the slices stay on the canvas as pictures alone
            self._panel.clear_result()
            self._panel.show_busy(self._busy_line(progress.path))
            self._files.set_status(progress.path, "pending")
            self._status.showMessage(self._cancelled_line(progress.path), NOTE_MS)
            self.banner.show_stopped("3D model: cancelled")

    def _cancelled_line(self, path: str) -> str:
        return (f"{self._files.name_of(path)}: the 3D model's run was cancelled: its slices are shown without a "
                "result (Run again, under the image, runs it)")

    def _named(self, path: str, line: str) -> str:
        """A worker's line about `path` (`<path>: why`) with the volume named as its row names it."""
        return f"{self._files.name_of(path)}{line[len(path):]}" if line.startswith(f"{path}: ") else line

    def _on_failed(self, failed: VolumeCountFailed) -> None:
        if self._running == failed.path:
            self._end_progress()
        if failed.path == self._files.current_path() and self._state.model is not None \
                and self._state.model.spec.is_3d:
            self._status.showMessage(f"Error: {self._named(failed.path, failed.why)}", NOTE_MS)

    # -- the lesion list -----------------------------------------------------------------------------------------

    def _on_counted(self, count: VolumeCount) -> None:
        """A whole volume's components (a 3D model's result, a 2D model's completed count) for the volume shown."""
        model = self._state.model
        if model is not None and model.spec.is_3d and count.labels is not None:
            self._ready.add(count.path)  # the worker holds its result: its slices come from it at once
        if count.path != self._files.current_path() or model is None or count.done < count.total:
            return
        if count.lesions is None and not count.lesions_why:
            return
        from app.inference.model.rules import VOLUME_CONNECTIVITY

        first = self._listed != count.path
        if not first and count.labels is self._labels and count.lesions == self._lesions:
            return  # the same volume counted again (the next slice shown): the list and its chosen row stay
        group = self._panel.lesion_list()
        if not self._list_wired:
            self._list_wired = True
            group.chosen.connect(self.go_to)
        volume = self._files.volume(count.path)
        if count.lesions is None:
            group.set_unavailable(count.lesions_why)
        else:
            group.set_lesions(count.lesions, classes=model.spec.classes,
                              spacing=volume.spacing if volume is not None else None,
                              connectivity=VOLUME_CONNECTIVITY)
        self._listed, self._labels, self._lesions = count.path, count.labels, count.lesions
        if first:
            self._panel.reveal(group)  # a short screen: the list is under the legend, below the fold

    def go_to(self, lesion: Lesion) -> None:
        """The three-plane crosshair (when those panes are shown) and the one-pane view go to `lesion`'s centre."""
        path = self._files.current_path()
        if not path:
            return
        k, row, col = on_lesion(lesion, self._labels if self._listed == path else None)
        planes = self._volumes.planes
        if planes is not None and planes.isVisible():
            planes.set_point(k, row, col)  # the hidden one-pane view follows once the crosshair rests
        else:
            self._show_slice(path, k)


def on_lesion(lesion: Lesion, labels: np.ndarray | None) -> tuple[int, int, int]:
    """Where the crosshair goes for `lesion`: its centroid's slice, at the voxel of its class in its box nearest
    the centroid (a ring's or a curved bone's centroid lies outside it); the centroid itself without labels."""
    k, row, col = (round(v) for v in lesion.centroid)
    if labels is None:
        return k, row, col
    import numpy as np

    (k0, k1), (r0, r1), (c0, c1) = lesion.bbox
    k = min(max(k, k0), k1 - 1)
    found = np.argwhere(labels[k, r0:r1, c0:c1] == lesion.label)
    if not len(found):
        return k, row, col
    centre = np.asarray(lesion.centroid[1:]) - (r0, c0)
    r, c = found[int(np.argmin(((found - centre) ** 2).sum(axis=1)))]
    return k, int(r) + r0, int(c) + c0
