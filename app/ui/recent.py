"""File ▸ Open recent and Model ▸ Recent models: the last folders, images and models opened (10 each), kept in the
viewer's QSettings so they survive restarts; a path that is gone is shown greyed, and can be cleared away.

Whether a path is still there is asked off the GUI thread (`ExistenceChecker`): a stat of a path on a network
share that no longer answers blocks for minutes, and the window froze as the menu opened. The menu is built at
once from the list alone; an entry is greyed when its answer comes (or at once, when an earlier answer said so).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QObject, Signal

from app.paths import setting_path, setting_text

if TYPE_CHECKING:
    from PySide6.QtCore import QSettings
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QMenu

    from app.ui.state.messages import PathChecked

MAX_RECENT = 10


class RecentList:
    """The most recent first, each path once, at most MAX_RECENT; read from and written to `settings[key]` at
    every use (two windows, or a restart, see the same list)."""

    def __init__(self, settings: QSettings, key: str, *, writable: Callable[[], bool] = lambda: True) -> None:
        """`writable()` False: nothing is recorded (the self-test must not change the reader's lists)."""
        self.settings, self.key, self.writable = settings, key, writable

    def items(self) -> list[str]:
        value = cast(list[object], self.settings.value(self.key, [], list))  # QSettings converts to a list
        return [setting_path(str(v)) for v in value if str(v)][:MAX_RECENT]

    def add(self, path: str | Path) -> None:
        text = os.path.abspath(str(path))
        self._save([text, *(p for p in self.items() if p != text)])

    def remove_missing(self) -> None:
        """Drop every path that is gone (stats each: not for the GUI thread, which uses `remove`)."""
        self._save([p for p in self.items() if os.path.exists(p)])

    def remove(self, paths: Iterable[str]) -> None:
        gone = set(paths)
        self._save([p for p in self.items() if p not in gone])

    def clear(self) -> None:
        self._save([])

    def _save(self, paths: list[str]) -> None:
        if not self.writable():
            return
        self.settings.setValue(self.key, [setting_text(p) for p in paths[:MAX_RECENT]])  # a QString drops bytes
        self.settings.sync()


class ExistenceChecker(QObject):
    """Whether paths exist, asked on short-lived threads (one per path, so one dead share does not hold up the
    others, and never two at once for one path); each answer comes back as `checked(PathChecked)` on the thread
    the checker lives on (the GUI's) and is remembered in `known`."""

    checked = Signal(object)  # messages.PathChecked (a str path through a QString would lose non-UTF-8 bytes)

    def __init__(self, parent: QObject | None = None, *, exists: Callable[[str], bool] | None = None) -> None:
        super().__init__(parent)
        self.known: dict[str, bool] = {}
        self.view: _MenuView | None = None  # the menu's latest entries, greyed as the answers come
        self._pending: set[str] = set()
        self._exists, self._lock = exists, threading.Lock()
        self.checked.connect(self._answered)

    def check(self, paths: Iterable[str]) -> None:
        with self._lock:
            todo = [p for p in paths if p not in self._pending]
            self._pending.update(todo)
        for path in todo:  # daemon: a stat that never returns must not keep the app from quitting
            threading.Thread(target=self._ask, args=(path,), name="seglens-recent-exists", daemon=True).start()

    def missing(self, paths: Iterable[str]) -> list[str]:
        """The paths an answer said are gone (unanswered ones are kept)."""
        return [p for p in paths if self.known.get(p) is False]

    def _ask(self, path: str) -> None:
        try:
            there = bool((self._exists or os.path.exists)(path))
        except Exception:  # an answer that cannot be had is no reason to grey the entry
            there = True
        with self._lock:
            self._pending.discard(path)
        with contextlib.suppress(RuntimeError):  # the menu (and this checker) went while the stat hung
            from app.ui.state.messages import PathChecked  # here: not a cost of the window's start-up

            self.checked.emit(PathChecked(path, there))  # queued to the checker's thread

    def _answered(self, answer: PathChecked) -> None:
        self.known[answer.path] = answer.exists
        if self.view is not None:
            self.view.show(answer.path)


def fill_menu(menu: QMenu, recent: RecentList, open_path: Callable[[str], object],
              checker: ExistenceChecker | None = None) -> None:
    """The menu's entries as the list stands now (called as the menu opens), built without touching the file
    system; each path's existence is then asked in the background (`checker`, by default one kept by the menu)
    and a missing one greyed when the answer comes. Then "Remove missing entries" and "Clear list"."""
    menu.clear()
    checker = checker or _checker_of(menu)
    checker.view = None  # the actions it held were deleted with the menu's entries
    paths = recent.items()
    if not paths:
        menu.addAction("(none yet)").setEnabled(False)
        return
    entries: dict[str, QAction] = {}
    for path in paths:
        action = menu.addAction(_label(path))
        action.setToolTip(path)
        action.triggered.connect(lambda _checked=False, p=path: open_path(p))
        entries[path] = action
    menu.addSeparator()
    remove = menu.addAction("Remove missing entries", lambda: recent.remove(checker.missing(paths)))
    menu.addAction("Clear list", recent.clear)
    checker.view = _MenuView(path_actions=entries, remove=remove, known=checker.known)  # earlier fills' are gone
    for path in paths:
        checker.view.show(path)
    checker.check(paths)


class _MenuView:
    """What one fill of the menu made: its entries by path, greyed or not as the answers say."""

    def __init__(self, *, path_actions: dict[str, QAction], remove: QAction, known: dict[str, bool]) -> None:
        self.path_actions, self.remove, self.known = path_actions, remove, known

    def show(self, path: str) -> None:
        action = self.path_actions.get(path)
        if action is None:
            return
        there = self.known.get(path, True)  # not answered yet: shown as there (it usually is)
        action.setText(_label(path) + ("" if there else "  (missing)"))
        action.setEnabled(there)
        self.remove.setEnabled(any(self.known.get(p) is False for p in self.path_actions))


def _checker_of(menu: QMenu) -> ExistenceChecker:
    checker = menu.findChild(ExistenceChecker)
    return checker if checker is not None else ExistenceChecker(menu)


def _label(path: str) -> str:
    """`name — parent folder`: the name first (what the reader recognises), the folder to tell two apart."""
    p = Path(path)
    return f"{p.name or path}  —  {p.parent}" if p.name else path
