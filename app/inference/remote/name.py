"""The name a remote model goes by: ModelSpec.path is "remote host:port/model", never a path that looks like a local
file. Whether a spec's model is remote is said by the spec itself (ModelSpec.remote), not read from this name."""

from __future__ import annotations

from pathlib import Path

REMOTE_PREFIX = "remote "  # ModelSpec.path of a remote model: Path("remote host:port/model"), its .name the model


def remote_path(host: str, model: str) -> Path:
    """What ModelSpec.path is for a remote model: `str()` reads "remote host:port/model", `.name` the model's name."""
    return Path(f"{REMOTE_PREFIX}{host}/{model}")


def is_remote_path(path: Path) -> bool:
    """Whether `path` names a remote model (remote_path), not a file on this machine."""
    return str(path).startswith(REMOTE_PREFIX) and not path.exists()
