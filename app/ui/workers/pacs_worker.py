"""The PACS worker: searches, series lists, retrieves and sends on its own QThread, so a slow or silent server never
freezes the window (the worker pattern: a parentless QObject moved onto a long-lived thread; one record in, one
record out, with the request's id; a failure is a `failed` record with one line, never a dead thread).

A retrieve is cancelled between files: `cancel()` is called from the GUI thread (a plain attribute write) and the
client's `should_stop` reads it; the series being received is then dropped by the cache, never left half there.

Every series of a retrieve is pinned in the cache (app.io.pacs.cache_pins) before the first one is asked for, so
that the eviction after a later one, or a clear in another SegLens, cannot take an earlier one before the viewer
has opened it; the pins last until the next retrieve or clear, or `release_pins` (the dialog closed, the thread
ending)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

if TYPE_CHECKING:
    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.client import PacsClient, SeriesRecord
    from app.io.pacs.nodes import PacsNode
    from app.ui.state.pacs_messages import (
        PacsClearCache,
        PacsRetrieve,
        PacsSearch,
        PacsSend,
        PacsSeriesAsk,
        PacsTarget,
        PacsUnpin,
    )

log = logging.getLogger(__name__)

DERIVED = ("SEG", "RTSTRUCT")  # series made over another one: no image of their own to open

Connect = Callable[..., "PacsClient"]  # app.io.pacs.connect.connect(node, *, secret=…), or a test's fake


class PacsWorker(QObject):
    studies_found = Signal(object)  # PacsStudies
    series_found = Signal(object)  # PacsSeriesFound
    progress = Signal(object)  # PacsProgress
    retrieved = Signal(object)  # PacsRetrieved
    sent = Signal(object)  # PacsSent
    cache_cleared = Signal(object)  # PacsCacheCleared
    failed = Signal(object)  # PacsFailed

    def __init__(self, *, connect: Connect | None = None, cache: Callable[[], SeriesCache] | None = None) -> None:
        """`connect`: how a node becomes a client (default app.io.pacs.connect.connect); `cache`: the series cache,
        made on first use on this thread (default: the user cache folder's)."""
        super().__init__()
        self._connect, self._make_cache = connect, cache
        self._cache: SeriesCache | None = None
        self._stopped = 0  # the request id Cancel was pressed for (0: none)
        self._pinned = 0  # the retrieve whose series the cache holds pinned (0: none)
        self._references: list[Path] = []  # SEGs and RTSTRUCTs read back as slice references

    def cancel(self, request_id: int) -> None:
        """Called from the GUI thread: stop that retrieve (or send) after the file being received."""
        self._stopped = request_id

    @Slot(object)
    def search(self, request: PacsSearch) -> None:
        from app.ui.state.pacs_messages import PacsStudies

        self._guarded(request.request_id, lambda: self.studies_found.emit(PacsStudies(
            request.request_id, tuple(self._client(request.target).find_studies(request.query)))))

    @Slot(object)
    def list_series(self, request: PacsSeriesAsk) -> None:
        from app.ui.state.pacs_messages import PacsSeriesFound

        self._guarded(request.request_id, lambda: self.series_found.emit(PacsSeriesFound(
            request.request_id, request.study_uid, tuple(self._client(request.target).find_series(request.study_uid)))))

    @Slot(object)
    def retrieve(self, request: PacsRetrieve) -> None:
        self._guarded(request.request_id, lambda: self._retrieve(request))

    @Slot(object)
    def send(self, request: PacsSend) -> None:
        from app.ui.state.pacs_messages import PacsProgress
        from app.ui.workers.pacs_send import send_volume

        def progress(done: int, total: int) -> None:
            self.progress.emit(PacsProgress(request.request_id, 1, 1, done, total))

        self._guarded(request.request_id, lambda: self.sent.emit(
            send_volume(request, self._client(request.target), progress=progress)))

    @Slot(object)
    def clear_cache(self, request: PacsClearCache) -> None:
        from app.ui.state.pacs_messages import PacsCacheCleared

        def clear() -> None:
            cache = self._series_cache()
            self.let_go()  # this viewer's own pins: the reader asked for its series to go
            self.forget_references()
            held = len(cache.series())
            kept = cache.clear()  # what is left is pinned by another SegLens
            self.cache_cleared.emit(PacsCacheCleared(request.request_id, max(held - kept, 0), kept))

        self._guarded(request.request_id, clear)

    @Slot(object)
    def unpin(self, request: PacsUnpin) -> None:
        """Let the series of that retrieve go (eviction and clears may take them again), unless a later one's
        are pinned by now."""
        if request.request_id == self._pinned:
            self.let_go()

    def let_go(self) -> None:
        """Release every pin this worker holds; on its thread (the thread's end calls it there, directly)."""
        if self._cache is not None:
            self._cache.close()
        self._pinned = 0

    def _retrieve(self, request: PacsRetrieve) -> None:
        """Each series in turn into the cache; a failure or Cancel ends it with the complete ones kept. A SEG or
        RTSTRUCT lists no image: its source series is retrieved too and opened in its place (_source_of)."""
        from app.errors import one_line
        from app.io.pacs.client import PacsError
        from app.ui.state.pacs_messages import PacsProgress, PacsRetrieved

        client, cache, rid = self._client(request.target), self._series_cache(), request.request_id
        self.let_go()  # the last request's series may go now
        self._hold(cache, [series.series_uid for series in request.series])  # they stay until the viewer has them
        self._pinned = rid
        folders: list[Path] = []
        derived: list[str] = []
        reference: Path | None = None  # the SEGs / RTSTRUCTs read back, one mask per slice of their source series
        done: dict[str, Path] = {}  # series UID → its cache folder
        files, total = 0, len(request.series)
        for index, series in enumerate(request.series, start=1):
            def progress(received: int, expected: int | None, index: int = index) -> None:
                self.progress.emit(PacsProgress(rid, index, total, received, expected))

            if self._stopped == rid:
                self.retrieved.emit(PacsRetrieved(rid, tuple(folders), files, "Cancelled", tuple(derived), reference))
                return
            try:
                if series.series_uid not in done:  # not already brought as a SEG's source
                    got = client.retrieve(series.study_uid, series.series_uid, cache, progress=progress,
                                          should_stop=lambda: self._stopped == rid)
                    done[series.series_uid], files = got.folder, files + got.files
                if series.modality.upper() in DERIVED:
                    line, source, more = self._source_of(client, cache, request, series, done, progress)
                    if source is not None:
                        folder = reference or self._reference_folder()
                        line, read = self._derived_reference(line, done[series.series_uid], source, folder)
                        reference = folder if read else reference
                    derived.append(line)
                    files += more
                else:
                    source = done[series.series_uid]
            except PacsError as exc:
                why = "Cancelled" if self._stopped == rid else one_line(exc)
                self.retrieved.emit(PacsRetrieved(rid, tuple(folders), files, why, tuple(derived), reference))
                return
            if source is not None and source not in folders:
                folders.append(source)
        self.retrieved.emit(PacsRetrieved(rid, tuple(folders), files, derived=tuple(derived), reference=reference))

    def _source_of(self, client: PacsClient, cache: SeriesCache, request: PacsRetrieve, series: SeriesRecord,
                   done: dict[str, Path], progress: Callable[[int, int | None], None]) -> tuple[str, Path | None, int]:
        """(the line, the source series' folder or None, its files retrieved now) of a SEG or RTSTRUCT: the series
        it references, retrieved unless it already was, or the one line why there is none to open it over."""
        from app.io.references import derived_source

        what = f"{series.modality} '{series.description or series.series_uid}'"
        uid = derived_source(done[series.series_uid])
        if uid is None:
            return f"{what} names no source series: nothing to open it over", None, 0
        asked = {s.series_uid: s for s in request.series}
        record = asked.get(uid) or {s.series_uid: s for s in client.find_series(series.study_uid)}.get(uid)
        if record is None:
            return f"{what}: its source series {uid} is not on {request.target.node.name}", None, 0
        more = 0
        if uid not in done:
            self._hold(cache, [uid])
            got = client.retrieve(record.study_uid, uid, cache, progress=progress,
                                  should_stop=lambda: self._stopped == request.request_id)
            done[uid], more = got.folder, got.files
        return f"{what} opened over its source series '{record.description or uid}'", done[uid], more

    @staticmethod
    def _derived_reference(line: str, seg: Path, source: Path, reference: Path) -> tuple[str, bool]:
        """The SEG or RTSTRUCT read back over its source series' slices, written into `reference` as one mask per
        slice (named as a review folder names a slice's correction: app.runs.review.ground_truth finds it there);
        (`line` saying so, True), or (why it is not the reference, False)."""
        import io

        from PIL import Image

        from app.errors import SegLensError, one_line
        from app.guard.shared import atomic_write
        from app.io.discover import discover
        from app.io.references import derived_labels
        from app.runs.review.log import corrected_mask_path

        items = [item for item in discover([source]) if item.volume is not None]
        try:
            if not items or items[0].volume is None:
                return f"{line}; not as the reference: its source series is no volume", False
            labels = derived_labels(seg, items[0].volume)
            for k, plane in enumerate(labels):
                png = io.BytesIO()
                Image.fromarray(plane).save(png, format="PNG")
                atomic_write(corrected_mask_path(reference, items[0].rel.as_posix(), k), png.getvalue(), private=True)
        except SegLensError as exc:
            return f"{line}; not as the reference: {one_line(exc)}", False
        return f"{line}, as the reference (Show ▸ Difference vs reference; IoU and Dice per slice)", True

    def _reference_folder(self) -> Path:
        """A private folder for this retrieve's SEGs and RTSTRUCTs read back (removed by forget_references)."""
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="seglens-seg-"))  # 0700
        self._references.append(folder)
        return folder

    def forget_references(self) -> None:
        """Delete the SEGs and RTSTRUCTs read back (they hold patient data): the cache cleared, or the thread ending."""
        from app.guard.shared import remove_under

        for folder in self._references:
            remove_under(folder.parent, folder.name)
        self._references.clear()

    @staticmethod
    def _hold(cache: SeriesCache, uids: list[str]) -> None:
        from app.io.pacs.client import PacsError

        try:
            for uid in uids:
                cache.hold(uid)
        except OSError as e:  # the cache folder not writable, or a link planted under its name: as a retrieve says
            raise PacsError(f"cache: cannot use {cache.root} ({e.strerror or type(e).__name__})") from e

    def _client(self, target: PacsTarget) -> PacsClient:
        secret = target.secret or self._secret(target.node)
        if self._connect is not None:
            return self._connect(target.node, secret=secret)
        from app.io.pacs.connect import connect

        return connect(target.node, secret=secret)

    @staticmethod
    def _secret(node: PacsNode) -> str | None:
        if node.kind != "dicomweb" or node.auth == "none":
            return None  # DIMSE has no password: its AE titles are its identity
        from app.io.pacs.nodes import node_secret

        return node_secret(node)

    def _series_cache(self) -> SeriesCache:
        if self._cache is None:
            if self._make_cache is not None:
                self._cache = self._make_cache()
            else:
                from app.io.pacs.cache import SeriesCache

                self._cache = SeriesCache()
        return self._cache

    def _guarded(self, request_id: int, job: Callable[[], None]) -> None:
        """Run `job`; any failure becomes one `failed` line (the thread lives on)."""
        from app.errors import one_line
        from app.ui.state.pacs_messages import PacsFailed

        try:
            job()
        except Exception as exc:  # a PacsError, and anything a library raises: one line in the dialog
            # the type only: a library's message or traceback may hold a query URL with the patient's ID in it
            log.debug("pacs request %d failed: %s", request_id, type(exc).__name__)
            self.failed.emit(PacsFailed(request_id, one_line(exc, typed=True)))
