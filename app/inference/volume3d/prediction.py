"""What a 3D model's run over a volume gives (VolumePrediction: probabilities and labels on the native grid, with the
run's size and timings), and the check every volume passes before a run: no NaN or infinite voxels. Shared by the
general 3D path (app.inference.volume3d.predict) and nnU-Net's recipe (app.inference.volume3d.nnunet)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.errors import SegLensError

Shape3 = tuple[int, int, int]


@dataclass(frozen=True)
class VolumePrediction:
    """A 3D model's answer on the native grid, kept so a threshold, heatmap or verdict needs no new run."""

    probabilities: np.ndarray  # [K, D, H, W] float16 on the native grid (K = 1 for a binary model), activated
    labels: np.ndarray  # [D, H, W] uint8 on the native grid (argmax / threshold of the probabilities)
    patches: int  # patch evaluations (windows × TTA passes); one per session run at batch 1
    timings: dict[str, float] = field(default_factory=dict)  # ms: preprocess, inference, postprocess; session
    model_shape: Shape3 = (0, 0, 0)  # the grid the model ran on (after resampling and reorientation)
    runs: int = 0  # session runs made (a batch of patches is one run)



def check_voxels(native: np.ndarray) -> None:
    """SegLensError (one line) for a volume with NaN or infinite voxels: they would spread through the
    normalisation into every patch and read as a broken model. Slice by slice: no mask of the whole volume."""
    bad = [int(np.count_nonzero(~np.isfinite(native[:, k]))) for k in range(native.shape[1])]
    total = sum(bad)
    if total:
        first = next(k for k, n in enumerate(bad) if n)
        voxels = "1 voxel that is" if total == 1 else f"{total} voxels that are"
        raise SegLensError(f"the volume has {voxels} not a number (NaN or infinite), the first in slice {first + 1} "
                           f"of {native.shape[1]}: a 3D model cannot run on {'it' if total == 1 else 'them'}")
