"""What an nnU-Net v2 trained-model folder looks like from outside, told from names alone (no file opened): a folder
named `<Trainer>__<Plans>__<configuration>` holding plans.json, dataset.json and `fold_N/` folders with a checkpoint;
and which folds and checkpoint an import takes when nobody chooses (as nnU-Net's predictor does by default: the
numbered folds, checkpoint_final.pth). Cheap enough for every folder a user drops or opens."""

from __future__ import annotations

import os
from pathlib import Path

from app.errors import ModelError

TRAINED_FILES = ("plans.json", "dataset.json")
CHECKPOINT_FILES = {"final": "checkpoint_final.pth", "best": "checkpoint_best.pth"}
_FOLD_PREFIX = "fold_"


def looks_like_nnunet_folder(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is laid out as an nnU-Net trained-model folder: its name `<T>__<P>__<c>`, plans.json and
    dataset.json in it, and at least one fold folder with a checkpoint (nothing is read; read_folder checks it)."""
    folder = Path(os.path.abspath(path))
    try:
        if not _trained_name(folder.name) or not folder.is_dir():
            return False
        return all((folder / name).is_file() for name in TRAINED_FILES) and bool(_folds_with(folder, None))
    except OSError:
        return False


def default_folds(folder: Path) -> tuple[tuple[str, ...], str]:
    """The folds and checkpoint ("final" or "best") an import takes unasked: the numbered folds that have
    checkpoint_final.pth, else fold_all with it; the same with checkpoint_best.pth when no fold has a final one.
    ModelError naming the folder when no fold has either."""
    for checkpoint in CHECKPOINT_FILES:
        found = _folds_with(folder, checkpoint)
        numbered = tuple(sorted((fold for fold in found if fold.isdigit()), key=int))
        if numbered or "all" in found:
            return numbered or ("all",), checkpoint
    raise ModelError(f"{folder}: no fold_N folder holds {' or '.join(CHECKPOINT_FILES.values())} (a trained model "
                     "has fold_0/checkpoint_final.pth …)")


def _trained_name(name: str) -> bool:
    parts = name.split("__")
    return len(parts) == 3 and all(parts)


def _folds_with(folder: Path, checkpoint: str | None) -> tuple[str, ...]:
    """The folds (`0`, `all`, …) whose folder holds that checkpoint (None: either), links not followed."""
    names = tuple(CHECKPOINT_FILES.values()) if checkpoint is None else (CHECKPOINT_FILES[checkpoint],)
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if (entry.name.startswith(_FOLD_PREFIX) and entry.is_dir(follow_symlinks=False)
                    and any(os.path.isfile(os.path.join(entry.path, name)) for name in names)):
                found.append(entry.name.removeprefix(_FOLD_PREFIX))
    return tuple(found)
