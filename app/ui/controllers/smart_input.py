"""What the Smart tool reads from the reader: the picture as shown (its PromptKey and pixels), a pressed box's
pixel edges, and its keys (Enter, Shift+Enter, Esc, Backspace, Alt+PgUp / Alt+PgDn) on the window."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from PySide6.QtWidgets import QWidget

    from app.ui.controllers.smart import Smart
    from app.ui.state.messages import ViewResult
    from app.ui.state.prompt_messages import PrefetchImage, PromptImage, ProposalReady
    from app.ui.widgets.file_list import FileList


def shown_image(view: ViewResult, window: tuple[float, float] | None) -> PromptImage:
    """The picture as the reader sees it now: its key (path, frame, the display window of real values) and pixels."""
    from app.ui.state.prompt_messages import PromptImage, PromptKey

    window = window if view.high_range else None
    return PromptImage(PromptKey(str(view.path), view.frame, window), view.display_pixels, view.display_raw,
                       view.invert)


def box_edges(ax: float, ay: float, bx: float, by: float) -> tuple[float, float, float, float]:
    """The pixels between two pressed pixels (centres at whole numbers), as edges x0 ≤ x < x1."""
    x0, x1 = sorted((round(ax), round(bx)))
    y0, y1 = sorted((round(ay), round(by)))
    return float(x0), float(y0), float(x1 + 1), float(y1 + 1)


def key_actions(smart: Smart, keys: QWidget) -> list:
    """Enter / Shift+Enter / Esc / Backspace (and Alt+PgUp / Alt+PgDn: propagate) on the window, enabled only while
    they have something to do: the keys stay the other widgets' otherwise (no shortcut of the menus uses them)."""
    from PySide6.QtGui import QAction, QKeySequence

    made = []
    for name, slot, shortcuts in (
            ("smart-accept", lambda: smart.accept(), ("Return", "Enter")),
            ("smart-replace", lambda: smart.accept(replace=True), ("Shift+Return", "Shift+Enter")),
            ("smart-discard", smart.discard, ("Escape",)),
            ("smart-undo-point", smart.remove_last_point, ("Backspace",)),
            ("smart-propagate-up", lambda: smart.propagate(-1), ("Alt+PgUp",)),
            ("smart-propagate-down", lambda: smart.propagate(1), ("Alt+PgDown",))):
        action = QAction(name, keys)
        action.setObjectName(name)
        action.setShortcuts([QKeySequence(k) for k in shortcuts])
        action.triggered.connect(lambda _checked=False, slot=slot: slot())
        action.setEnabled(False)
        keys.addAction(action)
        made.append(action)
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if isinstance(app, QApplication):  # a bound method: disconnected when the Smart tool goes
        app.focusChanged.connect(smart.enable_keys)
    return made


def typing() -> bool:
    """Whether the keyboard focus is in a text field (the review note, the file filter, a spin box)."""
    from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QLineEdit, QPlainTextEdit, QTextEdit

    return isinstance(QApplication.focusWidget(), QLineEdit | QTextEdit | QPlainTextEdit | QAbstractSpinBox)


def enable_actions(actions: list, *, prompting: bool, running: bool, can_propagate: bool) -> None:
    """The keys work only while they have something to do, and never while the reader types (Enter keeps a review
    note): the other widgets keep them otherwise."""
    typed = typing()
    for action in actions:
        name = action.objectName()
        action.setEnabled(not typed and (can_propagate if name.startswith("smart-propagate") else
                                         prompting or (running and name == "smart-discard")))


def neighbours(view: ViewResult, volume: Any, window: tuple[float, float] | None, files: FileList | None, *,
               files_ahead: int) -> tuple[PrefetchImage, ...]:
    """What to encode ahead: the next and previous slice of a volume (through the reader's window), else the next
    listed files (their own window: they are shown first through it)."""
    from app.ui.state.prompt_messages import PrefetchImage

    if volume is not None:
        window = window if view.high_range else None
        return tuple(PrefetchImage(str(view.path), k, volume, window, own_window=False)
                     for k in (view.frame + 1, view.frame - 1) if 0 <= k < volume.depth)
    if files is None:
        return ()
    paths = files.visible_paths()
    here = paths.index(str(view.path)) if str(view.path) in paths else len(paths)
    after = [p for p in paths[here + 1:] if files.volume(p) is None]
    return tuple(PrefetchImage(p) for p in after[:files_ahead])


def prompt_device(model: Any) -> str:
    """Where the prompt model runs: on the GPU the window's model really runs on, else on the CPU."""
    info = model.info if model is not None else None
    if info is not None and info.on_gpu:
        return "cuda" if info.device_id is None else f"cuda:{info.device_id}"
    return "cpu"


def held(accepted: ProposalReady | None, label: int, mask: np.ndarray | None) -> ProposalReady | None:
    """`accepted` while `mask` still holds it in `label` (most of its pixels: touched up with the brush it is still
    the object; undone, it is not), else None."""
    if accepted is None or mask is None:
        return None
    area = int(accepted.mask.sum())
    return accepted if not area or int((mask[accepted.mask] == label).sum()) * 2 >= area else None
