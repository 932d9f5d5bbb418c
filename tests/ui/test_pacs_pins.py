"""File ▸ Open from PACS…: the series of a "Retrieve and open" are pinned in the local cache (issue 36).

The cache evicts its least recently used series after each retrieve, and a clear (here or in another SegLens) takes
everything; a pinned series is left alone (app.io.pacs.cache_pins). The viewer pins every series of its request
before the first is retrieved and lets them go at its next request, when the dialog closes or when the window
does; "Clear local cache" says how many series it could not delete because another SegLens uses them. Against a
real Orthanc on loopback (tests/io/pacs/orthanc.py) and real second processes holding pins."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pydicom
import pytest
from waiting import round_trip

from app.io.pacs.cache import SeriesCache, series_key
from app.ui.controllers.pacs import PacsController
from app.ui.workers.pacs_worker import PacsWorker
from tests.dicom_factory import write_series
from tests.ui.test_pacs_dialog import _search as _search_fake
from tests.ui.test_pacs_dialog import pacs  # noqa: F401  # the fixture: a fake PACS behind the real worker

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30_000
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a second process's flock")

# Another SegLens: pins the series named on its command line in the cache at argv[1], says "ready", then waits.
_OTHER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from app.io.pacs.cache import SeriesCache
    cache = SeriesCache(Path(sys.argv[1]))
    for uid in sys.argv[2:]:
        cache.hold(uid)
    print("ready", flush=True)
    sys.stdin.readline()
""")


@pytest.fixture(scope="module")
def orthanc_server(tmp_path_factory):
    from tests.io.pacs.orthanc import Orthanc

    server = Orthanc.launch(tmp_path_factory.mktemp("orthanc"))  # skips locally without Orthanc; fails when CI=true
    try:
        yield server
    finally:
        server.stop(graceful=True)


@pytest.fixture
def other() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _pin_elsewhere(started: list[subprocess.Popen[str]], root: Path, *uids: str) -> None:
    process = subprocess.Popen([sys.executable, "-c", _OTHER, str(root), *uids], cwd=ROOT, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(process)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"


def _pins(root: Path) -> set[str]:
    """The series keys pinned now (by anyone): the pin files' names."""
    return {p.name.split(".", 1)[0] for p in (root / ".pins").glob("*.pin")} if (root / ".pins").is_dir() else set()


@pytest.fixture
def study(orthanc_server, tmp_path, monkeypatch):
    """(window, controller, cache root, the study's series UIDs): three series of one study on Orthanc, and the
    window's real PACS worker with a cache smaller than any one series (each retrieve evicts all it may)."""
    orthanc_server.start()
    orthanc_server.clear()
    study_uid = pydicom.uid.generate_uid()
    uids = []
    for n in range(3):
        files = write_series(tmp_path / f"upload{n}", slices=3, rows=16, columns=16, study_uid=study_uid,
                             description=f"Series {n}", patient=("SYNTHETIC^PINS", "SYN-PINS-1"))
        uids.append(str(pydicom.dcmread(files[0], stop_before_pixels=True).SeriesInstanceUID))
        orthanc_server.upload(files)
    settings = tmp_path / "settings.yaml"
    web = orthanc_server.dicomweb_url.replace("http://", "dicomweb+http://")
    settings.write_text(f"pacs:\n  WEB:\n    url: \"{web}?auth=basic&user={orthanc_server.user}\"\n")
    monkeypatch.setenv("SEGLENS_PACS_SECRET", orthanc_server.password)
    root = tmp_path / "cache"

    def make(make_main_window):
        win = make_main_window(None)
        controller = PacsController(win.state, files=win.files, status=win.status, worker=win.worker,
                                    open_paths=win.add_paths, recount=win.volumes.count,
                                    model_path=lambda: win.model_path, closing=win,
                                    pacs_worker=PacsWorker(cache=lambda: SeriesCache(root, max_bytes=1)),
                                    settings_file=settings, parent=win)
        return win, controller

    yield make, root, uids
    orthanc_server.clear()


def _search(qtbot, controller):
    dialog = controller.open_dialog()
    dialog.node.setCurrentText("WEB")
    dialog.patient_id.setText("SYN-PINS-1")
    dialog.search_button.click()
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 3 or "b00020" in dialog.message.styleSheet(),
                    timeout=TIMEOUT)
    assert dialog.series.rowCount() == 3, dialog.message.text()
    return dialog


def _retrieve(qtbot, dialog, rows: list[int]) -> list[str]:
    """Select `rows` of the series table, Retrieve and open, wait for its line; the series UIDs asked for."""
    from PySide6.QtWidgets import QTableWidgetSelectionRange

    dialog.series.clearSelection()
    for row in rows:
        dialog.series.setRangeSelected(QTableWidgetSelectionRange(row, 0, row, dialog.series.columnCount() - 1), True)
    asked = [record.series_uid for record in dialog.selected_series()]
    assert len(asked) == len(rows)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: dialog.message.text().endswith("retrieved and opened") or
                    "b00020" in dialog.message.styleSheet(), timeout=TIMEOUT)
    return asked


def test_every_series_of_a_retrieve_stays_until_the_viewer_opened_them_and_goes_at_the_next_request(
        qtbot, make_main_window, study):
    make, root, uids = study
    win, controller = make(make_main_window)
    dialog = _search(qtbot, controller)
    _retrieve(qtbot, dialog, [0, 1, 2])
    assert dialog.message.text() == "3 series (9 files) retrieved and opened"
    others = SeriesCache(root)  # another SegLens's view of the cache
    assert all(others.complete(uid) is not None for uid in uids)  # none evicted by the next one's arrival
    assert len(win.files.inputs()) == 3
    qtbot.waitUntil(lambda: win.files.volume(win.files.current_path()) is not None, timeout=TIMEOUT)
    assert _pins(root) == {series_key(uid) for uid in uids}
    assert others.clear() == 3 and all(others.complete(uid) is not None for uid in uids)  # kept from any clear

    again = _retrieve(qtbot, dialog, [1])  # the next request: the last one's series may go
    assert dialog.message.text() == "1 series (3 files) retrieved and opened"
    assert _pins(root) == {series_key(again[0])}
    assert others.clear() == 1 and [uid for uid in uids if others.complete(uid)] == again

    dialog.close()  # the dialog closed: nothing of this viewer's is pinned any more
    qtbot.waitUntil(lambda: not _pins(root), timeout=TIMEOUT)
    assert others.clear() == 0 and others.series() == []


def test_closing_the_window_lets_the_series_of_its_last_retrieve_go(qtbot, make_main_window, study):
    make, root, _uids = study
    win, controller = make(make_main_window)
    dialog = _search(qtbot, controller)
    asked = _retrieve(qtbot, dialog, [0, 2])
    assert _pins(root) == {series_key(uid) for uid in asked}
    win.close()
    assert not controller.pacs_thread.isRunning() and not _pins(root)


def test_clear_local_cache_says_how_many_series_another_seglens_kept(qtbot, make_main_window, study, other):
    make, root, uids = study
    _win, controller = make(make_main_window)
    dialog = _search(qtbot, controller)
    mine = _retrieve(qtbot, dialog, [0])
    theirs = [uid for uid in uids if uid not in mine]
    cache = SeriesCache(root)
    for uid in theirs:  # two more series in the cache (retrieved by another SegLens)
        with cache.receiving(uid, expected=1) as folder:
            (folder / "a.dcm").write_bytes(b"x" * 10)
    assert len(cache.series()) == 3
    _pin_elsewhere(other, root, *theirs)  # which reads them still
    dialog.clear_button.click()
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Local cache"), timeout=TIMEOUT)
    assert dialog.message.text() == ("Local cache cleared: 1 series deleted from this computer; 2 series in use by "
                                     "another SegLens were kept")
    assert [uid for uid in uids if cache.complete(uid)] == theirs  # the viewer's own series went: it was asked to


def test_a_dialog_closed_during_a_retrieve_keeps_its_series_pinned_until_they_are_open(qtbot, pacs, tmp_path):  # noqa: F811
    gate = threading.Event()
    win, controller, _clients = pacs(gate=gate)
    dialog = _search_fake(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    dialog.series.selectAll()
    dialog.retrieve_button.click()
    root = tmp_path / "pins"
    qtbot.waitUntil(lambda: len(_pins(root)) == 2, timeout=TIMEOUT)  # both, before the first file arrives
    unpins: list[object] = []
    controller.unpin_requested.connect(unpins.append)
    dialog.close()  # its finished signal is handled here, on this thread: an unpin would be asked for by now
    round_trip(qtbot)  # and what the close posted has run
    assert unpins == [] and len(_pins(root)) == 2  # the retrieve goes on: its series are not open yet
    gate.set()
    qtbot.waitUntil(lambda: len(win.files.inputs()) == 2, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: not _pins(root), timeout=TIMEOUT)  # opened, and the dialog closed: let go


def test_a_cache_that_cannot_be_used_is_one_line_naming_it_and_nothing_is_asked(qtbot, make_main_window, study):
    make, root, _uids = study
    root.parent.mkdir(parents=True, exist_ok=True)
    root.write_bytes(b"not a folder")  # the cache's place taken by a file
    _win, controller = make(make_main_window)
    dialog = _search(qtbot, controller)
    _retrieve(qtbot, dialog, [0])
    assert dialog.message.text() == f"cache: cannot use {root} (refused to write through a file planted under the name)"
    assert "b00020" in dialog.message.styleSheet() and dialog.retrieve_button.isEnabled()
