"""Where the project's resources live, in a source tree and in a frozen (PyInstaller) build."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

BYTECODE_MIN_FREE = 256 << 20  # below this much free space SegLens leaves its own .pyc files unwritten


def cache_own_bytecode(*, min_free: int = BYTECODE_MIN_FREE) -> None:
    """Write .pyc files for SegLens's own modules from here on, run from a writable source tree (an entry point
    calls this first). uv's editable install compiles site-packages only, and where PYTHONDONTWRITEBYTECODE is set
    (these machines) SegLens's modules would be compiled from source at every launch: ~40 ms, most of it before
    the window and the first overlay (docs/PERFORMANCE.md). Caching them beside the source is what an installer
    does at install time; the libraries already have theirs. Frozen builds and read-only installs are untouched.

    Not on a nearly full disk, nor under a file-size limit: importlib writes a .pyc with one unchecked write, so a
    short write (ENOSPC part-way, RLIMIT_FSIZE) leaves a truncated .pyc in place, and every later start of SegLens
    then fails to import that module until the file is deleted."""
    folder = Path(__file__).parent
    if getattr(sys, "frozen", False) or not os.access(folder, os.W_OK) or not _room_for_bytecode(folder, min_free):
        return
    sys.dont_write_bytecode = False


def _room_for_bytecode(folder: Path, min_free: int) -> bool:
    try:
        if shutil.disk_usage(folder).free < min_free:
            return False
    except OSError:
        return False
    try:
        import resource
    except ImportError:  # Windows: no file-size limits
        return True
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    return soft == resource.RLIM_INFINITY


def install_root() -> Path:
    """The folder holding `models/` and `resources/`: the repo root, or the frozen bundle's data folder."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root)
    return Path(__file__).resolve().parent.parent


def install_kind() -> str:
    """How SegLens was installed, for the commands messages give: "frozen" (a packaged build), "checkout" (a clone
    with uv.lock beside pyproject.toml, where `uv sync` manages the environment) or "installed" (pip)."""
    if getattr(sys, "frozen", False):
        return "frozen"
    root = Path(__file__).resolve().parent.parent
    return "checkout" if (root / "uv.lock").is_file() and (root / "pyproject.toml").is_file() else "installed"


def extra_command(extra: str) -> str | None:
    """The command that adds one of SegLens's optional extras here (None in a frozen build: nothing to install)."""
    kind = install_kind()
    if kind == "frozen":
        return None
    return f"uv sync --extra {extra}" if kind == "checkout" else f"pip install 'seglens[{extra}]'"


def models_dir() -> Path:
    return install_root() / "models"


def samples_dir() -> Path:
    return install_root() / "resources" / "samples"


DEFAULT_MODEL_NAME = "surface_defects"


def default_model() -> Path:
    """The bundled demo model the viewer opens with."""
    return models_dir() / f"{DEFAULT_MODEL_NAME}.onnx"


def default_samples() -> Path:
    """The sample folder the viewer opens with: the default model's own samples, else all of them."""
    own = samples_dir() / "surface"
    return own if own.is_dir() else samples_dir()


def icons_dir() -> Path:
    """The app icon rendered at several sizes (seglens-<n>.png), from resources/icons/seglens.svg."""
    return install_root() / "resources" / "icons"


def icon_files() -> list[Path]:
    """The window icon's PNG files, smallest first (empty when the icons were not installed)."""
    return sorted(icons_dir().glob("seglens-*.png"), key=lambda p: int(p.stem.rsplit("-", 1)[-1]))


_BYTES = "fs-bytes:"  # no absolute path starts so


def setting_text(path: str | Path) -> str:
    """`path` as a settings value: itself, or — where it is not valid UTF-8 (Linux file names are bytes, and a
    QString drops those that do not decode) — `fs-bytes:` and the name's bytes in hex; `setting_path` reverses it."""
    text = str(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _BYTES + os.fsencode(text).hex()


def setting_path(text: str) -> str:
    """The path a settings value (`setting_text`) stands for."""
    if text.startswith(_BYTES):
        try:
            return os.fsdecode(bytes.fromhex(text[len(_BYTES):]))
        except ValueError:  # edited by hand: taken as it is
            return text
    return text
