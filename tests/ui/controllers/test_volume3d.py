"""The 3D model's controller (app/ui/controllers/volume3d.py) driven with fakes of the worker, the volume view, the
loader, the panel, the viewer, the file list, the status bar, the canvas's progress banner and the slice preview
(no window, no thread, no model): when it asks for the run and when not, what the run's progress and end show,
when a slice is shown without a result, Cancel, another model, and the lesion list's rows moving the crosshair or
the slice."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
from PySide6.QtCore import Signal

from app.inference.decide.lesions import Lesion
from app.ui.controllers.volume3d import Volume3D, on_lesion
from app.ui.state.messages import FillRequest, ModelSummary, ViewKey, VolumeCount, VolumeCountFailed, VolumeProgress
from ui.controllers.fakes import Fake, FakeFiles, FakeSidePanel, FakeStatus, FakeViewer, ready_state

CT, PHOTO = "data/ct.nii.gz", "data/photo.png"
SERIES = "data/ct3d/1.2.826.0.1.3680043.8.498.2450617965819701885"  # a DICOM series: <folder>/<SeriesInstanceUID>
SERIES_LABEL = "CT · SegLens demo · Synthetic chest CT (60 slices)"  # as the file list names it
VOLUME = SimpleNamespace(spacing=(2.0, 0.8, 0.7), depth=12)
LESION = Lesion(label=1, index=1, voxels=30, ml=0.03, bbox=((3, 6), (8, 12), (9, 13)), centroid=(4.2, 10.4, 10.6))


class FakeWorker(Fake):
    volume_progress = Signal(object)
    volume_counted = Signal(object)
    volume_count_failed = Signal(object)

    def fill_volume(self, request) -> None:
        self.record("fill_volume", request)

    def want_volume(self, path) -> None:
        self.record("want_volume", path)


class FakeVolumes(Fake):
    showing = Signal(object, int)

    def __init__(self) -> None:
        super().__init__()
        self.planes = None


class FakePlanes(Fake):
    def __init__(self, visible: bool) -> None:
        super().__init__()
        self.visible = visible

    def isVisible(self) -> bool:
        return self.visible

    def set_point(self, k: int, row: int, col: int) -> None:
        self.record("set_point", k, row, col)


class FakeBanner(Fake):
    cancel_requested = Signal()
    rerun_requested = Signal()

    def show_progress(self, text: str) -> None:
        self.record("show_progress", text)

    def show_stopped(self, text: str) -> None:
        self.record("show_stopped", text)

    def hide(self) -> None:
        self.record("hide")


class FakePreview(Fake):
    def __init__(self) -> None:
        super().__init__()
        self.showing: str | None = None

    def ask(self, path: str, frame: int, volume) -> None:
        self.record("ask", path, frame)

    def forget(self) -> None:
        self.record("forget")

    def shows(self, path: str) -> bool:
        return path == self.showing


class FakeLoader(Fake):
    load_requested = Signal(object)


class FakeLesionList(Fake):
    chosen = Signal(object)

    def set_lesions(self, lesions, *, classes, spacing, connectivity) -> None:
        self.record("set_lesions", tuple(lesions), spacing, connectivity)

    def set_unavailable(self, why: str) -> None:
        self.record("set_unavailable", why)


class FakePanel(FakeSidePanel):
    def __init__(self) -> None:
        super().__init__()
        self.group = FakeLesionList()

    def lesion_list(self):
        return self.group

    def hide_lesions(self) -> None:
        self.record("hide_lesions")

    def reveal(self, group) -> None:
        self.record("reveal", group)


class Status(FakeStatus):
    run_shown = False  # no Run on all holds the progress bar


class VolumeFiles(FakeFiles):
    def volume(self, path):
        return VOLUME if path in (CT, SERIES) else None

    def name_of(self, path: str) -> str:
        return SERIES_LABEL if path == SERIES else Path(path).name


def spec(is_3d: bool = True):
    return SimpleNamespace(is_3d=is_3d, path=Path("blob3d.onnx"), classes=("background", "lesion"),
                           task="segmentation")


def make(*, is_3d: bool = True, current: str = CT):
    state = ready_state(spec(is_3d))
    files = VolumeFiles([CT, PHOTO])
    files.current = current
    parts = SimpleNamespace(state=state, files=files, status=Status(), panel=FakePanel(), viewer=FakeViewer(),
                            worker=FakeWorker(), volumes=FakeVolumes(), loader=FakeLoader(), shown=[],
                            banner=FakeBanner(), preview=FakePreview())
    parts.controller = Volume3D(state, files=files, status=parts.status, panel=parts.panel, viewer=parts.viewer,
                                worker=parts.worker, volumes=parts.volumes, loader=parts.loader,
                                show_slice=lambda path, k: parts.shown.append((path, k)), banner=parts.banner,
                                preview=parts.preview)
    return parts


def test_a_volume_shown_with_a_3d_model_asks_for_its_run_once_per_model():
    p = make()
    p.volumes.showing.emit(CT, 0)
    p.volumes.showing.emit(CT, 1)  # the next slice: the run is asked for already
    assert p.worker.called("want_volume") == [(CT,), (CT,)]
    assert p.worker.called("fill_volume") == [(FillRequest(CT, VOLUME, None),)]
    assert p.preview.called("ask") == [(CT, 0), (CT, 1)]  # each slice as a picture alone until the result comes
    p.loader.load_requested.emit(object())  # another model: the run stops, the next one is asked for afresh
    assert p.worker.called("want_volume")[-1] == (None,)
    generation = p.state.begin_model()
    p.state.model_ready(generation, ModelSummary(spec=spec(), info=None, generation=generation))
    p.volumes.showing.emit(CT, 0)
    assert len(p.worker.called("fill_volume")) == 2


def test_a_volume_whose_result_is_kept_is_asked_again_but_gets_no_preview():
    p = make()
    p.volumes.showing.emit(CT, 0)
    p.worker.volume_progress.emit(VolumeProgress(CT, "done", 45, 45, seconds=2.5))
    p.volumes.showing.emit(PHOTO, 0)
    p.volumes.showing.emit(CT, 3)  # back: the worker answers from the result it keeps, at once
    assert len(p.worker.called("fill_volume")) == 2 and p.preview.called("ask") == [(CT, 0)]


def test_a_plain_image_or_a_2d_model_asks_for_no_run():
    p = make()
    p.volumes.showing.emit(PHOTO, 0)  # its own request says the one line
    q = make(is_3d=False)
    q.volumes.showing.emit(CT, 0)  # the 2D model's whole-volume count is the volume view's
    for parts in (p, q):
        assert parts.worker.called("want_volume") == [(None,)] and not parts.worker.called("fill_volume")
        assert not parts.preview.called("ask")


def test_progress_clears_the_picture_before_it_and_counts_slices_then_patches():
    p = make()
    p.state.wanted = ViewKey(CT, 2)
    p.volumes.showing.emit(CT, 2)
    p.worker.volume_progress.emit(VolumeProgress(CT, "reading", 6, 12))
    p.worker.volume_progress.emit(VolumeProgress(CT, "patches", 3, 45))
    assert p.viewer.names() == ["clear"] and p.controller.running == CT  # another file's picture goes…
    assert p.preview.called("ask") == [(CT, 2), (CT, 2)]  # … for this slice's, without a result
    assert p.banner.called("show_progress") == [("3D model: reading slice 6 / 12",), ("3D model: patch 3 / 45",)]
    assert p.status.called("start_run") == [(12,), (45,)] and p.status.called("run_progress") == [(6,), (3,)]
    assert p.status.messages[-1] == "ct.nii.gz: 3D model, patch 3 of 45 (Cancel stops it)"
    assert p.panel.called("show_busy")[-1] == ("Running the 3D model over the whole volume: patch 3 of 45",)
    p.worker.volume_progress.emit(VolumeProgress(CT, "done", 45, 45, seconds=2.5))
    assert p.status.names()[-2:] == ["end_run", "showMessage"] and p.controller.running is None
    assert p.status.messages[-1].startswith("ct.nii.gz: 3D model over the whole volume, 45 patches in 2.5 s")
    assert p.banner.names()[-1] == "hide"


def test_the_preview_on_screen_stays_when_the_run_starts():
    p = make()
    p.preview.showing = CT
    p.volumes.showing.emit(CT, 0)
    p.worker.volume_progress.emit(VolumeProgress(CT, "patches", 3, 45))
    assert not p.viewer.calls and p.preview.called("ask") == [(CT, 0)]


def test_a_run_the_reader_left_shows_no_progress():
    p = make(current=PHOTO)
    p.worker.volume_progress.emit(VolumeProgress(CT, "patches", 3, 45))
    assert not p.status.calls and not p.viewer.calls and not p.banner.calls


def test_cancel_stops_the_run_keeps_the_slices_and_keeps_it_stopped_until_the_reader_leaves():
    p = make()
    p.volumes.showing.emit(CT, 0)
    p.preview.showing = CT  # its slice is on the canvas, without a result
    p.worker.volume_progress.emit(VolumeProgress(CT, "patches", 3, 45))
    p.banner.cancel_requested.emit()  # the canvas's Cancel (the status bar's does the same)
    assert p.worker.called("want_volume")[-1] == (None,)
    p.worker.volume_progress.emit(VolumeProgress(CT, "stopped"))
    assert not p.viewer.calls and p.files.statuses[CT] == "pending"  # the image stays
    assert p.state.on_screen is None and "end_run" in p.status.names()
    assert p.banner.names()[-2:] == ["hide", "show_stopped"]  # the progress goes, Run again comes
    assert p.status.messages[-1] == ("ct.nii.gz: the 3D model's run was cancelled: its slices are shown without a "
                                     "result (Run again, under the image, runs it)")
    assert p.banner.called("show_stopped") == [("3D model: cancelled",)]
    assert p.panel.called("show_busy")[-1] == ("No result: the 3D model's run over this volume was cancelled",)
    p.volumes.showing.emit(CT, 5)  # a slice step: still cancelled, the slice shown as a picture
    assert len(p.worker.called("fill_volume")) == 1 and p.worker.called("want_volume")[-1] == (None,)
    assert p.preview.called("ask")[-1] == (CT, 5)
    p.volumes.showing.emit(PHOTO, 0)
    p.volumes.showing.emit(CT, 0)  # back to it: run again
    assert len(p.worker.called("fill_volume")) == 2 and p.worker.called("want_volume")[-1] == (CT,)


def test_run_again_after_a_cancel_runs_the_volume_shown_once_more():
    """One volume open: there is no other file to leave it for, so the canvas offers Run again."""
    p = make()
    p.volumes.showing.emit(CT, 0)
    p.worker.volume_progress.emit(VolumeProgress(CT, "patches", 3, 45))
    p.banner.cancel_requested.emit()
    p.worker.volume_progress.emit(VolumeProgress(CT, "stopped"))
    p.state.wanted = ViewKey(CT, 4)
    p.banner.rerun_requested.emit()  # the slice shown is asked for again, as a slice step: the run first
    assert p.shown == [(CT, 4)] and p.banner.names()[-1] == "hide"
    p.volumes.showing.emit(CT, 4)  # what the window's show does
    assert len(p.worker.called("fill_volume")) == 2 and p.worker.called("want_volume")[-1] == (CT,)
    p.worker.volume_progress.emit(VolumeProgress(CT, "patches", 1, 45))  # its progress shows again
    assert p.banner.called("show_progress")[-1] == ("3D model: patch 1 / 45",)


def test_the_cancelled_note_leaves_with_the_volume():
    p = make()
    p.volumes.showing.emit(CT, 0)
    p.worker.volume_progress.emit(VolumeProgress(CT, "patches", 3, 45))
    p.banner.cancel_requested.emit()
    p.worker.volume_progress.emit(VolumeProgress(CT, "stopped"))
    p.volumes.showing.emit(PHOTO, 0)
    assert p.banner.names()[-1] == "hide"
    p.banner.rerun_requested.emit()  # nothing cancelled is shown: nothing to run
    assert len(p.worker.called("fill_volume")) == 1 and not p.shown


def test_a_series_is_named_as_the_file_list_names_it_never_by_its_uid():
    p = make(current=SERIES)
    p.volumes.showing.emit(SERIES, 0)
    p.worker.volume_progress.emit(VolumeProgress(SERIES, "patches", 3, 45))
    p.controller.cancel()
    p.worker.volume_progress.emit(VolumeProgress(SERIES, "stopped"))
    q = make(current=SERIES)
    q.volumes.showing.emit(SERIES, 0)
    q.worker.volume_progress.emit(VolumeProgress(SERIES, "done", 45, 45, seconds=2.5))
    messages = p.status.messages + q.status.messages
    assert len(messages) == 4 and all(SERIES_LABEL in text and "1.2.826" not in text for text in messages), messages


def test_a_refused_run_is_one_line():
    p = make()
    p.volumes.showing.emit(CT, 0)
    p.worker.volume_count_failed.emit(VolumeCountFailed(CT, "ct.nii.gz: the 3D model needs about 9 GB …"))
    assert p.status.messages == ["Error: ct.nii.gz: the 3D model needs about 9 GB …"]


def count(lesions=(LESION,), labels=None, why=""):
    return VolumeCount(CT, 12, 12, np.zeros(256, np.int64), labels=labels, lesions=lesions, lesions_why=why)


def test_the_lesion_list_shows_the_volumes_components_and_a_row_goes_there():
    p = make()
    labels = np.zeros((12, 16, 16), np.uint8)
    labels[4, 10, 11] = 1
    p.worker.volume_counted.emit(VolumeCount(CT, 5, 12, np.zeros(256, np.int64)))  # counting: nothing yet
    assert not p.panel.group.calls
    p.worker.volume_counted.emit(count(labels=labels))
    p.worker.volume_counted.emit(count(labels=labels))  # the next slice shown counts again: the list stays
    assert p.panel.group.called("set_lesions") == [((LESION,), VOLUME.spacing, 26)]
    assert p.panel.called("reveal") == [(p.panel.group,)]
    p.panel.group.chosen.emit(LESION)  # one pane: the slice through its centre
    assert p.shown == [(CT, 4)]
    p.volumes.planes = FakePlanes(visible=True)
    p.panel.group.chosen.emit(LESION)  # three planes: the crosshair, on the lesion's voxel nearest its centroid
    assert p.volumes.planes.called("set_point") == [(4, 10, 11)] and p.shown == [(CT, 4)]
    p.worker.volume_counted.emit(count(lesions=None, why="a 4D NIfTI of 2 time points: …"))
    assert p.panel.group.called("set_unavailable") == [("a 4D NIfTI of 2 time points: …",)]
    p.volumes.showing.emit(PHOTO, 0)
    assert p.panel.called("hide_lesions")


def test_a_rings_crosshair_lands_on_the_ring_not_in_its_hole():
    labels = np.zeros((3, 9, 9), np.uint8)
    yy, xx = np.mgrid[:9, :9]
    labels[1][(abs(np.hypot(yy - 4, xx - 4) - 3) < 0.6)] = 2
    ring = Lesion(label=2, index=1, voxels=int(labels.sum() // 2), ml=None, bbox=((1, 2), (1, 8), (1, 8)),
                  centroid=(1.0, 4.0, 4.0))
    k, row, col = on_lesion(ring, labels)
    assert k == 1 and labels[k, row, col] == 2 and abs(np.hypot(row - 4, col - 4) - 3) < 0.6
    assert on_lesion(ring, None) == (1, 4, 4)
