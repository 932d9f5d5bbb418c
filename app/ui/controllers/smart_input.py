"""What the Smart tool reads from the reader: the picture as shown (its PromptKey and pixels), a pressed box's
pixel edges, and its keys (Enter, Shift+Enter, Esc, Backspace, Alt+PgUp / Alt+PgDn) on the window."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from app.ui.controllers.smart import Smart
    from app.ui.state.messages import ViewResult
    from app.ui.state.prompt_messages import PromptImage


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
