"""The reference masks each image is compared with: a reference folder the reader chose, and the corrected masks
saved in the review folder (each one a new reference for its image)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

if TYPE_CHECKING:
    from app.runs.review.log import Correction
    from app.ui.controllers.reviewer import Reviewer
    from app.ui.controllers.tuner import Tuner
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.file_list import FileList
    from app.ui.widgets.status import StatusBar


class References(QObject):
    def __init__(self, state: ViewState, *, files: FileList, status: StatusBar, tuner: Tuner, reviewer: Reviewer,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._files = files
        self._status = status
        self._tuner = tuner
        self._reviewer = reviewer

    def set_folder(self, folder: str | Path | None) -> None:
        """Compare every image with its reference mask under `folder` (None: only saved corrections)."""
        self._tuner.tune(reference_root=str(folder) if folder else None)
        self._status.showMessage(f"Comparing with the reference masks in {folder}" if folder else
                                 "No reference folder: corrected masks only", 8000)

    def on_corrected(self, path: str, written: str) -> None:
        """The editor saved a corrected mask of `path` at `written`."""
        self._status.showMessage(f"Corrected mask saved: {written}", 8000, folder=Path(written).parent)
        self._reviewer.mark("corrected", path)
        self._tuner.tune(references=self._state.tuning.references + 1)  # the image has a new reference

    def destination(self, path: str, frame: int | None = None) -> Correction:
        """Where the correction of `path` (its slice `frame`; None: a one-frame picture) goes: the review folder of
        the inputs `path` was opened with, its relative path there, their folder."""
        from app.runs.review.log import Correction, review_folder

        root, rel = self._files.root_and_rel(path)
        return Correction(review_folder(root), rel, root, frame)
