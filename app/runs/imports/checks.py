"""What every importer does the same way: a checkpoint's state-dict keys freed of the wrappers training adds
(DataParallel/DDP's `module.`, torch.compile's `_orig_mod.`, stripped as nnUNetTrainer.load_checkpoint does), and
the sidecar it made read back by SegLens's own reader before anything is written (a refusal names the model's
sidecar, not the scratch copy)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from app.errors import ModelError, SidecarError
from app.guard.shared import atomic_write

PREFIXES = ("module.", "_orig_mod.")


def unprefixed(weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`weights` with each key's training-wrapper prefixes removed."""
    found: dict[str, np.ndarray] = {}
    for key, value in weights.items():
        for prefix in PREFIXES:
            key = key.removeprefix(prefix)
        found[key] = value
    return found


def check_sidecar(text: str, out: Path) -> None:
    """ModelError (one line naming `out`'s sidecar) when SegLens's sidecar reader refuses `text`."""
    from app.inference.model.sidecar import load_sidecar

    with tempfile.TemporaryDirectory(prefix="seglens-import-") as scratch:
        path = Path(scratch) / out.with_suffix(".yaml").name
        atomic_write(path, text.encode("utf-8"), private=True)
        try:
            load_sidecar(path)
        except SidecarError as exc:
            raise ModelError(str(exc).replace(str(path), str(out.with_suffix(".yaml")))) from None
