"""How nnU-Net's logits become labels (app.inference.volume3d.nnunet.decide): softmax + argmax (the first of equal
maxima), region sigmoids painted in regions_class_order, and part-models' label maps merged in order."""

from __future__ import annotations

import numpy as np

from app.inference.model.nnunet_recipe import ChannelNorm, NnunetRecipe, Part
from app.inference.volume3d.nnunet.decide import decide

CT = (ChannelNorm("ct", clip=(-100.0, 100.0)),)
SAME = (1.0, 1.0, 1.0)


def logits_of(*channels: list[float]) -> np.ndarray:
    """[K, 1, 1, N] logits: channel k's values along W."""
    return np.asarray(channels, np.float32)[:, None, None, :]


def test_softmax_classes_take_the_argmax_and_keep_the_softmax():
    logits = logits_of([0.0, 2.0, 1.0], [1.0, 2.0, 0.0], [3.0, -1.0, 1.0])
    decision = decide(logits, NnunetRecipe(channels=CT), shape=(1, 1, 3), current=SAME, target=SAME)
    assert decision.labels[0, 0].tolist() == [2, 0, 0]  # a tie (2.0, 2.0) goes to the first
    expected = np.exp(logits[:, 0, 0]) / np.exp(logits[:, 0, 0]).sum(axis=0)
    np.testing.assert_allclose(decision.probabilities[:, 0, 0], expected, atol=1e-3)


def test_regions_are_painted_in_their_class_order_where_their_sigmoid_is_above_a_half():
    # whole tumour [1, 2, 3] painted 1, core [2, 3] painted 2, enhancing [3] painted 3 (BraTS)
    recipe = NnunetRecipe(channels=CT, regions=((1, 2, 3), (2, 3), (3,)), regions_class_order=(1, 2, 3))
    logits = logits_of([-2.0, 2.0, 2.0, 2.0, -1.0], [-2.0, -2.0, 2.0, 2.0, 1.0], [-2.0, -2.0, -2.0, 2.0, -1.0])
    decision = decide(logits, recipe, shape=(1, 1, 5), current=SAME, target=SAME)
    assert decision.labels[0, 0].tolist() == [0, 1, 2, 3, 2]  # the last: core alone still paints 2
    assert decision.probabilities.shape[0] == 4
    np.testing.assert_allclose(decision.probabilities[3, 0, 0, 3], 1 / (1 + np.exp(-2.0)), atol=1e-3)


def test_parts_paint_their_labels_over_the_earlier_parts():
    recipe = NnunetRecipe(channels=CT + CT, parts=(Part(3, (0, 1, 2)), Part(2, (0, 3))))
    part1 = [[5.0, 0.0, 0.0, 0.0], [0.0, 5.0, 0.0, 5.0], [0.0, 0.0, 5.0, 0.0]]
    part2 = [[5.0, 5.0, 5.0, 0.0], [0.0, 0.0, 0.0, 5.0]]
    decision = decide(logits_of(*part1, *part2), recipe, shape=(1, 1, 4), current=SAME, target=SAME)
    assert decision.labels[0, 0].tolist() == [0, 1, 2, 3]  # part 2's label 3 painted over part 1's 1
    assert decision.probabilities.shape[0] == 4


def test_logits_are_resampled_back_before_the_decision():
    logits = logits_of([1.2, 1.2], [0.0, 1.5])  # along W: 2 model voxels back to 4 native ones
    decision = decide(logits, NnunetRecipe(channels=CT), shape=(1, 1, 4), current=(1.0, 1.0, 2.0),
                      target=SAME)
    # linear back (resample_back order 1): class 1's logit 0, 0.375, 1.125, 1.5 against class 0's 1.2 (nearest
    # would give 1.5 at voxel 2 and label it 1)
    assert decision.labels[0, 0].tolist() == [0, 0, 0, 1]
