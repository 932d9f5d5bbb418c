"""The output-folder sink: a station's pictures and its copies of the parts it did not pass, with a retention limit.

Under the station's output folder:
- `results/<id>_mask.png`, `_overlay.png` (and `_heatmap.png`, `_scores.png` when asked), as `seglens-cli run`
  writes them (app.runs.outputs; the id's parts made safe as run's output stems are);
- `ng/<id>` and `review/<id>`: a copy of the input of each NG and REVIEW frame, byte for byte (a camera's frame:
  `<id>.png`), so the parts to look at again are in one place; an earlier copy under the same name (a camera's ids
  start at 0 again after a restart) is moved aside to `<id>_2` (`_3`…), never overwritten;
- `error/<id>`: the same for an ERROR frame (the model could not judge it), so what came is not lost: a file's bytes
  (up to ERROR_COPY_MAX bytes: a broken file may be anything), a camera frame's pixels as `<id>.png` when it had
  any. An input gone or unreadable by then leaves nothing to keep: no copy, and no problem of the sink.
Every file appears whole or not at all (app.io.files.atomic_write). With `keep_files` or `keep_bytes`, the oldest
files (by modification time, the ones from before a restart too) are removed once the sink holds more: a station that
runs for a shift does not fill the disk. A write that fails (a full disk) is no exception for the station: the sink
says so in `problem` and counts the verdict in `lost`; the next success clears the problem.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from app.errors import OutputError, SegLensError, one_line
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted, read_untrusted
from app.io.discover import safe_name
from app.guard.shared import atomic_write
from app.io.files import encode_png
from app.runs.outputs import write_result_images
from app.runs.sinks import StationVerdict
from app.runs.station_privacy import Shareable

if TYPE_CHECKING:
    import numpy as np

    from app.inference.pipeline import Result
    from app.inference.spec import ModelSpec
    from app.runs.station_privacy import StationPrivacy

log = logging.getLogger(__name__)

FOLDERS = ("results", "ng", "review", "error")
COPIED = {"NG": "ng", "REVIEW": "review", "ERROR": "error"}  # the verdicts whose input is copied, and where to
ERROR_COPY_MAX = 256 << 20  # an ERROR frame's file is copied up to this size (it may be no image at all)


@dataclass(frozen=True)
class Pictures:
    """What a judged frame leaves for the folder sink: the input file (or a camera's pixels), the display pixels
    the overlay is drawn on, and the result (None when the frame could not be judged)."""

    path: Path | None
    pixels: np.ndarray | None
    result: Result | None


class FolderSink:
    """Writes a station's pictures and NG/REVIEW/ERROR copies under `out` (see the module's docstring)."""

    name = "folder"

    def __init__(self, out: Path, spec: ModelSpec, *, save: Sequence[str] = ("mask", "overlay"),
                 keep_files: int | None = None, keep_bytes: int | None = None,
                 privacy: StationPrivacy | None = None) -> None:
        self.out, self.spec, self.save = Path(out), spec, tuple(save)
        self.privacy = privacy  # a DICOM's copy de-identified, a NIfTI's not kept (app.runs.station_privacy)
        self.keep_files, self.keep_bytes = keep_files, keep_bytes
        self.lost = 0
        self._problem: str | None = None
        self._kept: deque[tuple[Path, int]] = deque()  # oldest first; only tracked under a limit
        self._bytes = 0
        if self._limited:
            self._seed()

    @property
    def problem(self) -> str | None:
        """Why the last write failed, in one line; None once one succeeds again."""
        return self._problem

    def publish(self, verdict: StationVerdict) -> None:
        """A verdict without pictures (the Sink interface): nothing to write."""

    def publish_pictures(self, verdict: StationVerdict, pictures: Pictures) -> None:
        """Write the frame's pictures and, for NG, REVIEW and ERROR, its copy; never raises for a write that fails."""
        try:
            written = self._write(verdict, pictures)
        except (OSError, SegLensError, ValueError) as exc:  # a full disk, a file gone since it was judged
            why = one_line(exc)
            if self.privacy is not None and pictures.path is not None:  # the input by its id, as the verdict has it
                why = why.replace(str(pictures.path), verdict.frame_id)
            self._fail(verdict, why)
            return
        except Exception as exc:  # a sink must not stop the station; the problem says what
            self._fail(verdict, one_line(exc, typed=True))
            return
        self._problem = None
        for path in written:
            self._keep(path)

    def close(self) -> None:
        """Nothing is pending: every file is written when publish returns."""

    # -- writing --------------------------------------------------------------------------------------------

    def _write(self, verdict: StationVerdict, pictures: Pictures) -> list[Path]:
        if not self.out.is_dir():  # as the log sink: a share unmounted under it must not be filled in its place
            raise OutputError("the output folder is gone (removed or unmounted): not made again")
        stem = self.out / "results" / _safe(verdict.frame_id)
        written: list[Path] = []
        if pictures.result is not None and self.save:
            stem.parent.mkdir(parents=True, exist_ok=True)
            written += write_result_images(pictures.result, self.spec, stem, self.save, pictures.pixels)
        target = copy_path(self.out, verdict, pictures)
        if target is not None:
            data = self._input(verdict, pictures)
            if data is not None and self.privacy is not None and pictures.path is not None:
                shared = self.privacy.shareable(pictures.path, data)  # a DICOM de-identified, a NIfTI not kept
            else:
                shared = None if data is None else Shareable(data)
            if shared is not None:
                written += self._shared_copy(target, shared)
        return written

    def _shared_copy(self, target: Path, shared: Shareable) -> list[Path]:
        """The copy written; a de-identified one searched for its source's values and removed if one is there."""
        written = self._copy(target, shared.data)
        if shared.identifying is not None:
            from app.runs.privacy_check import leak

            found = leak([written], shared.identifying, root=self.out)
            if found:  # names the kind of value, never the value
                os.unlink(written)
                log.warning("folder sink: a de-identified copy removed (%s)", found)
                return []
        return [written]

    def _input(self, verdict: StationVerdict, pictures: Pictures) -> bytes | None:
        """The bytes the copy holds; None when an ERROR frame's input cannot be had (gone, unreadable, too big)."""
        if pictures.path is None:
            if pictures.pixels is None:
                raise ValueError("a frame with neither a file nor pixels cannot be copied")
            return encode_png(pictures.pixels)
        if verdict.verdict != "ERROR":
            return read_untrusted(pictures.path, limit=INPUT_FILE_LIMIT)
        try:  # a frame that could not be judged: its file may be gone, a FIFO, or huge
            with open_untrusted(pictures.path, limit=INPUT_FILE_LIMIT) as handle:
                data = handle.read(ERROR_COPY_MAX + 1)
        except OSError as exc:
            log.debug("folder sink: the input of ERROR frame %s not kept: %s", verdict.frame_id, exc)
            return None
        if len(data) > ERROR_COPY_MAX:
            log.info("folder sink: an ERROR frame's input is over %d MiB: not kept", ERROR_COPY_MAX >> 20)
            return None
        return data

    def _copy(self, target: Path, data: bytes) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        self._keep_earlier(target)
        atomic_write(target, data)
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
        os.replace(target, aside)
        for index, (path, size) in enumerate(self._kept):  # the retention's record follows the file
            if path == target:
                self._kept[index] = (aside, size)
                break

    def _fail(self, verdict: StationVerdict, why: str) -> None:
        self.lost += 1
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
            with contextlib.suppress(OSError):
                os.unlink(path)
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
    target = Path(out) / folder / _safe(verdict.frame_id)
    return target if pictures.path is not None else target.with_name(target.name + ".png")


def _safe(frame_id: str) -> Path:
    """The id (`sub/part_17.png`, POSIX separators) as a relative path whose every part is safe."""
    parts = [safe_name(part) for part in PurePosixPath(frame_id).parts if part not in ("/", "")]
    return Path(*parts) if parts else Path("unnamed")


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
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
