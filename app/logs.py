"""Logging to a rotating file in the user's log folder — works in a windowed frozen app with no console."""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

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


def setup_file_logging(level: int = logging.INFO) -> Path | None:
    """Attach a rotating file handler to the root logger; returns the file, or None when it can't be written.

    The log file is best-effort: a read-only or full home folder must not stop the app from starting.
    """
    root = logging.getLogger()
    root.setLevel(min(root.level or level, level))
    path = log_file()
    if any(getattr(h, "baseFilename", None) == str(path) for h in root.handlers):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(handler)
    return path
