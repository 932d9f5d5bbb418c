"""Hand-written fakes of what the controllers talk to: each has the signals the controller listens to and the intent
methods it calls, and records those calls (`calls`, `called(name)`), so a test asserts what a controller asked the
widgets to show and the worker to do. No window, no thread, no model run; the state is the real ViewState."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal

from app.inference.image.pipeline import Result
from app.ui.state.messages import ModelSummary, ViewKey, ViewResult
from app.ui.state.view_state import ViewState


class Fake(QObject):
    """Records each intent called on it as (name, *args)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def record(self, name: str, *args) -> None:
        self.calls.append((name, *args))

    def called(self, name: str) -> list[tuple]:
        """The arguments of each call of `name`, in order."""
        return [call[1:] for call in self.calls if call[0] == name]

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]


class FakeViewer(Fake):
    """ImageViewer's face: the picture, the overlay, the split, the detail tiles and edit mode."""

    window_dragged = Signal(float, float)
    edit_pressed = Signal(float, float, object)
    edit_moved = Signal(float, float)
    edit_released = Signal()
    edit_right_pressed = Signal(float, float)
    brush_wheel = Signal(int)
    slice_wheel = Signal(int)

    def set_image(self, image, full_size) -> None:
        self.record("set_image", full_size)

    def replace_image(self, image) -> None:
        self.record("replace_image", image)

    def set_overlay(self, image, outline=None) -> None:
        self.record("set_overlay", image, outline)

    def clear_overlay(self) -> None:
        self.record("clear_overlay")

    def clear(self) -> None:
        self.record("clear")

    def set_notice(self, text: str, *, failed: bool = False) -> None:
        self.record("set_notice", text, failed)

    def set_overlay_opacity(self, opacity: float) -> None:
        self.record("set_overlay_opacity", opacity)

    def set_overlay_visible(self, visible: bool) -> None:
        self.record("set_overlay_visible", visible)

    def set_split(self, mode, overlay_b=None, names=("", "")) -> None:
        self.record("set_split", mode, overlay_b, names)

    def set_detail(self, pixels, mask, overview_scale: float, table=None) -> None:
        self.record("set_detail", pixels, mask, overview_scale)

    def set_editing(self, radius) -> None:
        self.record("set_editing", radius)

    def set_brush_radius(self, radius: int) -> None:
        self.record("set_brush_radius", radius)


class FakeSidePanel(Fake):
    """SidePanel's face for the presenter: counts, verdict, comparison, the image's facts, the busy line."""

    def clear_result(self) -> None:
        self.record("clear_result")

    def show_busy(self, text) -> None:
        self.record("show_busy", text)

    def show_misfit(self, reasons) -> None:
        self.record("show_misfit", tuple(reasons))

    def show_result(self, result, counts=None) -> None:
        self.record("show_result", result)

    def show_verdict(self, judgement) -> None:
        self.record("show_verdict", judgement)

    def show_comparison(self, scored, class_names, agreement=None, error_b: str = "") -> None:
        self.record("show_comparison", scored, list(class_names), agreement, error_b)

    def show_image_info(self, info, window, frame: int, frames: int) -> None:
        self.record("show_image_info", info, window, frame, frames)


class FakeStatus(Fake):
    """StatusBar's face: messages (`messages`: their texts), a run's progress, the picture's facts."""

    cancel_requested = Signal()

    @property
    def messages(self) -> list[str]:
        return [text for text, *_ in self.called("showMessage")]

    def showMessage(self, text: str, timeout: int | None = 0, *, folder=None) -> None:
        self.record("showMessage", text, timeout, folder)

    def start_run(self, total: int) -> None:
        self.record("start_run", total)

    def run_progress(self, done: int) -> None:
        self.record("run_progress", done)

    def end_run(self) -> None:
        self.record("end_run")

    def show_timings(self, timings: dict) -> None:
        self.record("show_timings", timings)

    def show_image_size(self, width: int, height: int, window=None) -> None:
        self.record("show_image_size", width, height, window)


class FakeFiles(Fake):
    """FileList's face: the listed paths under one root, the current one, and what each row shows."""

    current_path_changed = Signal(object)

    def __init__(self, paths: list[str] = (), *, root: Path = Path("data")) -> None:
        super().__init__()
        self._paths = list(paths)
        self.root = root
        self.current: str | None = self._paths[0] if self._paths else None
        self.shown_paths: list[str] | None = None  # the filter's rows; None: all
        self.statuses: dict[str, str] = {}  # path -> the row's status dot ("running", "done", …)
        self.listed: list = []  # the InputFiles set_inputs was given

    def paths(self) -> list[str]:
        return list(self._paths)

    def visible_paths(self) -> list[str]:
        return list(self._paths if self.shown_paths is None else self.shown_paths)

    def current_path(self) -> str | None:
        return self.current

    def root_and_rel(self, path: str) -> tuple[Path, str]:
        return self.root, Path(path).relative_to(self.root).as_posix()

    def volume(self, path):
        return None

    def name_of(self, path: str, *, whole: bool = False) -> str:
        return Path(path).name

    def select_path(self, path: str) -> None:
        self.record("select_path", path)
        self.current = path
        self.current_path_changed.emit(path)

    def set_review(self, path: str, state: str) -> None:
        self.record("set_review", path, state)

    def set_status(self, path: str, status: str, message: str = "") -> None:
        self.record("set_status", path, status, message)
        self.statuses[path] = status

    def status(self, path: str) -> str | None:
        return self.statuses.get(path)

    def set_inputs(self, inputs: list) -> None:
        self.record("set_inputs", [str(item.path) for item in inputs])
        self.listed = list(inputs)
        self._paths = [str(item.path) for item in inputs]

    def inputs(self) -> list:
        return list(self.listed)

    def setCurrentRow(self, row: int) -> None:
        self.record("setCurrentRow", row)

    def set_verdict(self, path: str, verdict, *, stale: bool = False) -> None:
        self.record("set_verdict", path, verdict, stale)


class FakePresenter(Fake):
    """The Presenter's face for the controllers that hand it views."""

    def display(self, view) -> None:
        self.record("display", view)

    def update_decision(self, view) -> None:
        self.record("update_decision", view)

    def edit_overlay(self, overlay) -> None:
        self.record("edit_overlay", overlay)

    def repaint_overlay(self) -> None:
        self.record("repaint_overlay")

    def failed(self, failed) -> None:
        self.record("failed", failed.message)

    def waiting(self, retrying) -> None:
        self.record("waiting", retrying.line)

    def model_switching(self, text: str) -> None:
        self.record("model_switching", text)


def ready_state(spec, *, sha256: str = "") -> ViewState:
    """A ViewState with `spec`'s model loaded (generation 1)."""
    state = ViewState()
    generation = state.begin_model()
    assert state.model_ready(generation, ModelSummary(spec=spec, info=None, sha256=sha256, generation=generation))
    return state


def seg_view(path: str = "data/a.png", *, generation: int = 1, request_id: int = 0, mask=None,
             judgement=None, window=None, raw=None, tuning=None) -> ViewResult:
    """A segmentation ViewResult of a 4 × 6 picture whose mask has a 2 × 2 square of class 1."""
    if mask is None:
        mask = np.zeros((4, 6), np.uint8)
        mask[1:3, 2:4] = 1
    result = Result(path=Path(path), task="segmentation", image_hw=mask.shape, labels=mask, predictions=(),
                    timings={"inference": 1.5}, provider="CPU")
    extra = {"tuning": tuning} if tuning is not None else {}
    return ViewResult(ViewKey(path), result, display_pixels=np.zeros((*mask.shape, 3), np.uint8), display_mask=mask,
                      display_scale=1.0, display_raw=raw, window=window, generation=generation,
                      judgement=judgement, request_id=request_id, **extra)


def on_screen(state: ViewState, view: ViewResult) -> ViewResult:
    """`view` wanted, shown and on screen, as the Presenter leaves the state once it displayed it."""
    state.select(view.key)
    state.show(view)
    state.on_screen = view
    return view
