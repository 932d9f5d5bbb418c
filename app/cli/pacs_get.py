"""`seglens-cli pacs get`'s side of the file system: each retrieved series copied under --to whole, in a folder
named by its UID as one path component (a server's `../../x` or `/abs` stays a name under --to), pinned in the
cache until copied, and SIGTERM turned into an exception so that every partial folder and pin on the way is let go.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import OutputError

if TYPE_CHECKING:
    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.client import PacsClient


EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process it ended


class Terminated(KeyboardInterrupt):
    """SIGTERM while a `pacs get` runs: raised where the program is, so that every `finally` on the way runs (the
    partial folders of the retrieve and of the copy removed, the cache's pins released). A KeyboardInterrupt, so
    that no library's `except Exception` takes it for its own failure."""


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """SIGTERM raises Terminated for the block (the main thread only: a signal handler cannot be set elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signum: int, _frame: object) -> None:
        raise Terminated()

    earlier = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, earlier)


def get_one(client: PacsClient, study_uid: str, series_uid: str, cache: SeriesCache, to: Path, *,
             progress: Callable[[int, int | None], None]) -> tuple[Path, int, int]:
    """One series retrieved (pinned in the cache until it is copied: no `clear` or eviction elsewhere takes it
    meanwhile) and copied under `to`: (its folder there, files, bytes)."""
    target = series_folder(to, series_uid)
    with cache.pin(series_uid):
        got = client.retrieve(study_uid, series_uid, cache, progress=progress)
        return target, copy_series(got.folder, target), got.bytes


def series_folder(to: Path, series_uid: str) -> Path:
    """A series' folder under --to: its UID (never the patient's name) as one path component (a UID from a server
    may be `../../x` or an absolute path), proved to stay under --to (OutputError otherwise)."""
    from app.guard.names import PathEscape, component, join_under

    try:
        return join_under(to, component(series_uid))
    except PathEscape as exc:  # a symbolic link planted under the name, out of --to
        raise OutputError(f"{to / component(series_uid)}: leads outside {to}; not written") from exc


def copy_series(cached: Path, target: Path) -> int:
    """The cached series' DICOM files copied into `target` whole (app.guard.shared.whole_folder: a partial
    folder beside it, swapped into place, an earlier copy of the series replaced), so `target` is never a half
    series, also when the copy is stopped (Ctrl+C, SIGTERM); what a killed copy left beside `target` is removed
    first. `target` must come from `series_folder`. Returns the files."""
    from app.guard.names import join_under
    from app.guard.shared import open_new, whole_folder
    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    files = sorted(p for p in cached.iterdir() if p.is_file() and is_dicom(p))
    try:
        if target.parent.exists() and not target.parent.is_dir():
            raise NotADirectoryError(20, "Not a directory")
        _remove_leftovers(target)
        with whole_folder(target) as partial:
            for path in files:
                with open_untrusted(path, limit=INPUT_FILE_LIMIT, root=cached) as source, \
                        open_new(join_under(partial, path.name)) as copy:
                    shutil.copyfileobj(source, copy)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write the series ({exc.strerror or type(exc).__name__})") from exc
    return len(files)


def _remove_leftovers(target: Path) -> None:
    """The partial (and set-aside) folders of a copy of this series that was killed (whole_folder's names)."""
    from app.guard.shared import remove_under

    leftover = re.compile(re.escape(target.name) + r"\.(partial|old)-[0-9a-f]{8}")
    for sibling in target.parent.iterdir() if target.parent.is_dir() else []:
        if leftover.fullmatch(sibling.name):
            remove_under(target.parent, sibling.name)


def is_dicom(path: Path) -> bool:
    """A DICOM Part 10 file (the DICM preamble), whatever its name: a regular file (a FIFO or a device among the
    files named is not, and is never waited on)."""
    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            return handle.read(132)[128:] == b"DICM"
    except OSError:
        return False
