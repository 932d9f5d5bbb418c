"""What a 3D model's run over a volume gives (VolumePrediction: probabilities and labels on the native grid, with the
run's size and timings), the check every volume passes before a run (no NaN or infinite voxels), and the model's
raw run as both windows call it (TimedRun: cast, timed, counted, checked finite). Shared by the
general 3D path (app.inference.volume3d.predict) and nnU-Net's recipe (app.inference.volume3d.nnunet)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from app.errors import SegLensError
from app.inference.model.spec import ModelSpec
from app.inference.runtime.finite import check_finite

Shape3 = tuple[int, int, int]
RawRun = Callable[[np.ndarray], np.ndarray | tuple[np.ndarray, ...]]
_DTYPES = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8}


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


class TimedRun:
    """The model's raw run over a batch of patches: cast to its input dtype, timed, counted (`runs`, `patches`,
    `seconds` in the session), its first output checked finite and returned as it is."""

    def __init__(self, spec: ModelSpec, run_raw: RawRun) -> None:
        self.spec, self._run_raw = spec, run_raw
        self._dtype = _DTYPES.get(spec.input.dtype, np.float32)
        self.patches = self.runs = 0
        self.seconds = 0.0

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        tensor = batch if batch.dtype == self._dtype else batch.astype(self._dtype)
        started = time.perf_counter()
        raw = self._run_raw(tensor)
        self.seconds += time.perf_counter() - started
        self.runs += 1
        self.patches += len(batch)
        output = np.asarray(raw[0] if isinstance(raw, tuple) else raw)
        check_finite(self.spec.path.name, (self.spec.output.name,), output)  # before an activation hides it
        return output
