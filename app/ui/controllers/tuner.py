"""The Tuner keeps the reader's decision settings — pixel threshold or minimum confidence, the verdict's score
limit, the layer shown — and the OK/REVIEW/NG badges of the file list in step with them.

A change asks the worker to decide and draw the picture shown again from its kept scores (`retune_requested`, no
model run); the answer comes back through `on_retuned`. The threshold and the score limit are remembered per model
(its SHA-256, app.ui.state.remembered) and start at the model's own values otherwise; each has a Reset back to them.
Badges come from the views the reader looked at and from Run on all; a new score limit re-judges all of them at
once from their scores, a new pixel threshold marks the others out of date until they are decided again (an
outline badge).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from app.ui.state import remembered

if TYPE_CHECKING:
    from PySide6.QtCore import QSettings

    from app.ui.controllers.presenter import Presenter
    from app.ui.state.messages import ViewResult
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.decision import DecisionControls, FolderScores
    from app.ui.widgets.file_list import FileList


class Tuner(QObject):
    retune_requested = Signal(object)  # messages.RetuneRequest, to the inference worker
    retuned_shown = Signal(object)  # path (str), once a retuned overlay is on screen

    def __init__(self, state: ViewState, *, presenter: Presenter, decision: DecisionControls, folder: FolderScores,
                 files: FileList, settings: QSettings, parent: QObject | None = None) -> None:
        """`decision`: the panel's threshold, layer and verdict; `folder`: its histogram after Run on all."""
        super().__init__(parent)
        self._state = state
        self._presenter = presenter
        self._decision = decision
        self._folder = folder
        self._files = files
        self._settings = settings
        self.model_sha256 = ""  # of the model loaded: the key of what is remembered for it
        decision.threshold_changed.connect(self._on_threshold)
        decision.layer_changed.connect(lambda layer: self.tune(layer=layer))
        decision.class_changed.connect(lambda index: self.tune(class_index=index))
        folder.limit_moved.connect(self._on_limit)
        folder.limit_reset.connect(lambda: self._on_limit(None))

    def model_ready(self, model_sha256: str, spec) -> None:
        """A new model (its file's SHA-256): its remembered threshold and score limit (or its own), the mask layer,
        no badges."""
        self.model_sha256 = model_sha256
        threshold = remembered.threshold(self._settings, model_sha256)
        limit = remembered.score_limit(self._settings, model_sha256)
        self._state.set_tuning(threshold=threshold, score_limit=limit, layer="mask", class_index=None)
        self._decision.set_model(spec, threshold)

    def tune(self, **changes) -> None:
        request = self._state.set_tuning(**changes)
        if request is not None:
            self.retune_requested.emit(request)
        if "score_limit" in changes or "threshold" in changes:
            self.rebadge()

    def ensure_tuned(self, view: ViewResult) -> bool:
        """True when `view` can be shown as it is; else its retune is asked for (shown when it comes back)."""
        request = self._state.retune(view)
        if request is None:
            return True
        self.retune_requested.emit(request)
        return False

    def on_retuned(self, view: ViewResult) -> None:
        if not self._state.keep(view):
            return
        self.judged(view)
        if not self._state.should_show_retuned(view.request_id, view):
            return
        on_screen = self._state.on_screen
        if on_screen is not None and on_screen.key == view.key:
            self._presenter.update_decision(view)
        else:
            self._presenter.display(view)
        self.retuned_shown.emit(str(view.path))

    def judged(self, view: ViewResult) -> None:
        """A view's verdict for the file list's badge (and its metrics, for sorting the list)."""
        self._state.measured(view)
        self._state.judged(str(view.path), view.judgement, view.tuning.threshold)
        self._badge(str(view.path))

    def judged_in_run(self, path: str, judgement, threshold: float | None) -> None:
        self._state.judged(path, judgement, threshold)
        self._badge(path)

    def rebadge(self) -> None:
        for path in self._state.judged_paths():
            self._badge(path)
        self._show_counts()

    def show_folder(self) -> None:
        """After Run on all: the histogram of the folder's scores with the verdict's score limit (dragged) and the
        REVIEW band's lower limit (drawn, fixed: a calibrated limit, set in the sidecar or by calibrate)."""
        from app.inference.decide.tuning import score_rule
        from app.inference.model.rules import ScoreRule

        spec = self._state.model.spec if self._state.model else None
        rule = score_rule(spec) if spec is not None else None
        limit = self._limit(rule)
        passed, review, rejected = self._counts()
        band = spec.review if spec is not None else ()  # verdict.review_if: the REVIEW band's rules
        low = next((r.score_above for r in band if isinstance(r, ScoreRule)), None)
        self._folder.show_scores(self._state.folder_scores(), limit, rule.inclusive if rule else True, passed,
                                 rejected, review=review, band=bool(band), review_limit=low)
        self._folder.show_limit(limit, own=self._state.tuning.score_limit is None)

    def _on_threshold(self, threshold: float | None) -> None:
        remembered.save_threshold(self._settings, self.model_sha256, threshold)
        self.tune(threshold=threshold)

    def _on_limit(self, limit: float | None) -> None:
        """The histogram's line dragged to `limit`, or Reset (None: the model's own)."""
        remembered.save_score_limit(self._settings, self.model_sha256, limit)
        self.tune(score_limit=limit)

    def _limit(self, rule) -> float | None:
        if rule is None:
            return None
        return self._state.tuning.score_limit if self._state.tuning.score_limit is not None else rule.score_above

    def _badge(self, path: str) -> None:
        verdict, stale = self._state.badge(path)
        self._files.set_verdict(path, verdict, stale=stale)

    def _counts(self) -> tuple[int, int, int]:
        """(OK, REVIEW, NG) among the judged files at the limits in force: REVIEW is neither passed nor rejected."""
        verdicts = [self._state.badge(path)[0] for path in self._state.judged_paths()]
        states = [v.state for v in verdicts if v is not None]
        return states.count("OK"), states.count("REVIEW"), states.count("NG")

    def _show_counts(self) -> None:
        from app.inference.decide.tuning import score_rule

        rule = score_rule(self._state.model.spec) if self._state.model else None
        passed, review, rejected = self._counts()
        self._folder.follow_limit(self._limit(rule), passed, rejected, own=self._state.tuning.score_limit is None,
                                  review=review)
