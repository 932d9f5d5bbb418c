"""nnU-Net's logits → labels (`convert_predicted_logits_to_segmentation_with_correct_shape`): each logit channel
resampled back to the cropped grid (the `resample_back` rule), then
- classes: softmax, and the argmax (the first of equal maxima);
- regions: a sigmoid per region, each region's label painted where it is above 0.5, in regions_class_order;
- parts (several part-models in one graph): each part's argmax, its non-background labels painted over the earlier
  parts' with their global labels.
Channels are resampled one at a time and kept as float16, so the memory is the kept probabilities' plus one channel's
float32. The probabilities kept are per label: a class's softmax, a region's sigmoid, a part's class probability;
label 0's is the softmax background (regions: 1 − the largest region's; parts: the smallest part background).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.inference.model.nnunet_recipe import NnunetRecipe
from app.inference.volume3d.nnunet.resample import resample_channels

Spacing = Sequence[float]


@dataclass(frozen=True)
class Decision:
    probabilities: np.ndarray  # [labels, d, h, w] float16 on the cropped grid
    labels: np.ndarray  # [d, h, w] uint8


def decide(logits: np.ndarray, recipe: NnunetRecipe, *, shape: Sequence[int], current: Spacing,
           target: Spacing) -> Decision:
    """Labels and probabilities on the cropped grid of `shape` from the model grid's `logits` [K, ...]."""
    back = _Back(logits, recipe, shape, current, target)
    if recipe.regions_class_order is not None:
        return _regions(back, recipe.regions_class_order)
    if recipe.parts is not None:
        return _parts(back, [(part.outputs, part.labels) for part in recipe.parts])
    probabilities, labels = _softmax(back, range(logits.shape[0]))
    return Decision(probabilities, labels)


class _Back:
    """One logit channel at a time, resampled back to the cropped grid as float32."""

    def __init__(self, logits: np.ndarray, recipe: NnunetRecipe, shape: Sequence[int], current: Spacing,
                 target: Spacing) -> None:
        self._logits, self._recipe = logits, recipe
        self.shape, self._current, self._target = tuple(shape), current, target

    def channel(self, k: int) -> np.ndarray:
        back: np.ndarray = resample_channels(self._logits[k:k + 1], self.shape, self._current, self._target,
                                 self._recipe.resample_back)[0]
        return back


def _softmax(back: _Back, channels: range) -> tuple[np.ndarray, np.ndarray]:
    """Softmax probabilities (float16, one per channel) and the argmax index within `channels`."""
    kept = np.empty((len(channels), *back.shape), np.float16)
    best = np.full(back.shape, -np.inf, np.float32)
    labels = np.zeros(back.shape, np.uint8)
    for index, k in enumerate(channels):
        values = back.channel(k)
        above = values > best
        labels[above] = index
        np.maximum(best, values, out=best)
        kept[index] = values
    for d in range(back.shape[0]):  # softmax slice by slice from the kept logits
        plane = np.exp(kept[:, d].astype(np.float32) - best[d])
        plane /= plane.sum(axis=0)
        kept[:, d] = plane
    return kept, labels


def _regions(back: _Back, order: Sequence[int]) -> Decision:
    probabilities = np.zeros((max(order) + 1, *back.shape), np.float16)
    labels = np.zeros(back.shape, np.uint8)
    largest = np.zeros(back.shape, np.float32)
    for k, label in enumerate(order):
        sigmoid = 1.0 / (1.0 + np.exp(-back.channel(k)))
        labels[sigmoid > 0.5] = label
        probabilities[label] = sigmoid
        np.maximum(largest, sigmoid, out=largest)
    probabilities[0] = 1.0 - largest
    return Decision(probabilities, labels)


def _parts(back: _Back, parts: Sequence[tuple[int, Sequence[int]]]) -> Decision:
    probabilities = np.zeros((max(max(labels) for _, labels in parts) + 1, *back.shape), np.float16)
    probabilities[0] = 1
    labels = np.zeros(back.shape, np.uint8)
    first = 0
    for outputs, names in parts:
        kept, local = _softmax(back, range(first, first + outputs))
        mapping = np.asarray(names, np.uint8)
        painted = local != 0
        labels[painted] = mapping[local[painted]]
        np.minimum(probabilities[0], kept[0], out=probabilities[0])
        for index in range(1, outputs):
            probabilities[names[index]] = kept[index]
        first += outputs
    return Decision(probabilities, labels)
