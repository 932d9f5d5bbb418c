"""File ▸ Open from PACS… and Results ▸ Send to PACS…: the dialogs' intents to the PACS worker, its answers back.

Made on first use (by actions.py): nothing of it, its worker thread or the networking
libraries exists before the reader asks for a PACS. A retrieved series opens exactly as a dropped folder does
(MainWindow.add_paths on its cache folder); a SEG or RTSTRUCT, which lists no image, opens its source series,
retrieved with it (PacsWorker), or says in one line why it cannot. A send takes the whole-volume count's label
volume (the legend's mL and the three planes' mask: what the reader sees at the threshold set), never a second
model run."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, Signal

from app.spelling import counted

if TYPE_CHECKING:
    import numpy as np
    from PySide6.QtWidgets import QWidget

    from app.io.pacs.client import SeriesRecord
    from app.io.pacs.nodes import PacsNode
    from app.ui.state.messages import VolumeCount
    from app.ui.state.pacs_messages import (
        PacsCacheCleared,
        PacsFailed,
        PacsProgress,
        PacsRetrieved,
        PacsSent,
        PacsSeriesFound,
        PacsStudies,
        PacsTarget,
    )
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.pacs_dialog import PacsDialog
    from app.ui.widgets.pacs_send_dialog import PacsSendDialog
    from app.ui.workers.pacs_worker import PacsWorker

STATUS_MS = 15_000


class PacsController(QObject):
    search_requested = Signal(object)  # PacsSearch, to the PACS worker
    series_requested = Signal(object)  # PacsSeriesAsk
    retrieve_requested = Signal(object)  # PacsRetrieve
    send_requested = Signal(object)  # PacsSend
    clear_requested = Signal(object)  # PacsClearCache
    unpin_requested = Signal(object)  # PacsUnpin: the last retrieve's series are open and the dialog closed

    def __init__(self, state: ViewState, *, files: FileList, status, worker: QObject,
                 open_paths: Callable[[list[str | Path]], None], recount: Callable[[str], None],
                 model_path: Callable[[], Path | None], closing: QWidget | None = None,
                 pacs_worker: PacsWorker | None = None, settings_file: Path | None = None,
                 reference: Callable[[Path], None] | None = None, parent: QObject | None = None) -> None:
        """`worker`: the inference worker (its whole-volume counts); `open_paths`: open folders as a drop does;
        `recount`: ask the count of a volume again (answered at once when it is complete); `closing`: the window,
        whose close stops the PACS thread; `reference`: compare with the masks of a folder (a SEG read back over its
        source series); `pacs_worker`, `settings_file`: for tests."""
        super().__init__(parent)
        from app.ui.workers.pacs_worker import PacsWorker
        from app.ui.workers.threads import start_worker_thread

        self._state, self._files, self._status = state, files, status
        self._open_paths, self._recount, self._model_path = open_paths, recount, model_path
        self._settings_file = settings_file
        self._reference = reference
        self._ids = itertools.count(1)
        self._search_id = self._series_id = self._retrieve_id = self._send_id = self._last_retrieve = 0
        self._dialog: PacsDialog | None = None
        self._send_dialog: PacsSendDialog | None = None
        self._labels: tuple[str, np.ndarray] | None = None  # (path, whole label volume) of the last complete count
        self._counting: tuple[str, int, int] | None = None  # (path, done, total) of the count going on
        self._pending_send: tuple[PacsTarget, tuple[str, ...], bool] | None = None  # waiting for the count
        self.worker = pacs_worker or PacsWorker()
        for signal, slot in ((self.search_requested, self.worker.search),
                             (self.series_requested, self.worker.list_series),
                             (self.retrieve_requested, self.worker.retrieve), (self.send_requested, self.worker.send),
                             (self.clear_requested, self.worker.clear_cache),
                             (self.unpin_requested, self.worker.unpin)):
            signal.connect(slot)
        # bound methods only for what comes back: a lambda would run on the worker's thread
        self.worker.studies_found.connect(self._on_studies)
        self.worker.series_found.connect(self._on_series)
        self.worker.progress.connect(self._on_progress)
        self.worker.retrieved.connect(self._on_retrieved)
        self.worker.sent.connect(self._on_sent)
        self.worker.cache_cleared.connect(self._on_cache_cleared)
        self.worker.failed.connect(self._on_failed)
        worker.volume_counted.connect(self._on_counted)  # type: ignore[attr-defined]
        self.pacs_thread = start_worker_thread(self.worker, name="pacs", parent=self)
        # the window closing: the pins go on the worker's thread, after its last slot (a queued request may never run)
        self.pacs_thread.finished.connect(self.worker.let_go, Qt.ConnectionType.DirectConnection)
        self.pacs_thread.finished.connect(self.worker.forget_references, Qt.ConnectionType.DirectConnection)
        self._closing = closing
        if closing is not None:
            closing.installEventFilter(self)

    # -- File ▸ Open from PACS… ----------------------------------------------------------------------------

    def open_dialog(self) -> PacsDialog | None:
        """Show the search dialog (made once, kept with its last search while the window lives); None (and the
        pacs extra's line in the status bar) where that extra is not installed."""
        if not self._installed():
            return None
        if self._dialog is None:
            from app.ui.widgets.pacs_dialog import PacsDialog

            self._dialog = dialog = PacsDialog(self._closing)
            dialog.search_requested.connect(self.search)
            dialog.study_chosen.connect(self.list_series)
            dialog.retrieve_requested.connect(self.retrieve)
            dialog.cancel_requested.connect(self.cancel)
            dialog.clear_cache_requested.connect(self.clear_cache)
            dialog.finished.connect(self._unpin_if_closed)
            names, problem = self._node_names()
            dialog.set_nodes(names, source=self._settings())
            if problem:
                dialog.say(problem, error=True)
        elif not self._dialog.isVisible():
            self._dialog.mark_previous()  # its rows are the last search's, not the PACS's now
        self._dialog.show()
        self._dialog.raise_()
        return self._dialog

    def _installed(self) -> bool:
        """The pacs extra's libraries are here; else its one line (app.errors.need_extra) in the status bar."""
        from app.errors import MissingExtra, need_extra

        try:
            for module in ("pynetdicom", "dicomweb_client"):
                need_extra(module, extra="pacs", feature="PACS")
        except MissingExtra as exc:
            self._status.showMessage(str(exc), STATUS_MS)
            return False
        return True

    def _unpin_if_closed(self) -> None:
        """The dialog closed (the reader is done with it): the last retrieve's series may go, once it opened them."""
        from app.ui.state.pacs_messages import PacsUnpin

        if self._last_retrieve and not self._retrieve_id and not (self._dialog and self._dialog.isVisible()):
            self.unpin_requested.emit(PacsUnpin(self._last_retrieve))
            self._last_retrieve = 0

    def search(self) -> None:
        from app.ui.state.pacs_messages import PacsSearch

        dialog = self._dialog
        assert dialog is not None
        target = self._target(dialog.node_text(), dialog.secret(), dialog.say)
        if target is None:
            return
        self._search_id = next(self._ids)
        dialog.set_busy(True)
        dialog.set_studies([])
        dialog.say(f"Searching {target.node.name}…")
        self.search_requested.emit(PacsSearch(self._search_id, target, dialog.query()))

    def list_series(self, study_uid: str) -> None:
        from app.ui.state.pacs_messages import PacsSeriesAsk

        dialog = self._dialog
        assert dialog is not None
        target = self._target(dialog.node_text(), dialog.secret(), dialog.say)
        if target is not None and study_uid:
            self._series_id = next(self._ids)
            self.series_requested.emit(PacsSeriesAsk(self._series_id, target, study_uid))

    def retrieve(self, series: tuple[SeriesRecord, ...]) -> None:
        from app.ui.state.pacs_messages import PacsRetrieve

        dialog = self._dialog
        assert dialog is not None
        target = self._target(dialog.node_text(), dialog.secret(), dialog.say)
        if target is None or not series:
            return
        self._retrieve_id = self._last_retrieve = next(self._ids)
        dialog.set_retrieving(True)
        dialog.say(f"Retrieving {len(series)} series from {target.node.name}…")
        self.retrieve_requested.emit(PacsRetrieve(self._retrieve_id, target, tuple(series)))

    def cancel(self) -> None:
        """Cancel the retrieve going on: it stops after the file being received; that series is not kept."""
        if self._retrieve_id:
            self.worker.cancel(self._retrieve_id)

    def clear_cache(self) -> None:
        """Delete the series retrieved to this computer (never while a retrieve runs: the dialog says so)."""
        from app.ui.state.pacs_messages import PacsClearCache

        if self._retrieve_id:
            return
        self._search_id = next(self._ids)  # its answer, or its failure, is the dialog's line
        self.clear_requested.emit(PacsClearCache(self._search_id))

    def _on_cache_cleared(self, cleared: PacsCacheCleared) -> None:
        if self._dialog is not None and cleared.request_id == self._search_id:
            self._dialog.say(cleared.line())

    def _on_studies(self, found: PacsStudies) -> None:
        if found.request_id != self._search_id or self._dialog is None:
            return
        self._dialog.set_busy(False)
        self._dialog.set_studies(list(found.studies))
        n = len(found.studies)
        self._dialog.say(f"{n} stud{'y' if n == 1 else 'ies'} found" + (": choose one" if n > 1 else ""))

    def _on_series(self, found: PacsSeriesFound) -> None:
        if found.request_id != self._series_id or self._dialog is None:
            return
        if found.study_uid == self._dialog.chosen_study():
            self._dialog.set_series(found.study_uid, list(found.series))
            n = len(found.series)
            self._dialog.say(f"{n} series in the study: select one or more, then Retrieve and open" if n
                             else "The study has no series on the node")

    def _on_progress(self, progress: PacsProgress) -> None:
        if progress.request_id == self._retrieve_id and self._dialog is not None:
            self._dialog.set_progress(progress.index, progress.total, progress.received, progress.expected)
        elif progress.request_id == self._send_id and self._send_dialog is not None:
            self._send_dialog.set_progress(progress.received, progress.expected or 0)

    def _on_retrieved(self, done: PacsRetrieved) -> None:
        if done.request_id != self._retrieve_id:
            return
        self._retrieve_id = 0
        n = len(done.folders)
        line = f"{n} series ({counted(done.files, 'file')}) retrieved and opened"
        if done.derived:  # a SEG or RTSTRUCT: what it was opened over, or why nothing was
            line = "; ".join(([line] if n else []) + list(done.derived))
        if done.stopped:
            line = f"{done.stopped}: {line}" if n or done.derived else done.stopped
        failed = bool(done.stopped) and done.stopped != "Cancelled"
        if self._dialog is not None:
            self._dialog.set_retrieving(False)
            self._dialog.say(line, error=failed or (not n and not done.stopped))
        if done.folders:
            self._open_paths(list(done.folders))  # as a dropped folder opens
            if done.reference is not None and self._reference is not None:
                self._reference(done.reference)  # a SEG over its source series: the slices' reference
        self._status.showMessage(line, STATUS_MS)
        self._unpin_if_closed()

    # -- Results ▸ Send to PACS… -----------------------------------------------------------------------------

    def open_send_dialog(self) -> PacsSendDialog | None:
        """Show the send dialog for the volume shown; None (and a status line) when there is nothing to send or
        the pacs extra is not installed."""
        if not self._installed():
            return None
        path, problem = self._sendable()
        if problem:
            self._status.showMessage(f"Send to PACS: {problem}", STATUS_MS)
            return None
        if self._send_dialog is None:
            from app.runs.exports.formats import EXPORTS
            from app.ui.widgets.pacs_send_dialog import PacsSendDialog

            available = ("dicom-seg", "sc", *(("rtstruct",) if "rtstruct" in EXPORTS else ()))
            self._send_dialog = PacsSendDialog(kinds_available=available, parent=self._closing)
            self._send_dialog.send_requested.connect(self.send)
            names, node_problem = self._node_names()
            self._send_dialog.set_nodes(names)
            if node_problem:
                self._send_dialog.say(node_problem, error=True)
        model = self._state.model
        volume = self._files.volume(path)
        assert model is not None and volume is not None
        self._send_dialog.set_subject(_subject(model.spec.name, volume.info, volume.depth))
        self._send_dialog.show()
        self._send_dialog.raise_()
        self._recount(str(path))  # a complete count answers at once with its label volume
        return self._send_dialog

    def send(self) -> None:
        dialog = self._send_dialog
        assert dialog is not None
        target = self._target(dialog.node_text(), dialog.secret(), lambda line, error=True: dialog.say(line,
                                                                                                         error=error))
        if target is None:
            return
        from app.ui.workers.pacs_send import send_refusal

        refusal = send_refusal(target.node, anonymize=dialog.wants_anonymized())
        kinds = dialog.kinds()
        if refusal or not kinds:
            dialog.say(refusal or "Choose at least one thing to send", error=True)
            return
        self._pending_send = (target, kinds, dialog.wants_anonymized())
        dialog.set_sending(True)
        self._send_when_counted()

    def _send_when_counted(self) -> None:
        """Send once the volume shown has its whole label volume; until then say how far the count is."""
        from app.ui.state.pacs_messages import PacsSend

        path, problem = self._sendable()
        dialog, pending = self._send_dialog, self._pending_send
        if dialog is None or pending is None:
            return
        if problem:
            self._pending_send = None
            dialog.set_sending(False)
            dialog.say(problem, error=True)
            return
        if self._labels is None or self._labels[0] != path:
            counting = self._counting if self._counting and self._counting[0] == path else None
            done = f" ({counting[1]} of {counted(counting[2], 'slice')})" if counting else ""
            dialog.say(f"Waiting for the whole-volume count{done}: the SEG is made from every slice")
            return
        model, volume, model_path = self._state.model, self._files.volume(path), self._model_path()
        assert model is not None and volume is not None and model_path is not None
        target, kinds, anonymize = pending
        self._pending_send = None
        self._send_id = next(self._ids)
        dialog.say(f"Writing and sending to {target.node.name}…")
        self.send_requested.emit(PacsSend(self._send_id, target, volume, self._labels[1], model.spec.classes,
                                          model_path, kinds=kinds, anonymize=anonymize,
                                          opacity=self._state.overlay.opacity))

    def _sendable(self) -> tuple[str, str]:
        """(the volume shown's path, "") or ("", why nothing can be sent)."""
        path = self._files.current_path()
        volume = self._files.volume(path) if path else None
        model = self._state.model
        if not path or volume is None or volume.kind == "nifti":
            return "", "show a DICOM series first (the SEG references its slices)"
        if model is None or model.spec.task != "segmentation" or self._model_path() is None:
            return "", "a segmentation model's result is sent: load one first"
        return path, ""

    def _on_counted(self, count: VolumeCount) -> None:
        self._counting = (count.path, count.done, count.total)
        if count.labels is not None:
            self._labels = (count.path, count.labels)
        if self._pending_send is not None:
            self._send_when_counted()

    def _on_sent(self, sent: PacsSent) -> None:
        if sent.request_id != self._send_id:
            return
        self._send_id = 0
        if self._send_dialog is not None:
            self._send_dialog.set_sending(False)
            self._send_dialog.say(sent.line, error=sent.verified < 1)
        self._status.showMessage(sent.line, STATUS_MS)

    # -- both --------------------------------------------------------------------------------------------------

    def _on_failed(self, failed: PacsFailed) -> None:
        rid, line = failed.request_id, failed.message
        if rid == self._send_id and self._send_dialog is not None:
            self._send_id = 0
            self._send_dialog.set_sending(False)
            self._send_dialog.say(line, error=True)
            return
        if self._dialog is None or rid not in (self._search_id, self._series_id, self._retrieve_id):
            return
        if rid == self._retrieve_id:
            self._retrieve_id = 0
            self._unpin_if_closed()
            self._dialog.set_retrieving(False)
        self._dialog.set_busy(False)
        self._dialog.say(line, error=True)

    def _node_names(self) -> tuple[list[str], str]:
        """The settings' node names, and the one line why there are none when the settings cannot be read."""
        from app.errors import SegLensError

        try:
            return sorted(self._nodes()), ""
        except SegLensError as exc:
            return [], str(exc)

    def _nodes(self) -> dict[str, PacsNode]:
        from app.io.pacs.nodes import load_nodes

        return load_nodes(self._settings())

    def _settings(self) -> Path:
        """The settings file the nodes are read from."""
        from app.io.pacs.nodes import default_settings_file

        return self._settings_file or default_settings_file()

    def _target(self, text: str, secret: str, say: Callable[..., None]) -> PacsTarget | None:
        """The node `text` names (a settings name or a URL), or None and one line in the dialog."""
        from app.errors import SegLensError
        from app.io.pacs.nodes import parse_node
        from app.ui.state.pacs_messages import PacsTarget

        if not text:
            say("Choose a node, or type its URL (dicomweb+https://host/dicom-web, dimse://AE@host:104)", error=True)
            return None
        try:
            return PacsTarget(parse_node(text, self._nodes()), secret)
        except SegLensError as exc:
            say(str(exc), error=True)
            return None

    # -- close -------------------------------------------------------------------------------------------------

    def eventFilter(self, watched, event) -> bool:
        if watched is self._closing and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """Cancel what runs and join the PACS thread (the window is closing)."""
        from app.ui.workers.threads import stop_thread

        for rid in (self._retrieve_id, self._send_id):
            if rid:
                self.worker.cancel(rid)
        for dialog in (self._dialog, self._send_dialog):
            if dialog is not None:
                dialog.close()
        stop_thread(self.pacs_thread, timeout_ms=10_000)


def _subject(model: str, info: dict[str, str], depth: int) -> str:
    """What is about to be sent, on screen (never logged): whose series, so the reader sends to the right study."""
    from app.ui.widgets.pacs_dialog import person_name, study_date

    who = " · ".join(part for part in (person_name(info.get("Patient", "")), info.get("Patient ID", ""),
                                       study_date(info.get("Study date", "")), info.get("Series", "")) if part)
    return (f"The result of {model} on the volume shown ({counted(depth, 'slice')}), as the overlay shows it now"
            + (f":\n{who}" if who else "."))
