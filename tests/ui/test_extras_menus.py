"""A menu entry whose extra is not installed says so in the status bar (app.errors.need_extra's line) and opens
nothing, instead of a traceback when its dialog would first import the library."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialog

from tests.ui.test_remote_device import NUCLEI


def _trigger(window, text: str) -> None:
    found = [action for action in window.findChildren(QAction) if action.text() == text]
    assert found, f"no menu entry {text!r}"
    found[0].trigger()


@pytest.mark.parametrize(("entry", "missing", "said"), [
    ("Open from PACS…", "pynetdicom", 'PACS needs the \'pacs\' extra: pip install "seglens[pacs]"'),
    ("Send to PACS…", "dicomweb_client", 'PACS needs the \'pacs\' extra: pip install "seglens[pacs]"'),
    ("Remote server…", "tritonclient",
     'remote inference needs the \'remote\' extra: pip install "seglens[remote]"'),
])
def test_a_menu_entry_without_its_extra_says_the_extras_line_and_opens_nothing(qtbot, make_main_window, monkeypatch,
                                                                               entry, missing, said):
    window = make_main_window(NUCLEI, device="cpu")
    monkeypatch.setitem(sys.modules, missing, None)  # as where the extra is not installed
    _trigger(window, entry)
    assert window.status.currentMessage() == said
    assert not [dialog for dialog in window.findChildren(QDialog) if dialog.isVisible()]


def test_with_the_extra_installed_the_entry_opens_its_dialog(qtbot, make_main_window):
    window = make_main_window(NUCLEI, device="cpu")
    _trigger(window, "Remote server…")
    assert [dialog for dialog in window.findChildren(QDialog) if dialog.isVisible()]
