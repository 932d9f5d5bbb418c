"""The review log: a person's judgement of the model's result per image (accepted = the result is correct,
rejected = it is wrong, corrected = the mask was corrected), kept next to the inputs.

`seglens_review.csv` lives in the review folder (`<inputs>_review`, a sibling of the input folder) and is rewritten
whole and atomically (temp file + rename, app.io.files.atomic_write) after every change: a crash loses at most the
change in flight, never the file. Every row carries the SHA-256 of the model whose output was reviewed; rows of
another model are kept in the file (a rewrite never drops them) but never shown as this model's review.

Text cells that a spreadsheet would run as a formula are written with a leading `'` (app.runs.outputs.report's rule),
reversibly: a cell read back is the text that was set, whatever quotes it started with.
"""

from __future__ import annotations

import csv
import getpass
import io
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import numpy as np

from app.errors import SegLensError, spelt
from app.guard.shared import remove_under
from app.guard.untrusted import STATE_FILE_LIMIT, read_untrusted
from app.io.discover import safe_name
from app.io.files import atomic_write, encode_png, png_text, png_with_text
from app.runs.outputs.report import formula_safe

STATES = ("unreviewed", "accepted", "rejected", "corrected")
# what a state says to a reader: the reviewer judges the model's result, not the part ("accepted" beside "NG" read
# as a part let through); the stored values stay, so older logs read the same
STATE_NAMES = {"unreviewed": "not reviewed", "accepted": "result correct", "rejected": "result wrong",
               "corrected": "mask corrected"}
REVIEW_FILE = "seglens_review.csv"
COLUMNS = ("file", "state", "note", "who", "when", "model_sha256")
MASK_MARK = "SegLens-corrected-mask"  # PNG text key: this file is a corrected mask SegLens wrote (may be replaced)
MASK_FRAME = "SegLens-corrected-slice"  # PNG text key: the slice (1-based) of a volume the correction is of


class ReviewError(SegLensError):
    """The review log or a corrected mask cannot be read or written: one line naming the file."""


def review_folder(input_root: Path) -> Path:
    """Where reviews and corrected masks of the images under `input_root` go: a sibling folder
    `<input_root.name>_review` (never inside the inputs, never the outputs folder); for inputs inside SegLens's
    own install (the bundled samples) or beside which nothing can be written, a folder in the user's data folder
    instead (user_review_folder). Not created here."""
    root = Path(os.path.abspath(input_root))  # "." has no name; abspath keeps a symlinked root's own name
    if not root.name:
        raise ReviewError(f"{root}: a review folder needs an input folder with a name, not a file-system root")
    beside = root.parent / f"{root.name}_review"
    if _inside_install(root) or not os.access(beside if beside.is_dir() else root.parent, os.W_OK):
        return user_review_folder(root)
    return beside


def user_review_folder(root: Path) -> Path:
    """`<user data>/SegLens/reviews/<name>_<8 hex of the folder's path>_review`: one per input folder, so two
    folders of the same name keep their reviews apart."""
    import hashlib

    from platformdirs import user_data_dir

    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:8]
    return Path(user_data_dir("SegLens", appauthor=False)) / "reviews" / f"{root.name}_{digest}_review"


def _inside_install(root: Path) -> bool:
    """Whether `root` lies in what SegLens installs (the frozen bundle; a clone's resources/ and models/):
    reviewing the bundled samples must not write into the program's folder (read-only for a user, replaced by the
    next install, and in a clone a change to tracked files)."""
    import sys

    from app.paths import install_root, models_dir

    installed = [install_root()] if getattr(sys, "_MEIPASS", None) else [install_root() / "resources", models_dir()]
    real = Path(os.path.realpath(root))
    return any(real.is_relative_to(os.path.realpath(folder)) for folder in installed)


@dataclass(frozen=True)
class Review:
    rel: str  # the image's path relative to the input root, POSIX separators (the key)
    state: str  # one of STATES
    note: str = ""
    who: str = ""  # OS user name (getpass.getuser(), "" if unknown)
    when: str = ""  # ISO 8601 UTC, seconds
    model_sha256: str = ""


class ReviewLog:
    """The reviews in one review folder; `get`/`counts` see only the rows of `model_sha256`."""

    def __init__(self, folder: Path, model_sha256: str, rows: dict[tuple[str, str], Review]) -> None:
        self._folder = Path(folder)
        self._model = model_sha256.lower()
        self._rows = rows  # (rel, model) → Review, in file order, new ones appended

    @classmethod
    def open(cls, folder: Path, model_sha256: str) -> ReviewLog:
        """The log in `folder` (empty when the folder or the file does not exist yet; created at the first
        write). A file that cannot be read or is not a review log raises ReviewError."""
        if not model_sha256:
            raise ValueError("a review log needs the model's SHA-256")
        return cls(folder, model_sha256, _read_rows(Path(folder) / REVIEW_FILE))

    @property
    def folder(self) -> Path:
        return self._folder

    @property
    def path(self) -> Path:
        return self._folder / REVIEW_FILE

    @property
    def model_sha256(self) -> str:
        return self._model

    @property
    def foreign(self) -> int:
        """Rows made with another model (kept in the file, not shown)."""
        return sum(model != self._model for _rel, model in self._rows)

    def get(self, rel: str) -> Review | None:
        """This model's review of `rel`, None when it has none."""
        # rels are keyed as the log writes them, the report's spelling (app.errors.spelt): a name's bytes that
        # are not UTF-8 become `\xNN`, one-to-one, so such a file's review is found again when the log is reopened
        return self._rows.get((spelt(rel), self._model))

    def reviews(self) -> list[Review]:
        """This model's reviews, in file order."""
        return [review for (_rel, model), review in self._rows.items() if model == self._model]

    def set(self, rel: str, state: str, note: str | None = None) -> Review:
        """Record `state` (and `note`; None keeps the earlier one) for `rel`, stamped with who, when and the model,
        and rewrite the file atomically. The file is read again first, so that reviews another window wrote to the
        same folder meanwhile are kept (the last writer of one image's review wins). On a failed write the log is
        left as it was and ReviewError is raised."""
        if state not in STATES:
            raise ValueError(f"review state {state!r} is not one of {', '.join(STATES)}")
        if not rel:
            raise ValueError("a review needs the image's relative path")
        rows = {**self._rows, **_read_rows(self.path)}  # another window's reviews since we read are kept
        earlier = rows.get((spelt(rel), self._model))
        if note is None:
            note = earlier.note if earlier else ""
        review = Review(spelt(rel), state, note, _user(), _now(), self._model)  # as it is read back
        rows[(review.rel, self._model)] = review
        try:
            atomic_write(self.path, _csv_bytes(rows.values()))
        except SegLensError as exc:  # the log keeps showing what is on disk
            raise ReviewError(str(exc)) from exc
        self._rows = rows
        return review

    def counts(self) -> dict[str, int]:
        """Reviews per state for this model's rows (an image never set is not counted as unreviewed)."""
        counts = dict.fromkeys(STATES, 0)
        for review in self.reviews():
            counts[review.state] += 1
        return counts

    def state_of(self, rel: str) -> str:
        """`rel`'s state for this model, "unreviewed" when it has no review."""
        review = self.get(rel)
        return review.state if review else "unreviewed"

    def filter(self, rels: list[str], states: Collection[str]) -> list[str]:  # a set, frozenset or tuple
        """The rels (in list order) whose state is one of `states`."""
        return [rel for rel in rels if self.state_of(rel) in states]

    def next_unreviewed(self, rels: list[str], after: str | None) -> str | None:
        """The next rel in list order after `after` (wrapping; `after` itself last) that is unreviewed; from the
        start when `after` is None or not in the list; None when all are reviewed."""
        start = rels.index(after) + 1 if after in rels else 0
        for offset in range(len(rels)):
            rel = rels[(start + offset) % len(rels)]
            if self.state_of(rel) == "unreviewed":
                return rel
        return None


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no USER/LOGNAME and no passwd entry (a container's numeric uid): "who" is best-effort
        return ""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _csv_bytes(reviews: Iterable[Review]) -> bytes:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for r in reviews:
        writer.writerow([_to_cell(r.rel), r.state, _to_cell(_utf8(r.note)), _to_cell(_utf8(r.who)), r.when,
                         r.model_sha256])
    return buffer.getvalue().encode("utf-8")


def _is_formula(text: str) -> bool:
    return formula_safe(text) != text


def _utf8(text: str) -> str:
    """A note or a user name as valid UTF-8, unchanged when it is (written and read back as it stands)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _to_cell(text: str) -> str:
    """`text` (valid UTF-8 already) never a live formula: `=x` → `'=x`, and `'=x` → `''=x` so that reading back
    strips exactly one."""
    if text.lstrip("'") != text and _is_formula(text.lstrip("'")):
        return "'" + text
    return formula_safe(text)


def _from_cell(cell: str) -> str:
    return cell[1:] if cell.startswith("'") and _is_formula(cell.lstrip("'")) else cell


def _read_rows(path: Path) -> dict[tuple[str, str], Review]:
    try:
        text = read_untrusted(path, limit=STATE_FILE_LIMIT).decode("utf-8-sig")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise ReviewError(f"{path}: not a SegLens review log (not UTF-8 text)") from exc
    except OSError as exc:
        raise ReviewError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not text.strip():
        return {}  # an empty file (made by hand): nothing reviewed yet
    try:
        records = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        raise ReviewError(f"{path}: not a SegLens review log ({exc})") from exc
    if tuple(records[0]) != COLUMNS:
        raise ReviewError(f"{path}: not a SegLens review log (its header is not {','.join(COLUMNS)})")
    rows: dict[tuple[str, str], Review] = {}
    for line, record in enumerate(records[1:], start=2):
        review = _review_of(path, line, record)
        rows.pop((review.rel, review.model_sha256), None)  # a repeated row: the later one wins, in its place
        rows[(review.rel, review.model_sha256)] = review
    return rows


def _review_of(path: Path, line: int, record: list[str]) -> Review:
    if len(record) != len(COLUMNS):
        raise ReviewError(f"{path}: row {line} has {len(record)} values, expected {len(COLUMNS)}")
    rel, state, note, who, when, model = record
    if state not in STATES:
        raise ReviewError(f"{path}: row {line} has an unknown state {state!r}")
    if not rel or not model:
        raise ReviewError(f"{path}: row {line} has no file or no model SHA-256")
    return Review(_from_cell(rel), state, _from_cell(note), _from_cell(who), when, model.lower())


def corrected_mask_path(folder: Path, rel: str, frame: int | None = None) -> Path:
    """folder / <rel's parent> / "<name>_mask.png", the name *with* its extension (`x.jpg_mask.png`): `x.png` and
    `x.jpg` in one folder each keep their own correction (made safe as output names are: app.io.discover).
    `frame`: slice `frame` (0-based) of a volume or multi-frame file has its own, numbered as the viewer shows it
    (`<name>_slice0007_mask.png` for frame 6); None (a one-frame picture) keeps the plain name."""
    relative = PurePosixPath(rel)
    name = safe_name(relative.name) + ("" if frame is None else f"_slice{frame + 1:04d}")
    return Path(folder, *relative.parent.parts, f"{name}_mask.png")


def picture_frame(frame: int, frame_count: int) -> int | None:
    """The `frame` a picture's correction is kept under: None for a one-frame picture (its plain name), else the
    frame (each slice of a volume has its own)."""
    return None if frame_count <= 1 else frame


@dataclass(frozen=True)
class Correction:
    """Where one picture's corrected mask lives: the review folder, the rel it is keyed by, the inputs' folder
    (never written into) and the frame (None: a one-frame picture)."""

    folder: Path
    rel: str
    input_root: Path | None = None
    frame: int | None = None

    @property
    def path(self) -> Path:
        return corrected_mask_path(self.folder, self.rel, self.frame)

    def find(self) -> Path | None:
        """The correction saved for this picture, None when there is none (find_corrected_mask)."""
        return find_corrected_mask(self.folder, self.rel, self.frame)

    def save(self, mask: np.ndarray) -> Path:
        """Write `mask` as this picture's correction (save_corrected_mask)."""
        return save_corrected_mask(self.folder, self.rel, mask, input_root=self.input_root, frame=self.frame)


def _legacy_mask_path(folder: Path, rel: str) -> Path:
    """Where SegLens before 0.9 put the correction: `<stem>_mask.png`, shared by `x.png` and `x.jpg`."""
    relative = PurePosixPath(rel)
    return Path(folder, *relative.parent.parts, f"{relative.stem}_mask.png")


def find_corrected_mask(folder: Path, rel: str, frame: int | None = None) -> Path | None:
    """The correction saved for `rel` (its slice `frame`; None: a one-frame picture) in the review folder, None
    when there is none. The current name first; else a review folder's older `<stem>_mask.png`, only when the rel
    its PNG text names is `rel` (that file may have been saved for `x.png` or for `x.jpg`, and only the mark says
    which). A slice has no older name: in earlier versions every slice of a volume was saved under the volume's one
    `<name>_mask.png`, and nothing says which slice that file was drawn on, so it is no slice's reference."""
    current = corrected_mask_path(folder, rel, frame)
    if current.is_file():
        return current
    if frame is not None:
        return None
    legacy = _legacy_mask_path(folder, rel)
    return legacy if _is_legacy_of(legacy, rel) else None


def save_corrected_mask(folder: Path, rel: str, mask: np.ndarray, *, input_root: Path | None = None,
                        frame: int | None = None) -> Path:
    """Write `mask` (2-D labels 0..255) as a uint8 PNG at `corrected_mask_path` (of slice `frame`, None: a
    one-frame picture), atomically, marked as a SegLens corrected mask. Refuses (ReviewError) a path outside
    `folder` or inside `input_root`, and any existing file that is not a corrected mask SegLens wrote (an input
    image that happens to have that name). An older `<stem>_mask.png` saved for this same rel is removed once the
    new file is written (migrated)."""
    target = corrected_mask_path(folder, rel, frame)
    _check_mask_target(Path(folder), rel, target, input_root)
    pixels = _label_pixels(mask, target)
    text = {MASK_MARK: spelt(rel)} | ({} if frame is None else {MASK_FRAME: str(frame + 1)})
    atomic_write(target, png_with_text(encode_png(pixels), text))
    legacy = _legacy_mask_path(folder, rel)
    if frame is None and legacy != target and _is_legacy_of(legacy, rel):
        # else it would come back as this image's correction if the new one went; by its folder and name only
        remove_under(legacy.parent, legacy.name)
    return target


def _is_legacy_of(path: Path, rel: str) -> bool:
    return path.is_file() and not path.is_symlink() and _mask_rel(path) == spelt(rel)


def _mask_rel(path: Path) -> str | None:
    """The rel a corrected mask SegLens wrote was saved for (its PNG text), None for any other file."""
    try:
        return png_text(path).get(MASK_MARK)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _check_mask_target(folder: Path, rel: str, target: Path, input_root: Path | None) -> None:
    resolved = target.resolve()
    if PurePosixPath(rel).is_absolute() or not resolved.is_relative_to(folder.resolve()):
        raise ReviewError(f"{target}: refusing to write a corrected mask outside the review folder {folder}")
    if input_root is not None and resolved.is_relative_to(Path(input_root).resolve()):
        raise ReviewError(f"{target}: refusing to write a corrected mask inside the input folder {input_root}")
    if os.path.lexists(target) and (target.is_symlink() or not _is_our_mask(target)):
        raise ReviewError(f"{target}: refusing to replace a file that is not a SegLens corrected mask")


def _is_our_mask(path: Path) -> bool:
    try:
        return MASK_MARK in png_text(path)
    except (OSError, ValueError, UnicodeDecodeError):
        return False


def _label_pixels(mask: np.ndarray, target: Path) -> np.ndarray:
    array = np.asarray(mask)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"{target}: a corrected mask is a 2-D label array, got shape {array.shape}")
    if array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    if array.dtype.kind not in "biu" or array.min() < 0 or array.max() > 255:
        raise ValueError(f"{target}: a corrected mask holds labels 0..255, got {array.dtype}")
    return array.astype(np.uint8)
