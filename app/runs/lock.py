"""One run at a time per output folder.

Two runs writing into one `--out` would interleave report rows, each remove the other's temporaries as stale
and replace each other's masks. A run therefore holds `<out>/.seglens-run.lock`, created exclusively (no
check-then-create race) and removed when the run ends. A lock whose process is gone (a killed run) is taken
over; one held by another machine (a shared folder) cannot be checked and is refused with its path, so the user
can remove it once that run is known to be over.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from app.errors import OutputError
from app.guard.untrusted import SMALL_FILE_LIMIT, read_untrusted

LOCK_NAME = ".seglens-run.lock"


class OutputLock:
    def __init__(self, out_dir: Path) -> None:
        self.path = Path(out_dir) / LOCK_NAME
        self._held = False

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise OutputError(f"{self.path.parent}: is a file, not a folder: choose a folder for the outputs")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{self.path.parent}: cannot create the output folder ({exc.strerror or exc})") from exc
        for _ in range(3):
            if self._create():
                self._held = True
                return
            owner = self._owner()
            if owner is not None and _alive(owner):
                raise OutputError(_busy_message(self.path, owner))
            self._remove_stale()
        raise OutputError(f"{self.path}: cannot take the output folder's lock; remove the file if no run is active")

    def release(self) -> None:
        if self._held:
            self._held = False
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def _create(self) -> bool:
        record = {"pid": os.getpid(), "host": platform.node(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot write ({exc.strerror or exc})") from exc
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        return True

    def _owner(self) -> dict[str, Any] | None:
        try:
            owner = json.loads(read_untrusted(self.path, limit=SMALL_FILE_LIMIT).decode("utf-8"))  # FIFO: stale
        except (OSError, ValueError):
            return None  # unreadable or half-written by a run that died at once: stale
        return owner if isinstance(owner, dict) else None

    def _remove_stale(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise OutputError(f"{self.path}: a finished run's lock cannot be removed ({exc.strerror or exc})") \
                from exc


def _alive(owner: dict[str, Any]) -> bool:
    """Whether the run that wrote the lock may still be running (another machine's: assume it is)."""
    if owner.get("host") != platform.node():
        return True
    try:
        pid = int(owner.get("pid", 0))
    except (TypeError, ValueError):
        return False
    if pid <= 0:  # never os.kill(0 or -1, …): those name process groups
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # a process of another user: do not take it over
    return True


def _busy_message(path: Path, owner: dict[str, Any]) -> str:
    where = "this machine" if owner.get("host") == platform.node() else owner.get("host", "another machine")
    return (f"{path.parent}: another SegLens run is writing here (process {owner.get('pid')} on {where}, since "
            f"{owner.get('started', '?')}); wait for it, choose another folder, or remove {path.name} if that run "
            "is over")
