"""The user's imported nnU-Net models: a trained-model folder imported once into SegLens's models folder in the
user's data (platformdirs' user_data_dir("SegLens")/models: ~/.local/share/SegLens/models on Linux), every fold
with the checkpoint an import takes unasked (layout.default_folds), and kept there. The same folder again — the same
plans.json, dataset.json, fingerprint and checkpoints by their SHA-256 — is the model already kept, not a second
import. What the viewer does with a dropped folder; `seglens-cli import nnunet` writes where it is told instead.

Each import has its own folder, `<dataset>__<Trainer>__<Plans>__<configuration>-<12 hex of the hash>/`, holding
`<dataset>_<configuration>.onnx` and its sidecar: the importer writes the model, then the sidecar (a model without
its sidecar is not taken as kept: imported again), and a failed import leaves no folder behind."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.errors import ModelError
from app.guard.names import component, join_under
from app.guard.shared import remove_empty_under
from app.guard.untrusted import open_untrusted
from app.io.checkpoint import CHECKPOINT_FILE_LIMIT
from app.runs.imports.nnunet.folder import JSON_FILE_LIMIT
from app.runs.imports.nnunet.importer import import_nnunet
from app.runs.imports.nnunet.layout import CHECKPOINT_FILES, TRAINED_FILES, default_folds

_DESCRIBING = (*TRAINED_FILES, "dataset_fingerprint.json")  # what the sidecar is made from, beside the weights
_HASH_SHOWN = 12
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Kept:
    """The model kept for a trained-model folder: where, whether it was there already, what it holds."""

    model: Path
    reused: bool
    folds: tuple[str, ...]
    checkpoint: str  # checkpoint_final.pth or checkpoint_best.pth
    gaps: tuple[str, ...]  # what the import could not yet make exact (empty when reused: said at its import)


def user_models_dir() -> Path:
    """SegLens's models folder in the user's data (the kept imports; not the install's bundled models/)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("SegLens", appauthor=False)) / "models"


def keep_imported(folder: Path, *, models: Path | None = None,
                  step: Callable[[str], None] | None = None) -> Kept:
    """The model for the trained-model folder at `folder` in `models` (default: user_models_dir()): the one kept
    from an earlier import of the same files, else imported now. `step(line)`: what it is doing, for a status
    line. ModelError (or the importer's SegLensError) in one line; nothing is left in `models` then."""
    say = step or (lambda _line: None)
    folds, checkpoint = default_folds(folder)
    checkpoint_name = CHECKPOINT_FILES[checkpoint]
    say(f"reading {_counted_folds(folds)} of {folder.name}")
    digest = folder_digest(folder, folds, checkpoint_name)
    root = models or user_models_dir()
    name, stem = kept_names(folder, digest)
    model = join_under(root, name, f"{stem}.onnx")
    if model.is_file() and model.with_suffix(".yaml").is_file():
        return Kept(model, True, folds, checkpoint_name, ())
    say(f"compiling {_counted_folds(folds)} of {folder.name} into ONNX")
    try:
        done = import_nnunet(folder, model, folds=folds, checkpoint=checkpoint)
    except BaseException:  # a refusal or anything else: no empty folder left behind
        remove_empty_under(root, name)
        raise
    return Kept(done.model, False, done.folds, done.checkpoint, done.gaps)


def folder_digest(folder: Path, folds: tuple[str, ...], checkpoint_name: str) -> str:
    """SHA-256 over what an import of these folds reads: each describing file and checkpoint by its name in the
    folder and its own SHA-256 (each through the reading gate, beneath `folder`)."""
    total = hashlib.sha256()
    files = [(name, JSON_FILE_LIMIT) for name in _DESCRIBING if (folder / name).exists()]
    files += [(f"fold_{fold}/{checkpoint_name}", CHECKPOINT_FILE_LIMIT) for fold in folds]
    for relative, limit in files:
        total.update(f"{relative}\0{file_digest(folder / relative, root=folder, limit=limit)}\n".encode())
    return total.hexdigest()


def file_digest(path: Path, *, root: Path, limit: int) -> str:
    """The SHA-256 of the file at `path` beneath `root`, read in chunks; ModelError naming it if it cannot be."""
    digest = hashlib.sha256()
    try:
        with open_untrusted(path, limit=limit, root=root) as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except FileNotFoundError:
        raise ModelError(f"{path}: missing") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return digest.hexdigest()


def kept_names(folder: Path, digest: str) -> tuple[str, str]:
    """(the kept folder's name, the model file's stem) for a trained-model folder: its dataset (the folder above
    it, as nnU-Net lays its results out) and its own name, each one safe path component."""
    trained = folder.resolve()
    dataset = trained.parent.name or "nnunet"
    configuration = trained.name.rsplit("__", 1)[-1]
    return (component(f"{dataset}__{trained.name}-{digest[:_HASH_SHOWN]}"),
            component(f"{dataset}_{configuration}"))


def _counted_folds(folds: tuple[str, ...]) -> str:
    return f"fold {folds[0]}" if len(folds) == 1 else f"folds {', '.join(folds)}"
