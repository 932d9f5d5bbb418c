"""What the ct3d_demo model is: its sidecar, its grid (target spacing, patch), the CT normalisation, the linear
resampling and the data sets (numpy only, no torch): the sidecar's semantics as SegLens applies them (VOLUME3D),
so that the model is trained on exactly what the app feeds it.
"""

from __future__ import annotations

import numpy as np

from . import common, phantom3d

NAME = "ct3d_demo"
TARGET_SPACING = (1.5, 1.5, 1.5)  # mm along D, H, W: isotropic, coarser in-plane and finer along z than native
PATCH = (64, 64, 64)
CLIP = (-1000.0, 1000.0)
SIZE_DIVISOR = 8  # three 2x poolings
N_TRAIN = 48  # training volumes (TRAIN_SEED)
N_EVAL = 10  # held-out volumes (EVAL_SEED)

SIDECAR: dict = {
    "name": "CT lungs, bone & lesions 3D (demo, synthetic)",
    "task": "segmentation",
    "input": {
        "modality": "CT",
        "patch": list(PATCH),
        "spacing": list(TARGET_SPACING),
        "axes": "SPL",  # the phantom arrays: [slice toward S, row toward P, column toward L]
        "normalize": {"kind": "ct", "clip": list(CLIP), "mean": None, "std": None},  # filled by train3d
        "tile": {"overlap": 0.5, "blend": "gaussian", "pad": "edge"},  # trained on crops inside the phantoms
        "size_divisor": SIZE_DIVISOR,
    },
    "output": {"activation": "softmax"},
    "classes": [
        {"name": "background"},
        {"name": "lung", "color": "#4aa3ff",
         "code": {"category": ["SCT", "91723000", "Anatomical Structure"], "type": ["SCT", "39607008", "Lung"]}},
        {"name": "bone", "color": "#ffd60a",
         "code": {"category": ["SCT", "91723000", "Anatomical Structure"], "type": ["SCT", "272673000", "Bone"]}},
        {"name": "lesion", "color": "#ff375f",
         "code": {"category": ["SCT", "49755003", "Morphologically Altered Structure"],
                  "type": ["SCT", "52988006", "Lesion"]}},
    ],
}


def class_names() -> list[str]:
    return [c["name"] for c in SIDECAR["classes"]]


def _linear_axis(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Linear resampling of one axis to ``size`` samples, half-pixel centres (torch's align_corners=False: the
    source coordinate (m + 0.5) * N / M - 0.5, clamped to the first and last sample)."""
    n = a.shape[axis]
    if n == size:
        return a
    src = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0, n - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, n - 1)
    shape = [1] * a.ndim
    shape[axis] = size
    w = (src - i0).astype(np.float32).reshape(shape)
    return np.take(a, i0, axis=axis) * (1 - w) + np.take(a, i1, axis=axis) * w


def resample_linear(array: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """[C, D, H, W] (or [D, H, W]) float32, trilinear to ``shape`` (= torch interpolate, align_corners=False)."""
    out = array.astype(np.float32, copy=False)
    off = out.ndim - 3
    for axis, size in enumerate(shape):
        out = _linear_axis(out, axis + off, size)
    return np.ascontiguousarray(out, np.float32)


def normalize(hu: np.ndarray, mean: float, std: float) -> np.ndarray:
    """The sidecar's ``input.normalize`` (kind ct): clip to CLIP, then (x - mean) / std."""
    return ((np.clip(hu.astype(np.float32), *CLIP) - mean) / std).astype(np.float32)


def model_item(seed: int, index: int) -> tuple[np.ndarray, np.ndarray, phantom3d.Phantom]:
    """(HU float32 on the model grid, soft targets uint8 [4, D', H', W'] in 1/255, the phantom) of phantom
    ``index`` of data set ``seed``: the image resampled as the app resamples it, the targets from the analytic
    anatomy (``phantom3d.targets``)."""
    ph = phantom3d.phantom(seed, index)
    shape = phantom3d.model_grid(ph.hu.shape, ph.spacing, TARGET_SPACING)
    hu = resample_linear(ph.hu.astype(np.float32), shape)
    cov = np.rint(phantom3d.targets(ph, shape) * 255).astype(np.uint8)
    return hu, cov, ph


def dataset_stats(hus: list[np.ndarray]) -> tuple[float, float]:
    """Mean and std of the clipped HU over every voxel of the training volumes (model grid)."""
    total = sum(h.size for h in hus)
    mean = sum(float(np.clip(h, *CLIP).sum(dtype=np.float64)) for h in hus) / total
    var = sum(float(((np.clip(h, *CLIP) - mean) ** 2).sum(dtype=np.float64)) for h in hus) / total
    return round(mean, 2), round(float(np.sqrt(var)), 2)


def load_sidecar_normalize(models_dir=common.MODELS_DIR) -> dict:
    """The committed sidecar's normalisation (the training set's mean/std) into SIDECAR, for evaluation."""
    import yaml

    norm = yaml.safe_load((models_dir / f"{NAME}.yaml").read_text())["input"]["normalize"]
    SIDECAR["input"]["normalize"].update(mean=norm["mean"], std=norm["std"])
    return norm
