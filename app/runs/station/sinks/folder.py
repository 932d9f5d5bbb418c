"""The output-folder sink: a station's pictures and its copies of the parts it did not pass, with a retention limit.

Under the station's output folder:
- `results/<id>_mask.png`, `_overlay.png` (and `_heatmap.png`, `_scores.png` when asked), as `seglens-cli run`
  writes them (app.runs.outputs.images); every part of the id one safe component (app.guard.names), joined under the
  output folder by `join_under`, its extensions kept when a long name is cut;
- `ng/<id>` and `review/<id>`: a copy of the input of each NG and REVIEW frame, byte for byte (a camera's frame:
  `<id>.png`), so the parts to look at again are in one place; an earlier copy under the same name (a camera's ids
  start at 0 again after a restart) is moved aside to `<id>_2` (`_3`…), never overwritten;
- `error/<id>`: the same for an ERROR frame (the model could not judge it), so what came is not lost: a file's bytes,
  a camera frame's pixels as `<id>.png` when it had any.
The input is read through app.guard.untrusted under the folder it was found in (`Pictures.root`: a link out of it,
a FIFO or a device refused without blocking) and streamed into the copy a block at a time, never read whole; an
input over COPY_MAX (a sparse 3 GiB file costs nothing to make) is not copied. An input that cannot be copied (gone,
not a regular file, a link out, too large) is no failure of the sink: for NG and REVIEW one line,
`<id>.not-copied.txt` where the copy would be, says why (and one warning); for ERROR nothing is kept.
Every file appears whole or not at all (an exclusive temporary renamed over it: app.guard.shared). With `keep_files`
or `keep_bytes`, the oldest files (by modification time, the ones from before a restart too) are removed once the
sink holds more: a station that runs for a shift does not fill the disk. A write that fails (a full disk) is no
exception for the station: `publish_pictures` returns False, the sink says so in `problem` and counts the verdict in
`lost`, and the station offers the frame again later (app.runs.station.run); the next success clears the problem.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

from app.errors import OutputError, SegLensError, one_line
from app.guard.names import MAX_COMPONENT_BYTES, component, join_under
from app.guard.shared import atomic_write, create_temporary, make_folder, remove_empty_under, remove_under, rename_under
from app.guard.untrusted import open_untrusted
from app.io.files import encode_png
from app.runs.outputs.images import write_result_images
from app.runs.station.privacy import Shareable, medical_kind
from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.options import FolderSinkOptions
from app.spelling import spelt

if TYPE_CHECKING:
    import numpy as np

    from app.inference.image.pipeline import Result
    from app.inference.model.spec import ModelSpec
    from app.runs.station.privacy import StationPrivacy

log = logging.getLogger(__name__)

FOLDERS = ("results", "ng", "review", "error")
COPIED = {"NG": "ng", "REVIEW": "review", "ERROR": "error"}  # the verdicts whose input is copied, and where to
COPY_MAX = 256 << 20  # an input is copied up to this size; a larger one is recorded as not copied
ERROR_COPY_MAX = COPY_MAX  # (its earlier name)
NOT_COPIED = ".not-copied.txt"  # beside where the copy would be: the one line saying why there is none
_CHUNK = 1 << 20
_MAX_UNKEPT = 1000  # verdicts remembered whose pictures could not be written (the station owes fewer)
_EXTENSIONS = re.compile(r"(\.[A-Za-z0-9]{1,10}){1,2}$")  # ASCII: never escaped by component(), never cut


@dataclass(frozen=True)
class Pictures:
    """What a judged frame leaves for the folder sink: the input file (or a camera's pixels), the display pixels
    the overlay is drawn on, the result (None when the frame could not be judged), and the folder the input was
    found in (a watched folder: the copy is read through app.guard.untrusted under it, a link out refused)."""

    path: Path | None
    pixels: np.ndarray | None
    result: Result | None
    root: Path | None = None


class _NotCopied(Exception):
    """The input cannot be copied for a reason of its own (gone, not a regular file, a link out of its folder,
    over COPY_MAX): one line, kept beside where the copy would be, never the sink's failure."""


class FolderSink:
    """Writes a station's pictures and NG/REVIEW/ERROR copies under `out` (see the module's docstring)."""

    name = "folder"

    def __init__(self, out: Path, spec: ModelSpec, options: FolderSinkOptions | None = None, *,
                 privacy: StationPrivacy | None = None) -> None:
        """`options`: the station file's `sinks.folder` (None: every default)."""
        given = options or FolderSinkOptions()
        self.out, self.spec, self.save = Path(out), spec, given.save
        self.privacy = privacy  # a DICOM's copy de-identified, a NIfTI's not kept (app.runs.station.privacy)
        self.keep_files, self.keep_bytes = given.keep_files, given.keep_bytes
        self.lost = 0  # frames whose pictures could not be written, and were not since
        self._unkept: set[StationVerdict] = set()  # their verdicts (offered again by the station)
        self._problem: str | None = None
        self._kept: deque[tuple[Path, int]] = deque()  # oldest first; only tracked under a limit
        self._bytes = 0
        if self._limited:
            self._seed()

    @property
    def problem(self) -> str | None:
        """Why the last write failed, in one line; None once one succeeds again."""
        return self._problem

    def publish(self, verdict: StationVerdict) -> bool:
        """A verdict without pictures (the Sink interface): nothing to write, so the sink has it."""
        return True

    def publish_pictures(self, verdict: StationVerdict, pictures: Pictures) -> bool:
        """Write the frame's pictures and, for NG, REVIEW and ERROR, its copy; whether the sink has them all (a
        write that failed, a full disk: False, said in `problem`, and the station offers the frame again).
        Never raises for a write that fails."""
        try:
            written = self._write(verdict, pictures)
        except (OSError, SegLensError, ValueError) as exc:  # a full disk, a link planted in the output folder
            why = one_line(exc)
            if self.privacy is not None and pictures.path is not None:  # the input by its id, as the verdict has it
                why = why.replace(str(pictures.path), verdict.frame_id)
            self._fail(verdict, why)
            return False
        except Exception as exc:  # a sink must not stop the station; the problem says what
            self._fail(verdict, one_line(exc, typed=True))
            return False
        self._problem = None
        if verdict in self._unkept:  # offered again and written now: not lost
            self._unkept.discard(verdict)
            self.lost -= 1
        for path in written:
            self._keep(path)
        return True

    def close(self) -> None:
        """Nothing is pending: every file is written when publish returns."""

    # -- writing --------------------------------------------------------------------------------------------

    def _write(self, verdict: StationVerdict, pictures: Pictures) -> list[Path]:
        if not self.out.is_dir():  # as the log sink: a share unmounted under it must not be filled in its place
            raise OutputError("the output folder is gone (removed or unmounted): not made again")
        written: list[Path] = []
        if pictures.result is not None and self.save:
            stem = join_under(self.out, "results", *_safe(verdict.frame_id))
            make_folder(stem.parent, root=self.out)  # no folder on the way followed if it is a planted link
            written += write_result_images(pictures.result, self.spec, stem, self.save, pictures.pixels,
                                           root=self.out)
        target = copy_path(self.out, verdict, pictures)
        if target is not None:
            written += self._copy_input(target, verdict, pictures)
        return written

    def _copy_input(self, target: Path, verdict: StationVerdict, pictures: Pictures) -> list[Path]:
        """The frame's copy at `target`: a camera's pixels as a PNG, a file streamed from its folder (never read
        whole: over COPY_MAX it is not copied, and `<copy>.not-copied.txt` says why in one line), a DICOM
        de-identified first under privacy."""
        make_folder(target.parent, root=self.out)  # no folder on the way followed if it is a planted link
        if pictures.path is None:
            if pictures.pixels is None:
                raise ValueError("a frame with neither a file nor pixels cannot be copied")
            return self._shared_copy(target, Shareable(encode_png(pictures.pixels)))
        try:
            with open_untrusted(pictures.path, limit=COPY_MAX, root=pictures.root) as handle:
                if self.privacy is None:  # a DICOM or NIfTI kept as it came (its patient's data): private
                    medical = medical_kind(pictures.path, handle.read(132)) is not None
                    handle.seek(0)
                    return [self._stream(target, handle, private=medical)]
                data = handle.read(COPY_MAX)  # bounded; a DICOM is de-identified from its bytes
        except OSError as exc:
            if exc.filename is not None and os.fspath(exc.filename) != os.fspath(pictures.path):
                raise  # a write of the copy failed (a full disk): the sink's failure, offered again
            why = exc.strerror or one_line(exc)
            if pictures.root is not None:  # the record names the part, not the folder
                why = why.replace(str(pictures.root), "the watched folder")
            return self._not_copied(target, verdict, why)
        shared = self.privacy.shareable(pictures.path, data)  # a DICOM de-identified, a NIfTI not kept
        return [] if shared is None else self._shared_copy(target, shared)

    def _not_copied(self, target: Path, verdict: StationVerdict, why: str) -> list[Path]:
        """An input that cannot be copied (gone, a FIFO, a link out of its folder, too large): for an ERROR frame
        nothing to keep (a broken file may be anything); for NG and REVIEW one line beside where the copy would
        be, and one warning naming the frame by its id."""
        line = f"{verdict.frame_id}: not copied: {why}"
        if verdict.verdict == "ERROR":
            log.debug("folder sink: the input of ERROR frame %s not kept: %s", verdict.frame_id, why)
            return []
        log.warning("folder sink: %s", line)
        record = target.with_name(target.name + NOT_COPIED)
        atomic_write(record, (spelt(line, controls=False) + "\n").encode("utf-8"), root=self.out)
        return [record]

    def _shared_copy(self, target: Path, shared: Shareable) -> list[Path]:
        """The copy written; a de-identified one searched for its source's values and removed if one is there."""
        self._keep_earlier(target)
        atomic_write(target, shared.data, root=self.out)
        if shared.identifying is not None:
            from app.runs.privacy.check import leak

            found = leak([target], shared.identifying, root=self.out)
            if found:  # names the kind of value, never the value
                remove_under(self.out, *target.relative_to(self.out).parts)
                log.warning("folder sink: a de-identified copy removed (%s)", found)
                return []
        return [target]

    def _stream(self, target: Path, source: BinaryIO, *, private: bool) -> Path:
        """`source` copied to `target` a block at a time through an exclusive temporary renamed over it (whole
        or not at all; 0600 when `private`); OSError naming the target when a write fails."""
        self._keep_earlier(target)
        fd, temporary = create_temporary(target.parent, target.name, private=private, root=self.out)
        try:
            with os.fdopen(fd, "wb") as handle:
                while block := source.read(_CHUNK):
                    handle.write(block)
            rename_under(target.parent, temporary.name, target.name, under=self.out)
        except OSError as exc:
            remove_under(self.out, *temporary.relative_to(self.out).parts)
            raise OSError(exc.errno, exc.strerror, os.fspath(target)) from None
        return target

    def _keep_earlier(self, target: Path) -> None:
        """An earlier part's copy under the same name (a camera's ids start at 0 again, a file written again) is
        moved aside to `<name>_2`, `_3`… (the first free), not overwritten: a rejected part's evidence is kept, and
        the newest stays where `copy_path` says (the viewer's strip opens it there)."""
        if not os.path.lexists(target):
            return
        stem, suffix = _split_suffix(target.name)
        n = 2
        while os.path.lexists(aside := target.with_name(f"{stem}_{n}{suffix}")):
            n += 1
        rename_under(target.parent, target.name, aside.name, under=self.out)
        for index, (path, size) in enumerate(self._kept):  # the retention's record follows the file
            if path == target:
                self._kept[index] = (aside, size)
                break

    def _fail(self, verdict: StationVerdict, why: str) -> None:
        if verdict not in self._unkept:
            self.lost += 1
            self._unkept.add(verdict)
            if len(self._unkept) > _MAX_UNKEPT:  # verdicts the station no longer offers: lost for good
                self._unkept.pop()
        self._problem = f"folder: cannot write the pictures of a frame ({why})"
        log.warning("folder sink: a frame's pictures could not be written (%d so far)", self.lost)  # no path
        log.debug("folder sink: frame %s not written: %s", verdict.frame_id, why)

    # -- retention ------------------------------------------------------------------------------------------

    @property
    def _limited(self) -> bool:
        return self.keep_files is not None or self.keep_bytes is not None

    def _seed(self) -> None:
        """The files an earlier run left, oldest first: they count against the limit too."""
        found: list[tuple[int, Path, int]] = []
        for name in FOLDERS:
            for path in (self.out / name).rglob("*"):
                with contextlib.suppress(OSError):
                    info = path.lstat()
                    if path.is_file() and not path.is_symlink():
                        found.append((info.st_mtime_ns, path, info.st_size))
        for _, path, size in sorted(found):
            self._kept.append((path, size))
            self._bytes += size
        self._trim()

    def _keep(self, path: Path) -> None:
        if not self._limited:
            return
        try:
            size = path.stat().st_size
        except OSError:
            return
        self._kept.append((path, size))
        self._bytes += size
        self._trim()

    def _trim(self) -> None:
        while self._kept and self._over():
            path, size = self._kept.popleft()
            self._bytes -= size
            with contextlib.suppress(OSError, ValueError):
                remove_under(self.out, *path.relative_to(self.out).parts)
            _remove_empty(path.parent, self.out)

    def _over(self) -> bool:
        too_many = self.keep_files is not None and len(self._kept) > self.keep_files
        return too_many or (self.keep_bytes is not None and self._bytes > self.keep_bytes)


def copy_path(out: Path, verdict: StationVerdict, pictures: Pictures) -> Path | None:
    """Where the sink keeps the copy of this frame's input (`out/ng/<id>`, `review/`, `error/`; a camera's frame:
    `<id>.png`), or None for a verdict it does not copy, or an ERROR frame with nothing to keep (the viewer's Station
    view opens it from its strip of thumbnails)."""
    folder = COPIED.get(verdict.verdict)
    if folder is None or (verdict.verdict == "ERROR" and pictures.path is None and pictures.pixels is None):
        return None
    parts = _safe(verdict.frame_id if pictures.path is not None else verdict.frame_id + ".png")
    return join_under(out, folder, *parts)


def _safe(frame_id: str) -> tuple[str, ...]:
    """The id (`sub/part_17.png`, POSIX separators) as path components, each one safe (app.guard.names)."""
    parts = [_named(part) for part in PurePosixPath(frame_id).parts if part not in ("/", "")]
    return tuple(parts) if parts else ("unnamed",)


def _named(part: str) -> str:
    """One part of an id as a safe component (app.guard.names.component) that keeps its extensions (`.png`,
    `.nii.gz`, a camera frame's `.png.png`) when a long name is cut: the stem is cut, never what says the kind."""
    found = _EXTENSIONS.search(part)
    if found is None or found.start() == 0:
        return component(part)
    suffix = found.group()
    return component(part[: found.start()], max_bytes=MAX_COMPONENT_BYTES - len(suffix)) + suffix


def _split_suffix(name: str) -> tuple[str, str]:
    """`part.nii.gz` → (`part`, `.nii.gz`); `0.png` → (`0`, `.png`); `IM0001` → (`IM0001`, ``)."""
    lower = name.lower()
    for double in (".nii.gz",):
        if lower.endswith(double) and len(name) > len(double):
            return name[: -len(double)], name[-len(double):]
    stem, dot, suffix = name.rpartition(".")
    return (stem, f".{suffix}") if dot and stem else (name, "")


def _remove_empty(folder: Path, out: Path) -> None:
    """Remove folders left empty by the retention, up to (not including) the sink's own folders."""
    while folder.parent != out and out in folder.parents:
        try:
            if not remove_empty_under(out, *folder.relative_to(out).parts):  # one rmdir, never through a link
                return
        except (OSError, ValueError):
            return
        folder = folder.parent
