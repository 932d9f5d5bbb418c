"""Logging to a rotating file in the user's log folder — works in a windowed frozen app with no console."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path

from app.spelling import shown, spelt

APP_NAME = "SegLens"
_FORMAT = "%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s"


def log_dir() -> Path:
    """The user log folder (SEGLENS_LOG_DIR overrides it, e.g. for tests)."""
    override = os.environ.get("SEGLENS_LOG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_log_dir

    return Path(user_log_dir(APP_NAME, appauthor=False))


def log_file() -> Path:
    return log_dir() / "seglens.log"


def setup_file_logging(level: int | None = None) -> Path | None:
    """Attach a rotating file handler to the root logger; returns the file, or None when it can't be written.

    The log file is best-effort: a read-only or full home folder must not stop the app from starting.
    """
    level = _root_level(level)
    root = logging.getLogger()
    quiet_libraries()  # with or without a log file: the libraries' chatter stays off the terminal
    path = log_file()
    if any(getattr(h, "baseFilename", None) == str(path) for h in root.handlers):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFile(path)
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(handler)
    return path


def _root_level(level: int | None) -> int:
    """The level asked for (SEGLENS_LOG_LEVEL, else INFO), the root logger let down to it."""
    level = level or logging.getLevelName(os.environ.get("SEGLENS_LOG_LEVEL", "INFO").upper())
    level = level if isinstance(level, int) else logging.INFO
    root = logging.getLogger()
    root.setLevel(min(root.level or level, level))
    return level


def hold_records(level: int | None = None) -> HeldRecords:
    """The viewer's start: setup_file_logging's levels and quiet libraries now, its file when `open_file()` is called
    (after the window's first paint): naming the log folder (platformdirs imports tempfile, random and shutil) and
    opening the file cost ~3–6 ms before the window could show. What is logged until then is held, and written first."""
    held = HeldRecords(_root_level(level))
    quiet_libraries()
    logging.getLogger().addHandler(held)
    return held


class HeldRecords(logging.Handler):
    """The root logger's records kept in memory until the log file is open (hold_records); at exit, if never
    released, they are written then (logging.shutdown closes every handler)."""

    LIMIT = 10_000  # a burst before the first paint cannot grow without bound

    def __init__(self, level: int) -> None:
        super().__init__()
        self._wanted, self._released = level, False
        self._records: list[logging.LogRecord] = []
        self.path: Path | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if len(self._records) < self.LIMIT:
            self._records.append(record)

    def open_file(self) -> Path | None:  # not `release`: a Handler's lock is released by that name
        """Open the log file (setup_file_logging) and write what was held into it, in order; once. The file, or
        None when it can't be written."""
        if not self._released:
            self._released = True
            root = logging.getLogger()
            root.removeHandler(self)
            self.path = setup_file_logging(self._wanted)
            for record in self._records:
                for handler in root.handlers:
                    if record.levelno >= handler.level:
                        handler.handle(record)
            self._records.clear()
        return self.path

    def close(self) -> None:
        self.open_file()
        super().close()


# Libraries whose log lines and warnings quote what they are given (highdicom: "copy Patient-related attributes
# from dataset <source SOP UID>" at INFO, 'The string "SMITHSON" is unlikely…'; Pillow: a file's EXIF trouble).
# the PACS libraries too: dicomweb-client and urllib3 log each request's URL (a QIDO-RS query's PatientID and
# PatientName in it) and pynetdicom each C-FIND identifier at DEBUG and INFO; nothing of a patient reaches a log
LIBRARIES = ("highdicom", "pydicom", "dicognito", "PIL", "nibabel", "tifffile", "py.warnings", "dicomweb_client",
             "urllib3", "requests", "pynetdicom")
_LIBRARY_LOG = "app.libraries"


def quiet_libraries() -> None:
    """Keep the libraries' chatter off the terminal and out of the log file above DEBUG: their loggers at
    WARNING (nothing at INFO is made), and what they log at WARNING+, with every `warnings.warn` (routed to
    logging by captureWarnings, not ignored), re-logged at DEBUG by `app.libraries`. SegLens says each problem
    once, in its own one line (app.errors); the library's wording, which may hold a patient's name or a path, is
    in the debug log. Idempotent; called by the CLI and by setup_file_logging (the viewer)."""
    # OpenCV's own warnings ("[ WARN:0@0.09] global grfmt_png.cpp … PNG input buffer is incomplete") would reach
    # the terminal before the one line SegLens prints for a damaged file. OpenCV reads the level once, at its first
    # message: the entry points call this before anything is decoded (a local Ray cluster's workers, started
    # later, inherit it). A user's own setting wins.
    os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    logging.captureWarnings(True)
    for name in LIBRARIES:
        library = logging.getLogger(name)
        library.setLevel(logging.WARNING)
        library.propagate = False
        if not any(isinstance(h, _AtDebug) for h in library.handlers):
            library.addHandler(_AtDebug())


class _AtDebug(logging.Handler):
    """A library's record re-logged at DEBUG by `app.libraries` (its level and logger named in the text)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a library's bad format string must not raise in its caller
            message = str(record.msg)
        logging.getLogger(_LIBRARY_LOG).debug("%s %s: %s", record.name, record.levelname, message.strip())


def file_ref(path: object) -> str:
    """How the log names an input at INFO and above: `file 3f2a9c01d4` (a hash of its path), not the path —
    image paths often hold patient names, and the log file outlives the session. The path itself goes to the
    log at DEBUG only (`private`), which the viewer does not write unless SEGLENS_LOG_LEVEL=DEBUG is set."""
    import hashlib

    return "file " + hashlib.sha256(os.fsencode(str(path))).hexdigest()[:10]


def private(logger: logging.Logger, level: int, path: object, message: str) -> None:
    """Log `message` (which may name `path`) with the path replaced by its reference, and in full at DEBUG. The
    path's folder goes too (a series' message names one of its slice files, a sibling of `path`), and so do
    the forms a message may spell them in (app.errors.shown's, the terminal's; app.errors.spelt's, a report
    cell's: a non-UTF-8 byte as \\xNN, a backslash that would read as an escape doubled)."""
    text = str(message)
    folder = Path(str(path)).parent
    for spelling in (spelt, shown, str):  # escaped forms first: raw may be inside one
        text = text.replace(spelling(str(path)), file_ref(path))
        if len(folder.parts) > 1:  # not "/" or "."
            text = text.replace(spelling(str(folder)), f"folder of {file_ref(path)}")
    logger.log(level, "%s", text)
    logger.debug("%s is %s", file_ref(path), path)


def log_exception(logger: logging.Logger, level: int, message: str, exc: BaseException) -> None:
    """`message` (which must name no path) with the exception's type and where it was raised, at `level`; the
    exception's own text — which often names an input (KeyError('/data/DOE^JANE/x.png'), an ImageError's line) —
    and the whole traceback only at DEBUG, as any path (`private`)."""
    logger.log(level, "%s: %s (its message is logged at DEBUG)\n%s", message, type(exc).__name__, _frames(exc))
    logger.debug("%s: %s", message, exc, exc_info=exc)


def _frames(exc: BaseException) -> str:
    """Where `exc` and the exceptions it came from were raised: file, line and code of each frame (SegLens's own
    source), their types — never their messages."""
    import traceback

    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__} raised at:\n" + "".join(traceback.format_tb(current.__traceback__)))
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return "".join(parts).rstrip("\n")


class RotatingFile(logging.FileHandler):
    """`seglens.log`, moved to `seglens.log.1` (… `.3`) when it passes `max_bytes`, at start-up and as it grows.

    logging.handlers.RotatingFileHandler does the same, but importing logging.handlers (sockets, pickle, queues)
    costs ~9 ms before the window can show (docs/PERFORMANCE.md).
    """

    def __init__(self, path: Path, *, max_bytes: int = 2_000_000, backups: int = 3) -> None:
        self.max_bytes, self.backups = max_bytes, backups
        if path.exists() and path.stat().st_size >= max_bytes:
            self._shift(path)
        super().__init__(path, encoding="utf-8")

    def _open(self) -> io.TextIOWrapper:
        """The log opened for appending through app.guard.shared: never through a symlink, FIFO or hard link
        planted as `seglens.log` (SEGLENS_LOG_DIR may name a folder others write into, a station's share)."""
        from app.guard.shared import open_append  # here, not at the top: the window's start-up imports stay small

        return io.TextIOWrapper(open_append(self.baseFilename), encoding=self.encoding or "utf-8",
                                errors=self.errors, line_buffering=False)

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        try:
            if self.stream is not None and self.stream.tell() >= self.max_bytes:
                self.stream.close()
                self._shift(Path(self.baseFilename))
                self.stream = self._open()
        except OSError:  # the log is best-effort: a full disk must not take the app down
            pass

    def _shift(self, path: Path) -> None:
        for index in range(self.backups - 1, 0, -1):
            older = path.with_name(f"{path.name}.{index}")
            if older.exists():
                os.replace(older, path.with_name(f"{path.name}.{index + 1}"))
        os.replace(path, path.with_name(f"{path.name}.1"))
