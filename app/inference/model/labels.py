"""Class names from a labels file (the sidecar's `classes_file:`) and their short form for display. (Not the
instance label files a run writes, COCO and YOLO: those are app.runs.labels.)

A labels file is one of three formats, told apart by its content:
- a JSON list of strings (`["tench", "goldfish", ...]`): only when the whole file is one valid JSON list, so a
  lines file whose first label is `[unlabelled]` stays a lines file;
- CSV `index,name` rows (indices 0..N-1 in any order, each once; an optional `index,name` header row);
- otherwise one label per line, as written (trailing whitespace stripped, blank lines at the end ignored).
A name keeps everything it holds (`n01440764 tench, Tinca tinca`): reports show it whole, the viewer shortens it
with `display_name`. A control character in a name is refused (names reach CSV cells, column names, DICOM labels
and the terminal); lines end at `\n` (or `\r\n`) only, so a stray `\r` or `\x1c` is found, not taken for a
line break.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from app.inference.model.validators import control_character, read_at_most, visible

MAX_LABELS_BYTES = 10 << 20  # ImageNet-21k's ~22k synset lines take about 1 MB
MAX_LABELS = 100_000  # app.inference.model.builder.MAX_CLASSIFICATION_CLASSES: a model has no more classes than this
_WNID = re.compile(r"n\d{8}\s+(?=\S)")  # a WordNet synset id in front of a name: `n01440764 tench, ...`
_INDEX = re.compile(r"\s*\d+\s*")


def display_name(name: str) -> str:
    """The short name shown in the viewer: without a leading WordNet id, the first comma-separated synonym
    (`n01440764 tench, Tinca tinca` → `tench`); the name as it is when that would leave nothing."""
    rest = name[found.end():] if (found := _WNID.match(name)) else name
    first = rest.split(",", 1)[0].strip()
    return first or name


def read_labels(path: Path) -> tuple[str, ...]:
    """The class names in a labels file, index order; ValueError("<problem>") naming the file when it cannot be
    read or is not a list of names."""
    try:
        data = read_at_most(path, MAX_LABELS_BYTES)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if data is None:
        raise ValueError(f"{path}: too large (over {MAX_LABELS_BYTES >> 20} MiB)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    if "\x00" in text:
        raise ValueError(f"{path}: not text (it contains NUL bytes)")
    names = _parse(text, path)
    if not names:
        raise ValueError(f"{path}: holds no labels")
    if len(names) > MAX_LABELS:
        raise ValueError(f"{path}: {len(names)} labels; a model has at most {MAX_LABELS} classes")
    for number, name in enumerate(names, start=1):
        bad = control_character(name)
        if bad is not None:
            raise ValueError(f"{path}: label {number} holds a control character ({bad} in "
                             f"'{visible(name)[:60]}'); names go into reports and file names")
    return names


def _parse(text: str, path: Path) -> tuple[str, ...]:
    listed = _json_list(text)
    if listed is not None:
        return _json_names(listed, path)
    lines = [line.removesuffix("\r") for line in text.rstrip().split("\n")] if text.strip() else []
    body = lines[1:] if lines and _is_header(lines[0]) else lines
    if body and _INDEX.fullmatch(body[0].split(",", 1)[0]) and "," in body[0]:
        return _csv_names(body, path, first_line=len(lines) - len(body) + 1)
    return _line_names(lines, path)


def _json_list(text: str) -> list[Any] | None:
    """The file as a JSON list when the whole of it is one; None otherwise (then it is read as lines)."""
    if not text.lstrip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, list) else None


def _json_names(value: list[Any], path: Path) -> tuple[str, ...]:
    if not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{path}: a JSON labels file must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _is_header(line: str) -> bool:
    return [cell.strip().lower() for cell in line.split(",")] == ["index", "name"]


def _csv_names(lines: list[str], path: Path, *, first_line: int) -> tuple[str, ...]:
    """`index,name` rows; a name with commas may be quoted or not (the cells after the index are joined)."""
    by_index: dict[int, str] = {}
    for number, row in enumerate(csv.reader(lines), start=first_line):
        if len(row) < 2 or not _INDEX.fullmatch(row[0]) or not ",".join(row[1:]).strip():
            raise ValueError(f"{path}: line {number} is not `index,name`")
        index = int(row[0])
        if index in by_index:
            raise ValueError(f"{path}: line {number}: index {index} appears twice")
        by_index[index] = ",".join(row[1:]).strip()
    missing = next((i for i in range(len(by_index)) if i not in by_index), None)
    if missing is not None:
        raise ValueError(f"{path}: indices must be 0 to {len(by_index) - 1}, each once; {missing} is missing")
    return tuple(by_index[i] for i in range(len(by_index)))


def _line_names(lines: list[str], path: Path) -> tuple[str, ...]:
    names = tuple(line.rstrip() for line in lines)
    empty = next((number for number, name in enumerate(names, start=1) if not name.strip()), None)
    if empty is not None:
        raise ValueError(f"{path}: line {empty} is empty (one label per line)")
    return names
