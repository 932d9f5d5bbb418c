"""The CSV report, the one writer of it: its columns, its rows, and the rule every text cell follows (also used by
the compare and metrics CSVs and the review log: `path_text`, `formula_safe`).

The report is written as it goes to
`<name>.partial` (a new file of its own, never one planted under that name: `_open_partial`) and renamed when
complete. Every row has exactly one value per column.

The report is UTF-8. A file name is bytes on POSIX and need not be valid UTF-8: its undecodable bytes are
written as backslash escapes (`b\\xe9.png` for the byte 0xE9; a file literally named `b\\xe9.png` is written
`b\\\\xe9.png`, so the two never share a row), control characters too (`\\x09` for a TAB), so the report never
fails on a name and still says which file a row is about; --resume matches rows by the same text.

A text cell (path, error, class name, header) that starts with `=`, `+`, `-`, `@`, a tab or a carriage return
would run as a formula in Excel or LibreOffice (a file named `=HYPERLINK(…).png`, a class named `=cmd|…`):
it is written with a leading `'` (the OWASP CSV-injection rule), which spreadsheets show as text. A cell that
is a plain number (`-1.500000`, a logit) is left as it is.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from app.errors import OutputError, spelt
from app.guard.shared import PlantedLink, open_fresh, rename_under
from app.inference.decide.verdict import Verdict, image_score, uncertainty, verdict_of
from app.inference.image.pipeline import STAGES, Result
from app.inference.image.postprocess import Prediction
from app.inference.model.instances import Instances
from app.inference.model.spec import ModelSpec
from app.io.files import atomic_write

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _task_columns(spec: ModelSpec) -> tuple[list[str], list[str]]:
    """(per-class, top-k) column names: one pixel column per class (an instance model: a count and a best-score
    column per class), no more top-k than classes."""
    if spec.task == "instances":
        counts = unique_names([f"count_{name}" for name in spec.class_names], reserved=set())
        return [*counts, *unique_names([f"max_score_{name}" for name in spec.class_names], reserved=set(counts))], []
    classes = unique_names([f"pixels_{name}" for name in spec.class_names], reserved={"pixels_other"})
    k = min(spec.postprocess.top_k, spec.label_count)
    return classes, [c for i in range(1, k + 1) for c in (f"top{i}", f"top{i}_score")]


# after `height`: the image's score, ok/review/ng (empty without a `verdict` section) and the first rule that fired
VERDICT_COLUMNS = ("score", "verdict", "verdict_reason")


def report_columns(spec: ModelSpec, extra: Sequence[str] = ()) -> list[str]:
    """The report's header; `extra` (the metric columns of `--reference`) go after the per-task columns."""
    classes, top = _task_columns(spec)
    per_task = top if spec.task == "classification" else classes if spec.task == "instances" else \
        [*classes, "pixels_other"]
    return ["path", "status", "task", "provider", "width", "height", *VERDICT_COLUMNS, *per_task, *extra,
            *(f"{stage}_ms" for stage in STAGES), *TRAILING_COLUMNS]


# the last columns of every report row, after the timings (a Ray run puts its `node` column before the timings)
TRAILING_COLUMNS = ("warning", "error")



class ReportWriter:
    """The CSV report: one row per input, written as it goes to `<name>.partial`, renamed when closed."""

    def __init__(self, path: Path, spec: ModelSpec, *, extra_columns: Sequence[str] = ()) -> None:
        self.path = path
        self.spec = spec
        self._partial = path.with_name(path.name + ".partial")
        self._class_columns, self._topk_columns = _task_columns(spec)
        self._extra = len(extra_columns)
        self._columns = report_columns(spec, extra_columns)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file, self._identity = _open_partial(self._partial)
        except OSError as exc:
            raise OutputError(f"{path}: cannot write the report ({exc.strerror or exc})") from exc
        self._csv = csv.writer(self._file)
        self._row(self.columns)

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    def add_result(self, path: Path | str, result: Result, *, verdict: Verdict | None = None,
                   extra: Sequence[str] = ()) -> None:
        """A result's row; `verdict` as the run decided it (decided here from the spec when not given); `extra`
        the values of the extra columns (empty when not given). Without a verdict, an uncertain classification is
        still said so in `verdict_reason`."""
        if verdict is None:
            verdict = verdict_of(self.spec, result)
        doubt = uncertainty(result.predictions, self.spec) if verdict is None else None
        self.add_counts(path, task=result.task, provider=result.provider, hw=result.image_hw,
                        score=image_score(result), verdict=verdict, values=self._task_values(result),
                        extra=extra, timings=result.timings, reason=doubt.reason if doubt else "",
                        warning="; ".join(result.warnings))

    def add_counts(self, path: Path | str, *, task: str, provider: str, hw: tuple[int, int], score: float | None,
                   verdict: Verdict | None, values: Sequence[Any], extra: Sequence[str], timings: Mapping[str, float],
                   reason: str = "", warning: str = "") -> None:
        """A row from its parts: a result's (add_result), a volume's or one of its slices' (app.runs.folder.volumes,
        `values` from `count_values`); `reason`: the verdict_reason of a row without a verdict; `warning`: why
        the image does not fit the model (app.inference.image.fit), the run goes on."""
        extra = list(extra) or [""] * self._extra
        judged = ["" if score is None else f"{score:.6f}",
                  "" if verdict is None else verdict.cell,
                  reason if verdict is None else verdict.reason]
        self._row([str(path), "ok", task, provider, hw[1], hw[0], *judged, *values, *extra,
                   *(f"{timings.get(stage, 0.0):.2f}" for stage in STAGES), warning, ""])

    def add_error(self, path: Path | str, message: str, *, provider: str = "", status: str = "error") -> None:
        """An input without a result: no size, score, verdict, counts or timings; the message last."""
        blanks = [""] * (len(self._columns) - 8 - len(STAGES))  # verdict, task and extra columns, after `height`
        self._row([str(path), status, self.spec.task, provider, "", "", *blanks, *[""] * len(STAGES), "",
                   message])

    def _task_values(self, result: Result) -> list[Any]:
        """Exactly one value per task column, whatever the model returned: a model may give more scores than
        there are top-k columns, and a mask counts at most 256 label values however many classes there are."""
        if self.spec.task == "classification":
            return self.prediction_values(result.predictions)
        if self.spec.task == "instances":
            return self.instance_values(result.instances)
        return self.count_values(result.class_pixels())

    def instance_values(self, instances: Instances | None) -> list[Any]:
        """The instance columns' values: the objects found per class, then each class's best score (empty where
        the class has none), by class index (two classes may share a name)."""
        classes = len(self._class_columns) // 2
        counts, best = [0] * classes, [""] * classes
        for item in instances.items if instances is not None else ():
            if 0 <= item.class_index < classes:
                counts[item.class_index] += 1
                if best[item.class_index] == "" or item.score > float(best[item.class_index]):
                    best[item.class_index] = f"{item.score:.6f}"
        return [*counts, *best]

    def prediction_values(self, predictions: Sequence[Prediction]) -> list[Any]:
        """The top-k columns' values: name and score of each prediction, best first, blanks after."""
        values: list[Any] = []
        for p in predictions[: len(self._topk_columns) // 2]:
            values += [p.name, f"{p.score:.6f}"]
        return values + [""] * (len(self._topk_columns) - len(values))

    def count_values(self, counts: np.ndarray) -> list[Any]:
        """The per-class columns' values from pixel (or voxel) counts per label value."""
        known = len(self._class_columns)
        per_class = [int(c) for c in counts[:known]]
        return [*per_class, *[0] * (known - len(per_class)), int(counts[known:].sum())]

    def add_row(self, values: list[Any]) -> None:
        """A row of cells as they stand (carried over from an earlier report by --resume, or a Ray node's): not
        spelt again (`spelt` is one-to-one, so it cannot leave its own output unchanged)."""
        self._row(values, cells=True)

    def _row(self, values: list[Any], *, cells: bool = False) -> None:
        if len(values) != len(self._columns):  # a shifted row would put every later value under the wrong name
            raise ValueError(f"a report row of {len(values)} values for {len(self._columns)} columns")
        self._csv.writerow(values if cells else [cell(v) if isinstance(v, str) else v for v in values])
        self._file.flush()

    def close(self, *, complete: bool = True) -> None:
        """Close; a complete report takes its final name, an interrupted one keeps `.partial`."""
        if self._file.closed:
            return
        try:
            self._file.close()
            if complete:
                self._take_final_name()
        except OSError as exc:
            raise OutputError(f"{self._partial}: cannot finish the report ({exc.strerror or exc})") from exc

    def _take_final_name(self) -> None:
        if _identity(os.lstat(self._partial)) != self._identity:  # never move someone else's file into place
            raise OutputError(f"{self._partial}: the report was replaced by another file while it was written")
        # replaces a file or symlink at `path`, never writes through it
        rename_under(self.path.parent, self._partial.name, self.path.name)

    def __enter__(self) -> ReportWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(complete=exc_type is None)


class RowsReport(ReportWriter):
    """The report's rows kept in memory, each cell as the CSV would write it: a Ray actor's chunk
    (app.runs.cluster.run), whose rows the driver writes into the real report in input order."""

    def __init__(self, spec: ModelSpec, *, extra_columns: Sequence[str] = ()) -> None:  # no file: no super()
        self.path, self.spec = None, spec  # type: ignore[assignment]  # no file: nothing here reads it
        self._class_columns, self._topk_columns = _task_columns(spec)
        self._extra = len(extra_columns)
        self._columns = report_columns(spec, extra_columns)
        self.rows: list[list[str]] = []

    def _row(self, values: list[Any], *, cells: bool = False) -> None:
        if len(values) != len(self._columns):
            raise ValueError(f"a report row of {len(values)} values for {len(self._columns)} columns")
        self.rows.append([v if cells and isinstance(v, str) else cell(v) if isinstance(v, str) else
                          "" if v is None else str(v) for v in values])

    def close(self, *, complete: bool = True) -> None:
        pass


def _open_partial(partial: Path) -> tuple[IO[str], tuple[int, int]]:
    """The report's `.partial`, new and ours: (text file open for appending, its identity).

    Opening `.partial` by name would write through whatever is there (a planted symlink to another file, or to
    /dev/full): app.guard.shared.open_fresh creates it under a temporary name and renames it over `.partial`.
    The rows then go to `.partial` as before, so an interrupted run leaves it for --resume.
    """
    try:
        raw, identity = open_fresh(partial)
    except PlantedLink:
        raise OutputError(f"{partial}: replaced by another file while the report was being created") from None
    # `_cell` made every cell encodable; backslashreplace is the net under it, never an abort
    return io.TextIOWrapper(raw, newline="", encoding="utf-8", errors="backslashreplace"), identity


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def write_table(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """A whole CSV written at once (atomically) with the report's cell rule: compare's seglens_compare.csv and
    --reference's seglens_metrics*.csv. The report itself is written as it goes (ReportWriter)."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    for row in [list(header), *rows]:
        writer.writerow([path_text(v) if isinstance(v, str) else v for v in row])
    atomic_write(path, buffer.getvalue().encode("utf-8"))
    return path


def path_text(path: Path | str) -> str:
    """How the report writes a path (undecodable bytes escaped, a formula neutralised: the module docstring)."""
    return cell(str(path))


def cell(text: str) -> str:
    """A text cell as written: valid UTF-8 without losing anything and one-to-one (app.errors.spelt: bytes a file
    name could not decode become `\\xNN`, a control character (a TAB or ESC in a file name) `\\xNN` / `\\uNNNN` —
    a cell holds none raw —, a backslash that would read as an escape `\\\\`), never a live spreadsheet formula.
    Made once per value: a cell read back from a report is written as it stands (`ReportWriter.add_row`)."""
    return formula_safe(spelt(text))


def formula_safe(text: str) -> str:
    """`text` (already spelt) never a live spreadsheet formula: a leading `'` where it would run as one."""
    if text.startswith(_FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def unique_names(names: list[str], *, reserved: set[str]) -> list[str]:
    """Column names made distinct (two classes may share a name): `pixels_a`, `pixels_a_2`…"""
    taken, result = set(reserved), []
    for name in names:
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name}_{n}", n + 1
        taken.add(candidate)
        result.append(candidate)
    return result
