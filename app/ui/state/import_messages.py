"""The records between a dropped trained-model folder's import and its worker thread: the folder to import, what
the import is doing, the model it kept (imported now or found from an earlier import) and a refusal's one line.
Each carries the request's id: an answer to an older request is ignored."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImportRequest:
    """Import the nnU-Net trained-model folder at `folder` into the user's models folder (or find it there)."""

    request_id: int
    folder: str


@dataclass(frozen=True)
class ImportStep:
    request_id: int
    line: str  # what the import is doing now ("compiling folds 0, 1 of … into ONNX")


@dataclass(frozen=True)
class ImportDone:
    """The model kept for the folder: `reused` when an earlier import of the same files was found."""

    request_id: int
    model: str
    reused: bool
    folds: tuple[str, ...]
    gaps: int  # how many "not yet exact" notes the import wrote into the sidecar (0 when reused)


@dataclass(frozen=True)
class ImportFailed:
    """The importer's refusal (or an unexpected failure) in one line; nothing was kept."""

    request_id: int
    message: str
