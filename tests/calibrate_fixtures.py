"""OK / NG sets for the calibration tests (the CLI's and the viewer's): the anomaly demo model's own synthetic
surfaces at its working size, and the bundled model copied with its sidecar (a write must never change the
repository's)."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED = 29


def write_surfaces(folder: Path, count: int, *, defective: bool, seed: int = SEED) -> Path:
    """`count` clean (or defective) surfaces as ok_000.png … (ng_000.png …) in a new `folder`: the set
    `python -m models.training.calibration_set` writes (the one the docs calibrate)."""
    from models.training import calibration_set  # the anomaly model's own synthetic surfaces, at its working size

    return calibration_set.write_surfaces(folder, count, defective=defective, seed=seed)


def copy_demo(into: Path) -> Path:
    """The bundled anomaly model and its sidecar, copied into `into`: the copy's .onnx path."""
    for suffix in (".onnx", ".yaml"):
        shutil.copy(REPO / "models" / f"surface_anomaly{suffix}", into / f"surface_anomaly{suffix}")
    return into / "surface_anomaly.onnx"

