"""Review and sign-off in the viewer: the model's result is correct (A), wrong (R) or corrected (E) for each image,
a note, the next unreviewed image (U), the state in the file list with a filter, and the HTML review report.

The log is `seglens_review.csv` in the inputs' review folder (app.runs.review.log), written atomically after every
change and opened again with the folder; it carries the model's SHA-256, so a review made with another model is
never shown as this one's (the panel says how many such rows are kept aside).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from app.runs.review.log import ReviewLog
    from app.ui.state.messages import ReportRequest, Tuning
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.review_panel import ReviewPanel
    from app.ui.widgets.status import StatusBar

log = logging.getLogger(__name__)


class Reviewer(QObject):
    reviewed = Signal(object, str)  # path (str; object: a QString drops a name's non-UTF-8 bytes), state

    def __init__(self, state: ViewState, *, files: FileList, panel: ReviewPanel, status: StatusBar,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._files = files
        self._panel = panel
        self._status = status
        self._log: ReviewLog | None = None  # of the current inputs and model
        self.model_path: Path | None = None
        # the loaded model's, hashed on the worker (ModelSummary.sha256): hashing here stalls the GUI on a big model
        self.model_sha256 = ""
        panel.state_requested.connect(self.mark)
        panel.note_changed.connect(self.note)
        panel.next_requested.connect(self.next_unreviewed)
        files.current_path_changed.connect(self._show_current)

    @property
    def log(self):
        return self._log

    def open(self) -> None:
        """(Re)open the review log for the listed inputs and the loaded model; the list shows each state."""
        self._log = None
        paths = self._files.paths()
        if not paths or self.model_path is None or self._state.model is None:
            self._panel.show_review(None, 0)
            return
        from app.errors import SegLensError
        from app.io.files import file_sha256
        from app.runs.review.log import ReviewLog, review_folder

        root, _ = self._files.root_and_rel(paths[0])
        try:
            folder = review_folder(root)
            self._log = ReviewLog.open(folder, self.model_sha256 or file_sha256(self.model_path))
        except (SegLensError, OSError) as exc:
            self._status.showMessage(f"Review log not opened: {exc}", 20000)
            self._panel.show_review(None, 0)
            return
        beside = folder.parent == Path(os.path.abspath(root)).parent
        self._panel.show_location(None if beside else folder)  # the bundled samples: the user's data folder
        for path in paths:
            self._files.set_review(path, self._state_of(path))
        self._show_current(self._files.current_path() or "")

    def mark(self, state: str, path: str | None = None) -> None:
        """Set the review state of `path` (default: the current image); accept/reject then go to the next
        unreviewed image."""
        path = path or self._files.current_path()
        if not path or self._log is None:
            self._status.showMessage("Nothing to review: open images and wait for the model", 8000)
            return
        _, rel = self._files.root_and_rel(path)
        review = self._saved(lambda: self._log.set(rel, state))
        if review is None:
            return
        self._files.set_review(path, review.state)
        self._show_current(path)
        self.reviewed.emit(path, review.state)
        if state in ("accepted", "rejected"):
            self.next_unreviewed()

    def note(self, text: str) -> None:
        path = self._files.current_path()
        if not path or self._log is None:
            return
        _, rel = self._files.root_and_rel(path)
        current = self._log.get(rel)
        if (current is not None and current.note == text) or (current is None and not text):
            return
        self._saved(lambda: self._log.set(rel, current.state if current else "unreviewed", note=text))

    def _saved(self, write):
        """`write()`'s Review, or None with the one-line reason in the status bar (the log stays as on disk)."""
        from app.errors import SegLensError

        try:
            return write()
        except (SegLensError, OSError) as exc:
            log.warning("review not saved (%s; the message names the review folder: at DEBUG)", type(exc).__name__)
            log.debug("review not saved: %s", exc)
            self._status.showMessage(f"Review not saved: {exc}", 20000)
            return None

    def next_unreviewed(self) -> None:
        if self._log is None:
            return
        paths = self._files.visible_paths() or self._files.paths()
        rels = [self._files.root_and_rel(p)[1] for p in paths]
        current = self._files.current_path()
        after = self._files.root_and_rel(current)[1] if current else None
        found = self._log.next_unreviewed(rels, after)
        if found is None:
            self._status.showMessage("Every image is reviewed", 8000)
            return
        self._files.select_path(paths[rels.index(found)])

    def report_request(self, report_path: str | Path, tuning: Tuning, *,
                       anonymize: bool | None = None) -> ReportRequest | None:
        """What the worker's export_report needs: the listed inputs (with their volumes), their reviews, the
        model's identity; None (and a message) without a log. `anonymize` None: on when the list holds a volume
        (`anonymize_by_default`)."""
        if self._log is None:
            self._status.showMessage("No review log: open images and wait for the model", 8000)
            return None
        from app import __version__
        from app.ui.state.messages import ListedInput, ReportRequest

        entries = tuple(ListedInput(p, self._files.root_and_rel(p)[1], self._files.volume(p))
                        for p in self._files.paths())
        return ReportRequest(entries, str(report_path), tuning, {entry.rel: self._log.get(entry.rel)
                                                                for entry in entries},
                             cast(Path, self.model_path).name,  # a log is opened only with a model
                             self._log.model_sha256, __version__,
                             anonymize=self.anonymize_by_default() if anonymize is None else anonymize)

    def listed_volumes(self) -> int:
        """How many listed inputs are volumes (DICOM series, multi-frame DICOM, NIfTI)."""
        return sum(self._files.volume(p) is not None for p in self._files.paths())

    def anonymize_by_default(self) -> bool:
        """De-identify the review report unless told otherwise when a volume is listed: its patient fields and
        PACS-style folders (name, ID, accession) are where identity sits; a folder of photos has none."""
        return self.listed_volumes() > 0

    def _state_of(self, path: str) -> str:
        review = self._log.get(self._files.root_and_rel(path)[1]) if self._log is not None else None
        return review.state if review is not None else "unreviewed"

    def _show_current(self, path: str) -> None:
        if self._log is None or not path:
            self._panel.show_review(None, self._log.foreign if self._log else 0)
            return
        self._panel.show_review(self._log.get(self._files.root_and_rel(path)[1]), self._log.foreign,
                                self._log.counts())
