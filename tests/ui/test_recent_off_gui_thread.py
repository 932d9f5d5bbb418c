"""File ▸ Open recent never stats on the GUI thread (issue 24, §3): a path on a network share that no longer answers
blocked the window as the menu opened. The menu is built from the list alone; entries are greyed when the
background answer comes."""

from __future__ import annotations

import os
import threading

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMenu

import app.ui.recent as recent_module
from app.ui.recent import RecentList, fill_menu

TIMEOUT = 20_000


def test_the_menu_is_built_before_a_blocking_stat_answers(qtbot, tmp_path, monkeypatch):
    here, dead, gone = tmp_path / "here", "/net/dead-share/scans", str(tmp_path / "gone")
    here.mkdir()
    recent = RecentList(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), "recent/inputs")
    for path in (gone, dead, here):
        recent.add(path)
    release, asked_on = threading.Event(), []
    real = os.path.exists

    def blocking_exists(path) -> bool:  # the dead share: answers only when the test lets it
        asked_on.append(threading.current_thread() is threading.main_thread())
        if str(path) == dead:
            release.wait(10)
            return False
        return real(path)

    monkeypatch.setattr(recent_module.os.path, "exists", blocking_exists)
    menu = QMenu()
    fill_menu(menu, recent, lambda _path: None)  # before: os.path.exists on each entry, here, on the GUI thread
    assert not release.is_set() and True not in asked_on
    texts = {a.toolTip(): (a.text(), a.isEnabled()) for a in menu.actions() if a.toolTip()}
    assert texts[dead] == ("scans  —  /net/dead-share", True)  # not answered yet: shown as it is, no wait
    qtbot.waitUntil(lambda: menu.actions()[2].text().endswith("(missing)"), timeout=TIMEOUT)  # `gone`
    assert menu.actions()[0].isEnabled() and not menu.actions()[2].isEnabled()
    remove = next(a for a in menu.actions() if a.text() == "Remove missing entries")
    assert remove.isEnabled()
    release.set()
    qtbot.waitUntil(lambda: not menu.actions()[1].isEnabled(), timeout=TIMEOUT)
    assert menu.actions()[1].text() == "scans  —  /net/dead-share  (missing)"
    assert asked_on and True not in asked_on
    remove.trigger()  # removes what the answers said is gone, without a stat of its own
    assert recent.items() == [str(here)]
