"""One run at a time per output folder.

Two runs writing into one `--out` would interleave report rows, each remove the other's temporaries as stale
and replace each other's masks. A run therefore holds `<out>/.seglens-run.lock`, created exclusively through
app.guard.shared (no check-then-create race, never through a link planted under the name) and removed when the run
ends. The lock says who holds it: the process id, its start time (/proc/<pid>/stat field 22), the kernel's boot id
and PID namespace, the machine id and the host name. A lock whose process is gone (a run killed with kill -9) is
taken over; so is one whose process id is alive but belongs to another process (a PID reused: another start time),
and one written in an earlier boot of this machine (its boot id differs; the host may have been renamed since).
One held by another machine (a shared folder), or another container of this one (another PID namespace), cannot be
checked and is refused with its path, so the user can remove it once that run is known to be over. Where /proc is
not there (macOS, Windows) the process id and host name alone decide, as before.
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
from app.guard.shared import open_new, remove_under
from app.guard.untrusted import SMALL_FILE_LIMIT, read_untrusted

LOCK_NAME = ".seglens-run.lock"
_WRITING_S = 2.0  # a lock younger than this that does not read whole is being written: waited for, not taken over


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
        deadline = time.monotonic() + _WRITING_S
        for _ in range(3):
            if self._create():
                self._held = True
                return
            owner = self._owner()
            while owner is None and self._young() and time.monotonic() < deadline:
                time.sleep(0.05)  # just created by another run, its record not written yet
                owner = self._owner()
            if owner is not None and _alive(owner):
                raise OutputError(_busy_message(self.path, owner))
            self._remove_stale()
        raise OutputError(f"{self.path}: cannot take the output folder's lock; remove the file if no run is active")

    def release(self) -> None:
        if self._held:
            self._held = False
            with contextlib.suppress(OSError, ValueError):
                remove_under(self.path.parent, LOCK_NAME, folders=False)

    def _create(self) -> bool:
        record = {"pid": os.getpid(), "host": platform.node(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                  **this_process()}
        try:
            with open_new(self.path) as handle:  # O_EXCL, O_NOFOLLOW: a planted link is "there", never followed
                handle.write(json.dumps(record).encode("utf-8"))
        except FileExistsError:
            return False
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot write ({exc.strerror or exc})") from exc
        return True

    def _owner(self) -> dict[str, Any] | None:
        try:  # rooted in the output folder: a link under the name is not read through (it is stale, removed)
            owner = json.loads(read_untrusted(self.path, limit=SMALL_FILE_LIMIT, root=self.path.parent))
        except (OSError, ValueError):
            return None  # unreadable or half-written by a run that died at once: stale
        return owner if isinstance(owner, dict) else None

    def _young(self) -> bool:
        try:
            return time.time() - os.lstat(self.path).st_mtime < _WRITING_S
        except OSError:
            return False

    def _remove_stale(self) -> None:
        try:
            remove_under(self.path.parent, LOCK_NAME, folders=False)  # a planted link: the link itself; a folder: kept
        except OSError as exc:
            raise OutputError(f"{self.path}: a finished run's lock cannot be removed ({exc.strerror or exc})") \
                from exc


def this_process() -> dict[str, str | int]:
    """What tells this process apart from any other, where the system says it: the boot id, the PID namespace,
    the machine id and this process's start time in clock ticks since boot."""
    found: dict[str, str | int] = {}
    for key, value in (("boot_id", _boot_id()), ("pid_ns", _pid_namespace()), ("machine_id", _machine_id()),
                       ("start_ticks", start_ticks(os.getpid()))):
        if value is not None:
            found[key] = value
    return found


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/<pid>/stat field 22), or None where it cannot
    be read. The name (field 2) may hold spaces and parentheses: the fields are counted after its last `)`."""
    try:
        text = read_untrusted(f"/proc/{pid}/stat", limit=4096)
        return int(text[text.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _boot_id() -> str | None:
    return _proc_text("/proc/sys/kernel/random/boot_id")


def _machine_id() -> str | None:
    return _proc_text("/etc/machine-id")


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except (OSError, AttributeError):
        return None


def _proc_text(path: str) -> str | None:
    try:
        text = read_untrusted(path, limit=4096).decode("ascii").strip()
    except (OSError, ValueError):
        return None
    return text or None


def _alive(owner: dict[str, Any]) -> bool:
    """Whether the run that wrote the lock may still be running (another machine's: assume it is)."""
    boot, written_in = _boot_id(), owner.get("boot_id")
    if boot is not None and isinstance(written_in, str):
        if written_in != boot:  # an earlier boot of this machine is over; another machine's cannot be checked
            return not _same_machine(owner)
        if owner.get("pid_ns") != _pid_namespace():
            return True  # another container on this host: its process ids are not ours to look at
        return _running(owner)  # this boot: the host name may have changed since, the process decides
    if owner.get("host") != platform.node():
        return True
    return _running(owner)


def _same_machine(owner: dict[str, Any]) -> bool:
    machine = _machine_id()
    if machine is not None and isinstance(owner.get("machine_id"), str):
        return bool(owner["machine_id"] == machine)
    return bool(owner.get("host") == platform.node())


def _running(owner: dict[str, Any]) -> bool:
    """Whether the lock's process is running: its process id alive and, where both are known, started when the
    lock says (a process id is reused once its process is gone)."""
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
    except OverflowError:
        return False
    except PermissionError:
        pass  # a process of another user: alive, and its start time says whether it is the lock's
    ticks, written = start_ticks(pid), owner.get("start_ticks")
    return ticks is None or not isinstance(written, int) or ticks == written


def _busy_message(path: Path, owner: dict[str, Any]) -> str:
    where = "this machine" if owner.get("host") == platform.node() else owner.get("host", "another machine")
    return (f"{path.parent}: another SegLens run is writing here (process {owner.get('pid')} on {where}, since "
            f"{owner.get('started', '?')}); wait for it, choose another folder, or remove {path.name} if that run "
            "is over")
