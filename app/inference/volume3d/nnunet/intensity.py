"""nnU-Net's normalisation schemes (nnunetv2/preprocessing/normalization/default_normalization_schemes.py), one
graph input channel at a time, on the cropped volume before it is resampled:
- ct: clip to the training set's 0.5/99.5 percentiles, minus its mean, over its standard deviation;
- zscore: the volume's own mean and standard deviation — over the non-zero mask (holes filled) when `mask`, the
  voxels outside it left at 0 — else over every voxel;
- none: as is; rescale01: minus the minimum, over the (shifted) maximum; rgb01: over 255.
The standard deviation is kept above 1e-8 as nnU-Net does. Statistics are float64 sums of the float32 voxels.
"""

from __future__ import annotations

import numpy as np

from app.inference.model.nnunet_recipe import ChannelNorm

_EPS = 1e-8


def normalised(channel: np.ndarray, norm: ChannelNorm, mask: np.ndarray | None) -> np.ndarray:
    """`channel` (float32 [D, H, W], cropped) normalised as a new float32 array; `mask` the crop's non-zero mask."""
    image = np.array(channel, np.float32, copy=True)
    if norm.scheme == "ct":
        assert norm.clip is not None
        np.clip(image, norm.clip[0], norm.clip[1], out=image)
        image -= np.float32(norm.mean)
        image /= np.float32(max(norm.std, _EPS))
    elif norm.scheme == "zscore":
        _zscore(image, mask if norm.mask else None)
    elif norm.scheme == "rescale01":
        image -= image.min()
        image /= np.float32(max(float(image.max()), _EPS))
    elif norm.scheme == "rgb01":
        image /= np.float32(255.0)
    return image


def _zscore(image: np.ndarray, mask: np.ndarray | None) -> None:
    values = image[mask] if mask is not None else image
    if values.size == 0:
        return
    mean = float(values.mean(dtype=np.float64))
    std = float(values.std(dtype=np.float64))
    scale = np.float32(1.0 / max(std, _EPS))
    if mask is None:
        image -= np.float32(mean)
        image *= scale
    else:
        image[mask] = (values - np.float32(mean)) / np.float32(max(std, _EPS))
