"""File ▸ Open recent and Model ▸ Recent models: the last folders, images and models opened (10 each), kept in the
viewer's QSettings so they survive restarts; a path that is gone is shown greyed, and can be cleared away."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMenu

MAX_RECENT = 10


class RecentList:
    """The most recent first, each path once, at most MAX_RECENT; read from and written to `settings[key]` at
    every use (two windows, or a restart, see the same list)."""

    def __init__(self, settings: QSettings, key: str, *, writable: Callable[[], bool] = lambda: True) -> None:
        """`writable()` False: nothing is recorded (the self-test must not change the reader's lists)."""
        self.settings, self.key, self.writable = settings, key, writable

    def items(self) -> list[str]:
        value = self.settings.value(self.key, [], list)
        return [str(v) for v in value if str(v)][:MAX_RECENT]

    def add(self, path: str | Path) -> None:
        text = os.path.abspath(str(path))
        self._save([text, *(p for p in self.items() if p != text)])

    def remove_missing(self) -> None:
        self._save([p for p in self.items() if os.path.exists(p)])

    def clear(self) -> None:
        self._save([])

    def _save(self, paths: list[str]) -> None:
        if not self.writable():
            return
        self.settings.setValue(self.key, paths[:MAX_RECENT])
        self.settings.sync()


def fill_menu(menu: QMenu, recent: RecentList, open_path: Callable[[str], None]) -> None:
    """The menu's entries as the list stands now (called as the menu opens): a missing path greyed, then
    "Remove missing entries" and "Clear list"."""
    menu.clear()
    paths = recent.items()
    if not paths:
        menu.addAction("(none yet)").setEnabled(False)
        return
    missing = 0
    for path in paths:
        there = os.path.exists(path)
        action = menu.addAction(_label(path) + ("" if there else "  (missing)"))
        action.setToolTip(path)
        action.setEnabled(there)
        action.triggered.connect(lambda _checked=False, p=path: open_path(p))
        missing += not there
    menu.addSeparator()
    menu.addAction("Remove missing entries", recent.remove_missing).setEnabled(missing > 0)
    menu.addAction("Clear list", recent.clear)


def _label(path: str) -> str:
    """`name — parent folder`: the name first (what the reader recognises), the folder to tell two apart."""
    p = Path(path)
    return f"{p.name or path}  —  {p.parent}" if p.name else path
