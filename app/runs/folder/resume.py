"""--resume: what an earlier run into the same folder finished, read back from its report (or the `.partial` a
killed run left): the rows of inputs whose outputs are all on disk and whole, carried into this run's report in
its columns, and the rows of inputs not in this run, kept. A report made with other columns (another model,
other metric columns) is not read; the run record's check (app.runs.outputs.provenance.resume_problem) comes first.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from app.guard.untrusted import read_untrusted
from app.inference.image.pipeline import STAGES
from app.inference.model.spec import ModelSpec
from app.io.discover import InputFile, output_stems
from app.io.files import is_complete_png
from app.runs.outputs.report import cell, path_text, report_columns


def finished_earlier(report: Path, spec: ModelSpec, inputs: Sequence[InputFile], *, out_dir: Path,
                     save: Sequence[str], exports: Sequence[str] | None = None,
                     extra_columns: Sequence[str] | None = None,
                     names: tuple[Sequence[Path], Sequence[str]] | None = None) -> dict[str, list[str]]:
    """--resume: report rows of `inputs` an earlier run finished into `out_dir`, keyed by path (read before the
    report is rewritten); an input whose `save` outputs (a volume: its `exports`) are not all on disk is run
    again. `extra_columns`: the report's extra columns when they are not the volume columns alone (a Ray run's
    `node`). `names`: the inputs' (output stems, report paths) when they are not their own (--anonymize)."""
    from app.runs.folder.volume3d import SCORES_SUFFIX
    from app.runs.folder.volumes import volume_columns, volume_outputs

    volumes = {str(item.path): item.volume for item in inputs if item.volume is not None}
    run_stems, shown = names or (output_stems(list(inputs)), [path_text(item.path) for item in inputs])
    stems = {text: (str(item.path), out_dir / stem) for item, stem, text in zip(inputs, run_stems, shown, strict=True)}
    # two inputs with the same report text cannot be told apart (`b\xe9` as four characters and as a byte, `=x`
    # and `'=x`): both are run again
    ambiguous = {text for text, n in Counter(shown).items() if n > 1}
    wanted = [kind for kind in save if spec.task in ("segmentation", "instances") and kind not in ("coco", "yolo")]

    def outputs_of(path: Path) -> list[Path]:
        text = str(path)
        if text not in stems or text in ambiguous:
            return [Path("/nonexistent/not-an-input")]
        stem = stems[text][1]
        if stems[text][0] in volumes:
            volume = volumes[stems[text][0]]
            scores = [stem.with_name(stem.name + SCORES_SUFFIX)] if spec.is_3d and "scores" in save and \
                volume.affine is not None else []  # a 3D model's --save scores NIfTI (app.runs.folder.volumes)
            return [*volume_outputs(volume, spec, stem, exports), *scores]
        return [stem.with_name(f"{stem.name}_{kind}.png") for kind in wanted]

    if extra_columns is None:
        extra_columns = volume_columns(spec) if volumes else ()
    rows = finished_rows(report, report_columns(spec, extra_columns), outputs_of)
    return {stems[text][0]: row for text, row in rows.items() if text in stems}  # keyed by the input's str(path)


def rows_of_others(report: Path, spec: ModelSpec, inputs: Sequence[InputFile], *,
                   extra_columns: Sequence[str] = (), names: Sequence[str] | None = None) -> list[list[str]]:
    """--resume of a subset: the earlier report's rows of inputs not in this run, in its order and this report's
    columns, to be written after this run's (a run of one file of the folder kept that file's row alone, and the
    others' finished rows were lost). `names`: the inputs' report paths when they are not their own."""
    shown = set(names if names is not None else (path_text(item.path) for item in inputs))
    columns = report_columns(spec, extra_columns)
    kept: dict[str, list[str]] = {}
    for candidate in (report.with_name(report.name + ".partial"), report):  # the report's row wins, as above
        rows = _read_report(candidate)
        if not rows or (plan := _carry_plan(rows[0], columns)) is None:
            continue
        for row in rows[1:]:
            if len(row) == len(rows[0]) and row[0] not in shown:
                kept[row[0]] = [row[i] if i is not None else "" for i in plan]
    return list(kept.values())


def has_columns(report: Path, columns: Sequence[str]) -> bool:
    """Whether the earlier report (or its `.partial`) has every one of `columns`: a --resume of only the images of
    a run that had volumes keeps the volume columns, so the volumes' rows can stay (`rows_of_others`)."""
    wanted = {cell(c) for c in columns}
    for candidate in (report.with_name(report.name + ".partial"), report):
        rows = _read_report(candidate)
        if rows and wanted <= set(rows[0]):
            return True
    return False


def finished_rows(report: Path, columns: list[str], outputs_of: Callable[[Path], list[Path]]) -> dict[str, list[str]]:
    """Rows of inputs an earlier run finished (status ok, outputs on disk), from its report or `.partial`.

    `outputs_of(path)` lists the PNGs an input must have; a row whose files are missing, empty or cut short
    (app.io.files.is_complete_png) is run again. A report
    written with other columns (another model) is ignored.
    """
    done: dict[str, list[str]] = {}
    for candidate in (report.with_name(report.name + ".partial"), report):
        rows = _read_report(candidate)
        if not rows or (plan := _carry_plan(rows[0], columns)) is None:
            continue
        for row in rows[1:]:
            if len(row) == len(rows[0]) and row[1] == "ok" and _outputs_complete(outputs_of(Path(row[0]))):
                done[row[0]] = [row[i] if i is not None else "" for i in plan]  # in this report's columns
    return done


# Columns that say where and how fast a row was made, never what it says: a `--ray` report has `node`, a local one
# has not. --resume carries a row whichever of these its report had (a missing one is left empty).
REPORT_LIMIT = 1 << 30  # an earlier report: a million rows of a few hundred bytes each

INFORMATIONAL_COLUMNS = frozenset({"node", *(f"{stage}_ms" for stage in STAGES)})


def _carry_plan(header: list[str], columns: list[str]) -> list[int | None] | None:
    """For each of `columns`, where it is in an earlier report's `header` (None: an informational column that
    report lacks); None when the two differ in anything else (another model, other metric columns)."""
    wanted = [cell(c) for c in columns]
    if [c for c in header if c not in INFORMATIONAL_COLUMNS] != [c for c in wanted if c not in INFORMATIONAL_COLUMNS]:
        return None
    where = {name: i for i, name in enumerate(header)}
    return [where.get(name) for name in wanted]


def _read_report(path: Path) -> list[list[str]] | None:
    """The rows of an earlier report, or None if it is not a readable regular file of ours.

    Read through app.guard.untrusted, rooted in its folder: not through a symlink (a planted `.partial` could
    point anywhere, /dev/full reads as endless zeros), not a FIFO or device (refused without blocking), at most
    REPORT_LIMIT bytes, so --resume can neither hang nor read a stranger's file.
    """
    try:
        text = read_untrusted(path, limit=REPORT_LIMIT, root=path.parent).decode("utf-8")
        return list(csv.reader(io.StringIO(text, newline="")))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def _outputs_complete(paths: list[Path]) -> bool:
    """Every output there and whole: a PNG decodable to its end, a volume export a non-empty file or folder."""
    return all(is_complete_png(path) if path.suffix == ".png" else
               (path.is_dir() or (path.is_file() and path.stat().st_size > 0)) for path in paths)
