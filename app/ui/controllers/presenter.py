"""The Presenter puts pictures on screen: pixels (the worker's, or windowed on the display thread), the overlay in
the current style, the legend or top-k, the image's facts and the timings.

It asks the ViewState what to do and drives the widgets through their intents. No pixel maths here either: window
and level go to the display thread as WindowRequests; masks become QImages once, in overlay.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QObject, Signal

from app.ui.state.view_state import DisplayMode

if TYPE_CHECKING:
    from PySide6.QtGui import QImage

    from app.ui.state.messages import (
        BarePicture,
        ViewFailed,
        ViewResult,
        Window,
        WindowedImage,
        WindowFailed,
        WindowRequest,
    )
    from app.ui.state.remote_messages import RemoteRetrying
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.overlay import DifferenceImage, HeatmapImage, OverlayImage
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.status import StatusBar
    from app.ui.widgets.viewer import ImageViewer


class Presenter(QObject):
    overlay_shown = Signal(object)  # path (str), once its overlay (or top-k) is on screen
    window_shown = Signal(object)  # (center, width): pixels through this display window are on screen
    window_requested = Signal(object)  # messages.WindowRequest, for the display thread
    decision_shown = Signal(object)  # ViewResult whose overlay, counts and verdict were just put on screen

    def __init__(self, state: ViewState, *, viewer: ImageViewer, panel: SidePanel, status: StatusBar,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._viewer = viewer
        self._panel = panel
        self._status = status
        self._overlay: OverlayImage | None = None  # the mask on screen (widgets/overlay: numpy, loaded late)
        self._heat: HeatmapImage | DifferenceImage | None = None  # the probability/uncertainty/difference layer
        self._editing: OverlayImage | None = None  # the mask being edited (edit mode), shown filled
        self._overlay_b: OverlayImage | None = None  # model B's mask (comparing two models)
        self._joint = False  # the layer on screen is the disagreement of A and B
        self.split: str | None = None  # the split view: None, "raw" (raw | overlay) or "ab" (model A | model B)
        self._model_b = ""  # model B's file name (comparing two models), for its side of the A ◀▶ B split

    # -- pictures --------------------------------------------------------------------------------------

    def display(self, view: ViewResult) -> None:
        """Show `view`: at once with the worker's pixels, or once the display thread has windowed them."""
        self._state.show(view)
        request = self._state.first_window_request()
        if request is not None:
            self.window_requested.emit(request)  # put on screen when its pixels come back (on_windowed)
            return
        from app.ui.widgets.overlay import image_to_qimage  # numpy: loaded after the window shows

        self._present(view, image_to_qimage(view.display_pixels), view.window)

    def failed(self, failed: ViewFailed) -> None:
        """The picture wanted failed: its own pixels when they were read (else an empty canvas), what failed and
        what to do over them and in the status bar, no result."""
        on_screen = self._state.on_screen  # a retune of the picture on screen failed: its pixels stay
        self._without_result(failed.picture, keep=on_screen is not None and on_screen.key.path == failed.path)
        self._viewer.set_notice(_on_canvas(failed.path, failed.message), failed=True)
        self._status.showMessage(f"Error: {_in_status(failed.path, failed.message)}", 15000)
        self._panel.show_busy(None)

    def waiting(self, retrying: RemoteRetrying) -> None:
        """The picture wanted waits on a server being tried again: its pixels, never the previous picture's result,
        and the retry line over them until its result (or failure) comes."""
        if retrying.picture is None:
            return
        self._without_result(retrying.picture)
        self._viewer.set_notice(_on_canvas(retrying.picture.key.path, retrying.line))

    def _without_result(self, picture: BarePicture | None, *, keep: bool = False) -> None:
        """`picture`'s pixels on the canvas (None: the pixels there when `keep`, else none), with no overlay, split,
        detail tiles, counts or verdict of whatever was shown before."""
        self._state.clear_screen()
        self._overlay = self._overlay_b = self._heat = None  # a class toggle must not paint the old mask over it
        self._panel.clear_result()
        if picture is None and not keep:
            self._viewer.clear()
            return
        self._viewer.set_detail(None, None, 1.0)
        self._viewer.set_split(None)
        if picture is None:
            self._viewer.clear_overlay()
            return
        from app.ui.widgets.overlay import image_to_qimage  # numpy: loaded after the window shows

        height, width = picture.image_hw
        self._viewer.set_image(image_to_qimage(picture.pixels), (width, height))

    def model_switching(self, text: str) -> None:
        """Another model was asked for: the old model's overlay, counts and verdict leave the screen (the picture
        stays) and the panel says `text` until the new model's result is shown."""
        self._overlay = self._overlay_b = self._heat = None
        self._viewer.clear_overlay()
        self._viewer.set_notice("")  # the old model's failure
        self._viewer.set_split(None)
        self._viewer.set_detail(None, None, 1.0)  # a big image's full-resolution tiles carry the old mask too
        self._panel.clear_result()
        self._panel.show_busy(text)

    def _present(self, view: ViewResult, image: QImage, window: Window | None) -> None:

        self._state.on_screen = view
        height, width = view.result.image_hw
        self._viewer.set_image(image, (width, height))
        self._show_facts(view, window)
        self._status.show_timings(view.result.timings)
        self._show_decision(view)
        self.overlay_shown.emit(str(view.path))

    def update_decision(self, view: ViewResult) -> None:
        """The picture on screen decided or drawn again (threshold, limit, layer): only the overlay, the counts
        and the verdict change; zoom, pan and pixels stay."""
        self._state.show(view)
        self._state.on_screen = view
        self._show_decision(view)

    def _show_decision(self, view: ViewResult) -> None:
        from app.ui.widgets.overlay import DifferenceImage, HeatmapImage, OverlayImage, disagreement_colors

        self._panel.show_busy(None)
        self._panel.show_misfit(view.result.warnings)
        self._viewer.set_notice("\n".join(f"⚠ {warning}" for warning in view.result.warnings))  # over the picture
        self._panel.show_result(view.result, view.class_counts)
        self._panel.show_verdict(view.judgement)
        classes = self._state.model.spec.classes if self._state.model else ()
        self._panel.show_comparison(view.scored, [info.name for info in classes], view.agreement, view.error_b)
        self._overlay = None if view.display_mask is None else OverlayImage(view.display_mask, classes)
        self._overlay_b = None if view.display_mask_b is None else OverlayImage(view.display_mask_b, classes)
        self._joint = view.tuning.layer == "disagreement"  # one picture of A and B: both sides of a split show it
        colors = disagreement_colors() if self._joint else None
        self._heat = HeatmapImage(view.display_levels) if view.display_levels is not None else \
            DifferenceImage(view.display_codes, *([colors] if colors else [])) \
            if view.display_codes is not None else None
        self.repaint_overlay()
        self.decision_shown.emit(view)  # an instance model's overlay and list (controllers/instances)

    def _show_facts(self, view: ViewResult, window: Window | None) -> None:
        window = window if view.high_range else None
        height, width = view.result.image_hw
        self._status.show_image_size(width, height, window)
        self._panel.show_image_info(view.info, window, view.frame, view.frame_count)

    # -- window / level --------------------------------------------------------------------------------

    def set_window(self, window: Window | None) -> None:
        self._window_work(self._state.set_window(window))

    def auto_window(self) -> None:
        self._window_work(self._state.auto_window())

    def drag_window(self, dx: float, dy: float) -> None:
        self._window_work(self._state.drag_window(dx, dy))

    def _window_work(self, request: WindowRequest | None) -> None:
        if request is not None:
            self.window_requested.emit(request)

    def on_windowed(self, windowed: WindowedImage) -> None:
        if not self._state.accept_windowed(windowed):
            return  # another picture's, or older than the pixels drawn
        view = cast("ViewResult", self._state.shown)  # accept_windowed: it is of the picture shown
        if self._state.on_screen is view:
            self._viewer.replace_image(windowed.image)  # keeps zoom, pan and overlay
            self._show_facts(view, windowed.window)
        elif self._state.wanted is not None and view.key != self._state.wanted:
            return  # the picture wanted failed or is still running: the one before it does not come back over it
        else:
            self._present(view, windowed.image, windowed.window)
        self.window_shown.emit(windowed.window)

    def on_window_failed(self, failed: WindowFailed) -> None:
        self._status.showMessage(f"Error: {failed.message}", 15000)

    # -- overlay style ---------------------------------------------------------------------------------

    def set_opacity(self, opacity: float) -> None:
        self._state.set_overlay(opacity=opacity)
        self._viewer.set_overlay_opacity(opacity)

    def set_overlay_visible(self, visible: bool) -> None:
        self._state.set_overlay(visible=visible)
        self._viewer.set_overlay_visible(visible)

    def restyle(self, **changes) -> None:
        """Change the display mode or the hidden classes: the kept overlay image gets a new colour table."""
        self._state.set_overlay(**changes)
        self.repaint_overlay()

    def _show_detail(self, split: str | None, contour: bool) -> None:
        """A big image's full-resolution tiles, when its overlay is the plain mask (filled, not split, not being
        edited); anything else shows at the overview copy's resolution."""
        view = self._state.on_screen
        plain = self._heat is None and not contour and split is None and self._editing is None
        if view is None or view.full_pixels is None or view.high_range or not plain:  # windowed: overview only
            self._viewer.set_detail(None, None, 1.0)
            return
        table = self._overlay.color_table(self._state.overlay.hidden) if self._overlay is not None else None
        self._viewer.set_detail(view.full_pixels, view.result.labels, view.display_scale, table)

    def set_model_b(self, summary) -> None:
        """Model B's ModelSummary (None: not comparing), whose name labels B's side of the split."""
        self._model_b = summary.spec.path.name if summary is not None else ""

    def set_split(self, mode: str | None) -> None:
        self.split = mode
        self.repaint_overlay()

    def edit_overlay(self, overlay) -> None:
        """Edit mode shows `overlay` (the mask being edited, filled) instead of the result's; None ends it."""
        self._editing = overlay
        if overlay is not None:
            self.repaint_overlay()

    def repaint_overlay(self) -> None:
        """The mask in its style; or the heatmap layer with, in contour style, the mask's outlines over it."""
        style = self._state.overlay
        contour = style.mode is DisplayMode.CONTOUR
        split_b = None
        if self.split == "ab" and self._overlay_b is not None and self._editing is None:
            # in the disagreement layer B's side shows the same codes, not B's mask: a class colour there was
            # read as the key's "only B" where both models agree
            split_b = self._heat.image() if self._joint and self._heat is not None else \
                self._overlay_b.image(hidden=style.hidden, contour=contour)
        mode = None if self._editing is not None or (self.split == "ab" and split_b is None) else self.split
        model = self._state.model.spec.path.name if self._state.model else ""
        names: dict[str | None, tuple[str, str]] = {
            "raw": ("raw image", "overlay"), "ab": (f"A · {model}", f"B · {self._model_b}")}
        self._viewer.set_split(mode, split_b, names.get(mode, ("", "")))
        self._show_detail(mode, contour)
        if self._editing is not None:
            self._viewer.set_overlay(self._editing.image(hidden=style.hidden))
        elif self._heat is not None:
            outline = self._overlay.image(hidden=style.hidden, contour=True) if contour and self._overlay else None
            self._viewer.set_overlay(self._heat.image(), outline)
        elif self._overlay is not None:
            self._viewer.set_overlay(self._overlay.image(hidden=style.hidden, contour=contour))


def _on_canvas(path: str, line: str) -> str:
    """A picture's failure or retry line as the canvas says it: the file's name, not its whole path."""
    from app.ui.widgets.file_list import short_name

    return f"{short_name(path)}: {line.removeprefix(f'{path}: ')}"


def _series_named(path: str, line: str) -> str:
    """A worker's line about the DICOM series `path` (`<folder>/<UID>: why`) with the series said by short_name;
    any other line as it is."""
    from pathlib import Path

    from app.ui.widgets.file_list import short_name

    short = short_name(path)
    return f"{short}{line[len(path):]}" if short != Path(path).name and line.startswith(f"{path}: ") else line


def _in_status(path: str, line: str) -> str:
    """A picture's failure as the status bar says it: a server given up on after its retries in few words (which
    picture, which server, what to do: the whole line is on the canvas); any other failure's line as it is, a
    series' path in it said short."""
    import re

    from app.ui.widgets.file_list import short_name

    gave_up = re.search(r"remote (?P<host>[^/\s]+)/\S+: .* \(tried (?P<tries>\d+) times\)(?: — (?P<advice>.+))?$", line)
    if gave_up is None:  # a series' path said short: its UID would fill the status bar
        return _series_named(path, line)
    advice = f" — {gave_up['advice']}" if gave_up["advice"] else ""
    return f"{short_name(path)}: no result from {gave_up['host']} after {gave_up['tries']} tries{advice}"
