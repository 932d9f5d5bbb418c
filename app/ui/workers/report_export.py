"""File ▸ Export review report: every listed image (and volume) through the model once more, on the inference worker;
the rows are app.runs.review_items' (which `seglens-cli report` shares), measured here against the viewer's
references, and app.runs.review_report writes the self-contained HTML file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from app.inference.tuning import with_score_limit
from app.io.discover import InputFile
from app.runs.review_items import Naming
from app.runs.review_items import report_items as review_rows
from app.runs.review_report import ReportItem
from app.ui.state.messages import ListedInput


def report_items(model, entries: Sequence[ListedInput | tuple], tuning, reviews: dict, *, references: dict,
                 min_confidence: float | None = None, should_stop: Callable[[], bool] = lambda: False,
                 anonymize: bool = False) -> list[ReportItem]:
    """A ReportItem per entry (a ListedInput, or (path, rel[, volume])); an input that cannot be read or run still
    gets its row (no picture), named relative to the input folder, or under `anonymize` by its pseudonym
    (app.runs.private_names, the workstation's key: the names Run on all and `run --anonymize` give it)."""
    from app.ui.workers.ground_truth import compare

    spec = with_score_limit(model.spec, tuning.score_limit)
    inputs = [_input(entry) for entry in entries]

    def metrics(item: InputFile, mask) -> dict[str, float] | None:
        scored, _ = compare(str(item.path), mask, tuning, spec, references)
        if scored is None or scored.metrics is None:
            return None
        return {"iou": scored.metrics.iou, "dice": scored.metrics.dice}

    root = Path(tuning.input_root) if tuning.input_root else Path(".")
    naming = Naming(root, anonymize=anonymize, key=_pseudonym_key() if anonymize else b"")
    return review_rows(model, inputs, spec=spec, reviews=reviews, naming=naming, min_confidence=min_confidence,
                       metrics=metrics, should_stop=should_stop)


def _input(entry: ListedInput | tuple) -> InputFile:
    if isinstance(entry, tuple):
        entry = ListedInput(*entry)
    return InputFile(Path(entry.path), Path(entry.rel), volume=entry.volume)


def _pseudonym_key() -> bytes:
    from app.runs.volume_run import pseudonym_key

    return pseudonym_key()


def default_report_name(_folder: Path) -> str:
    from app.runs.review_items import REPORT_NAME

    return REPORT_NAME
