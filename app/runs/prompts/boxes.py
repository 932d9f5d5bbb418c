"""A detector's boxes into masks for a whole folder: `boxes.csv` (file,x0,y0,x1,y1[,class]) through a prompt
model (or grabCut), one label PNG per image, each image encoded once however many boxes it has.

A bad row is one line naming the CSV's row and what is wrong with it; the other rows go on. Each mask is written
atomically (a temporary file renamed into place): an interrupted run leaves no half-written PNG.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.errors import SegLensError, error_line, one_line
from app.guard.untrusted import read_untrusted, untrusted_problem
from app.inference.prompt.request import Box, PromptModel
from app.io.files import atomic_write, encode_png

MAX_ROWS = 1_000_000  # a boxes file beyond this is not a detector's output for one folder
MAX_BYTES = 256 << 20  # read whole: checked before
MASK_SUFFIX = "_mask.png"
_HEADER = ("file", "x0", "y0", "x1", "y1")


@dataclass(frozen=True)
class BoxRow:
    """One row of boxes.csv: its line number, the image (relative to the folder), the box, its class value."""

    line: int
    file: str
    box: Box
    value: int  # the mask value painted for this box (its class)


@dataclass(frozen=True)
class BoxesFile:
    rows: tuple[BoxRow, ...]
    problems: tuple[str, ...]  # one line per bad row
    class_names: dict[str, int]  # class names as written -> their mask value (numbered in order of appearance)


@dataclass(frozen=True)
class PromptRunResult:
    written: tuple[Path, ...]
    problems: tuple[str, ...]
    boxes_done: int
    class_names: dict[str, int]


def read_boxes(path: Path) -> BoxesFile:
    """Parse boxes.csv; a header row (file,x0,…) is optional. A class is a number 1-255 (the mask value) or a
    name (numbered after the largest such number, in order of first appearance); none means 1."""
    problem = untrusted_problem(path)  # a FIFO would block the read; a folder is no CSV
    if problem is not None:
        raise SegLensError(f"{path}: {'boxes file not found' if problem == 'file not found' else problem}")
    if path.stat().st_size > MAX_BYTES:
        raise SegLensError(f"{path}: the boxes file is over {MAX_BYTES >> 20} MiB: split it")
    raw: list[tuple[int, list[str]]] = []
    try:
        # a byte that is not UTF-8 (a detector on Windows writing `é` in Latin-1) is kept as a surrogate and refuses
        # its own row only (_row): one bad file name does not lose every other box
        text = read_untrusted(path, limit=MAX_BYTES).decode("utf-8", "surrogateescape").removeprefix("\ufeff")
        for n, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
            if any(c.strip() for c in row):
                raw.append((n, row))
            if len(raw) > MAX_ROWS + 1:  # + a header; refused before every row is held (GBs of lists)
                raise SegLensError(f"{path}: over {MAX_ROWS} rows: split the boxes file")
    except (OSError, csv.Error) as exc:
        raise SegLensError(f"{path}: cannot read the boxes file ({one_line(exc)})") from exc
    if raw and _is_header(raw[0][1]):
        raw = raw[1:]
    if len(raw) > MAX_ROWS:
        raise SegLensError(f"{path}: over {MAX_ROWS} rows: split the boxes file")
    if not raw:  # an empty detector output is said, not a silent "0 masks"
        return BoxesFile((), (f"{path}: no boxes: expected rows file,x0,y0,x1,y1[,class]",), {})
    numbers = [v for _, row in raw if len(row) > 5 and (v := _class_number(row[5].strip())) is not None]
    valid = [n for n in numbers if 1 <= n <= 255]  # a bad row's 300 does not push every name past 255
    names: dict[str, int] = {}
    rows, problems = [], []
    for line, row in raw:
        try:
            rows.append(_row(line, row, names, first_name=max(valid, default=1) + 1))
        except ValueError as exc:
            problems.append(f"{path}: row {line}: {exc}")
    return BoxesFile(tuple(rows), tuple(problems), names)


def _is_header(row: list[str]) -> bool:
    """`file,x0,y0,x1,y1` or a detector's own words (`filename,xmin,ymin,xmax,ymax`): four coordinate cells that
    are all words, none a number (one bad number among numbers is a bad row, said)."""
    cells = [c.strip() for c in row]
    if tuple(c.lower() for c in cells[:5]) == _HEADER:
        return True
    return len(cells) in (5, 6) and all(c and not _is_number(c) for c in cells[1:5])


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _row(line: int, row: list[str], names: dict[str, int], *, first_name: int) -> BoxRow:
    undecodable = _undecodable(row)
    if undecodable:
        raise ValueError(undecodable)
    cells = [c.strip() for c in row]
    if len(cells) not in (5, 6):
        raise ValueError(f"expected file,x0,y0,x1,y1[,class], got {len(cells)} column{'s' * (len(cells) != 1)}")
    file = cells[0]
    relative = Path(file)
    if "\x00" in file:  # os.stat raises ValueError on it: no file has such a name
        raise ValueError(f"the file {file!r} has a NUL in its name: no file has")
    if not file or relative.anchor or ".." in relative.parts:
        raise ValueError(f"the file {file!r} must be a path inside the folder (relative, without '..')")
    corners = []
    for name, cell in zip(("x0", "y0", "x1", "y1"), cells[1:5], strict=True):
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{name} {cell!r} is not a number")
        corners.append(value)
    # one image however its name is spelled ("./a.png", "sub//a.png"): its rows grouped, encoded once
    return BoxRow(line, relative.as_posix(), Box(*corners),
                  _class_value(cells[5] if len(cells) == 6 else "", names, first_name))


def _undecodable(row: list[str]) -> str:
    """Why a row read with `surrogateescape` is not UTF-8 text (`not UTF-8 text (byte 0xE9 in column 1): …`), or
    ""."""
    for column, cell in enumerate(row, start=1):
        bad = next((c for c in cell if "\udc80" <= c <= "\udcff"), None)
        if bad is not None:
            return (f"not UTF-8 text (byte 0x{ord(bad) - 0xDC00:02X} in column {column}): save the boxes file as "
                    "UTF-8")
    return ""


def _class_number(text: str) -> int | None:
    """A class cell as a number (ASCII digits only: str.isdigit takes '²', which int() refuses; a number of
    thousands of digits is just too large), None for a name."""
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text) if len(text) <= 9 else 10**9


def _class_value(text: str, names: dict[str, int], first_name: int) -> int:
    if not text:
        return 1
    number = _class_number(text)
    if number is not None:
        if not 1 <= number <= 255:
            shown = text if len(text) <= 12 else f"{text[:12]}…"
            raise ValueError(f"class {shown} is not a mask value from 1 to 255")
        return number
    if all(c.isnumeric() for c in text):  # '²', '٣': a number to the eye, none to a mask; no name either
        raise ValueError(f"class {text!r} is not a mask value from 1 to 255 or a name")
    if text not in names:
        if first_name + len(names) > 255:
            raise ValueError(f"class {text!r} would be the 256th: a mask PNG holds classes 1 to 255")
        names[text] = first_name + len(names)
    return names[text]


def mask_path(out: Path, file: str) -> Path:
    """Where an image's mask goes: its relative path under `out`, `<stem>_mask.png` (never the image itself)."""
    relative = Path(file)
    return out / relative.parent / f"{relative.stem}{MASK_SUFFIX}"


def run_boxes(model: PromptModel, boxes: Path, folder: Path, out: Path, *,
              on_line: Callable[[str], None] | None = None) -> PromptRunResult:
    """Every image named in `boxes` (relative to `folder`) → a label mask under `out`: each box's mask painted
    with its class value, later rows over earlier ones. `on_line` hears each problem as it happens."""
    parsed = read_boxes(boxes)
    problems = list(parsed.problems)
    say = on_line or (lambda _line: None)
    for line in problems:
        say(line)
    by_file: dict[str, list[BoxRow]] = {}
    for row in parsed.rows:
        by_file.setdefault(row.file, []).append(row)
    written: list[Path] = []
    done = 0
    inputs = {(folder / file).resolve() for file in by_file}
    claimed: dict[Path, BoxRow] = {}  # a mask path -> the first row of the image it is for
    for file, rows in by_file.items():
        image_path = folder / file
        first = claimed.setdefault(mask_path(out, file).resolve(), rows[0])
        if first.file != file:  # a.png and a.jpg: one <stem>_mask.png, the later would replace the earlier
            lines = ", ".join(str(r.line) for r in rows)
            problems.append(f"{boxes}: row{'s' * (len(rows) > 1)} {lines}: {file}: its mask "
                            f"{mask_path(out, file)} is {first.file}'s (row {first.line}): not written; rename "
                            "one of the two images")
            say(problems[-1])
            continue
        try:
            pixels = _picture(image_path, file)
        except SegLensError as exc:
            lines = ", ".join(str(r.line) for r in rows)
            problems.append(f"{boxes}: row{'s' * (len(rows) > 1)} {lines}: {error_line(image_path, exc)}")
            say(problems[-1])
            continue
        if isinstance(pixels, str):
            lines = ", ".join(str(r.line) for r in rows)
            problems.append(f"{boxes}: row{'s' * (len(rows) > 1)} {lines}: {pixels}")
            say(problems[-1])
            continue
        target = mask_path(out, file)
        if target.resolve() in inputs:  # `a.png` and `a_mask.png` both listed, --out the images' folder
            problems.append(f"{boxes}: row {rows[0].line}: {target} would overwrite an input image: choose "
                            "another --out")
            say(problems[-1])
            continue
        label, painted = _paint(model, pixels, rows, boxes, problems, say)
        if painted:
            try:  # atomic_write makes the folder, an OSError its one line (a file where the folder goes)
                atomic_write(target, encode_png(label))
            except SegLensError as exc:
                problems.append(f"{boxes}: row{'s' * (len(rows) > 1)} {', '.join(str(r.line) for r in rows)}: {exc}")
                say(problems[-1])
                continue
            written.append(target)
            done += painted  # boxes in a written mask
    return PromptRunResult(tuple(written), tuple(problems), done, parsed.class_names)


def _picture(path: Path, file: str) -> np.ndarray | str:
    """The image's pixels as the viewer shows them, or why a box cannot be drawn on it: a volume or a multi-frame
    file (read_image gives its first slice, which a detector's box may not be of)."""
    from app.io.images import read_image
    from app.io.volumes import is_volume_file

    if is_volume_file(path):
        from app.io.nifti import nifti_volume

        depth = nifti_volume(path).depth
        if depth > 1:
            return (f"{file} is a volume of {depth} slices: a boxes file prompts 2-D images (a volume's slice: "
                    "seglens-cli prompt MODEL VOLUME --slice K --box …)")
    image = read_image(path)
    if image.frame_count > 1:
        return (f"{file} has {image.frame_count} frames: a boxes file prompts 2-D images (a volume's slice: "
                "seglens-cli prompt MODEL VOLUME --slice K --box …)")
    return image.display()


def _paint(model: PromptModel, pixels: np.ndarray, rows: list[BoxRow], boxes: Path, problems: list[str],
           say: Callable[[str], None]) -> tuple[np.ndarray, int]:
    """The image's label mask and how many of its boxes made it (the image encoded once for all of them)."""
    label = np.zeros(pixels.shape[:2], np.uint8)
    try:
        embedding = model.embed(pixels)
    except SegLensError as exc:
        lines = ", ".join(str(r.line) for r in rows)
        problems.append(f"{boxes}: row{'s' * (len(rows) > 1)} {lines}: {rows[0].file}: {exc}")
        say(problems[-1])
        return label, 0
    painted = 0
    for row in rows:
        try:
            proposal = model.decode(embedding, box=row.box)
        except SegLensError as exc:
            problems.append(f"{boxes}: row {row.line}: {row.file}: {exc}")
            say(problems[-1])
            continue
        label[proposal.mask] = row.value
        painted += 1
    return label, painted
