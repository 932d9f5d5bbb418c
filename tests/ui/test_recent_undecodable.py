"""File ▸ Open recent's existence answer crosses a thread as a record (issue 25): a gone path whose name holds
bytes that are not UTF-8 (kept as surrogates, as os.fsdecode gives them) is greyed and removed like any other.
Was: the answer came back through `Signal(str, bool)`, whose QString dropped those bytes, so the answer was filed
under another name and the entry stayed, never marked missing."""

from __future__ import annotations

import os

from app.ui.recent import ExistenceChecker

TIMEOUT = 20_000


def test_a_gone_path_with_undecodable_bytes_is_known_missing(qtbot, tmp_path):
    gone = os.path.join(os.fsdecode(bytes(tmp_path)), os.fsdecode(b"scan-\xff.png"))  # '\udcff' in the str
    checker = ExistenceChecker(exists=lambda _path: False)
    checker.check([gone])
    qtbot.waitUntil(lambda: bool(checker.known), timeout=TIMEOUT)
    assert checker.known == {gone: False} and checker.missing([gone]) == [gone]
