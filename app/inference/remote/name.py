"""The name a remote model goes by ("remote host:port/model", never a path that looks like a local file) and the
bound on the input its server may ask for — apart from app.inference.remote.graph's metadata parsing so that the
pipeline, which every face imports (`seglens-cli serve` too), can bound a remote model's input without loading
the remote modules (pyproject's `serve-never-loads-the-client`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import InferenceError
from app.guard.answers import AnswerRefused, check_declared_input

if TYPE_CHECKING:
    from app.inference.model.spec import ModelSpec

REMOTE_PREFIX = "remote "  # ModelSpec.path of a remote model: Path("remote host:port/model"), its .name the model


def remote_path(host: str, model: str) -> Path:
    """What ModelSpec.path is for a remote model: `str()` reads "remote host:port/model", `.name` the model's name."""
    return Path(f"{REMOTE_PREFIX}{host}/{model}")


def is_remote_path(path: Path) -> bool:
    """Whether `path` names a remote model (remote_path), not a file on this machine."""
    return str(path).startswith(REMOTE_PREFIX) and not path.exists()


def check_declared_size(spec: ModelSpec, image_shape: Sequence[int]) -> None:
    """For a remote model whose input has a fixed size (each picture resized to it before it is uploaded): that
    size bounded by the picture it is given (app.guard.answers.check_declared_input), so a server declaring
    16384² cannot make SegLens upload a gigabyte for a 512² picture. InferenceError in one line, before anything
    is made or sent; a local model (its file is the user's) and a dynamic input are left alone."""
    if not str(spec.path).startswith(REMOTE_PREFIX) or spec.input.size is None:
        return
    try:
        check_declared_input(str(spec.path), (spec.input.channels, *spec.input.size), image_shape)
    except AnswerRefused as exc:
        raise InferenceError(str(exc)) from None
