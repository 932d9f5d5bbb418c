"""The import worker: a trained-model folder dropped on the window is compiled into an ONNX model and its sidecar
on its own QThread (the worker pattern: a parentless QObject moved onto a long-lived thread; one record in, records
out with the request's id; a failure is a `failed` record with one line, never a dead thread).

Its own thread: hashing and compiling a large folder takes seconds (TotalSegmentator's: tens of seconds), and the
inference worker meanwhile goes on answering for the pictures shown. The import itself is
app.runs.imports.nnunet.library.keep_imported (SegLens's models folder in the user's data, one import per folder).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

if TYPE_CHECKING:
    from app.ui.state.import_messages import ImportRequest

log = logging.getLogger(__name__)


class ImportWorker(QObject):
    step = Signal(object)  # ImportStep
    done = Signal(object)  # ImportDone
    failed = Signal(object)  # ImportFailed

    @Slot(object)
    def import_folder(self, request: ImportRequest) -> None:
        """Keep the folder's model; a refusal or any failure becomes one `failed` line (the thread lives on)."""
        from app.errors import SegLensError, one_line, unexpected_error_line
        from app.logs import log_exception
        from app.ui.state.import_messages import ImportFailed

        try:
            self._import(request)
        except SegLensError as exc:  # the importer's refusal: already one line naming the file
            self.failed.emit(ImportFailed(request.request_id, one_line(exc, most=400)))
        except Exception as exc:  # anything a library raises: one line, the traceback in the log
            log_exception(log, logging.ERROR, "import failed", exc)
            self.failed.emit(ImportFailed(request.request_id, unexpected_error_line(request.folder, exc)))

    def _import(self, request: ImportRequest) -> None:
        from app.runs.imports.nnunet.library import keep_imported
        from app.ui.state.import_messages import ImportDone, ImportStep

        rid = request.request_id
        kept = keep_imported(Path(request.folder), step=lambda line: self.step.emit(ImportStep(rid, line)))
        self.done.emit(ImportDone(rid, str(kept.model), kept.reused, kept.folds, len(kept.gaps)))
