"""MaskEdit.paint_mask (issue 28, contract 1): an accepted proposal is one undo step — its pixels become the class,
with `replace_in` the class inside the box is replaced (elsewhere it stays); undo and redo restore the exact
pixels; a proposal that changes nothing leaves no step."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.prompt.request import Box
from app.ui.state.mask_edit import MaskEdit


def start() -> np.ndarray:
    mask = np.zeros((30, 40), np.uint8)
    mask[2:6, 2:6] = 1  # class 1 outside the box below
    mask[12:16, 12:16] = 1  # class 1 inside it, not in the proposal
    mask[20:24, 20:24] = 2  # another class inside it
    return mask


def proposal() -> np.ndarray:
    mask = np.zeros((30, 40), bool)
    mask[18:22, 18:30] = True
    return mask


def test_paint_mask_adds_the_proposal_as_one_step_and_undo_redo_restore_the_exact_pixels():
    edit = MaskEdit(start())
    before = edit.mask.copy()
    assert edit.paint_mask(proposal(), 1) == (18, 18, 30, 22)
    expected = before.copy()
    expected[proposal()] = 1
    np.testing.assert_array_equal(edit.mask, expected)
    assert edit.changed and edit.can_undo
    assert edit.undo() is not None
    np.testing.assert_array_equal(edit.mask, before)
    assert not edit.can_undo and edit.can_redo
    edit.redo()
    np.testing.assert_array_equal(edit.mask, expected)


@pytest.mark.parametrize("box", [(10, 10, 30, 28), Box(10.5, 10.2, 29.5, 27.9)], ids=["tuple", "Box"])
def test_replace_in_clears_the_class_inside_the_box_only(box):
    edit = MaskEdit(start())
    before = edit.mask.copy()
    assert edit.paint_mask(proposal(), 1, replace_in=box) == (12, 12, 30, 22)
    expected = before.copy()
    expected[12:16, 12:16] = 0  # class 1 inside the box, not proposed: gone
    expected[proposal()] = 1  # the proposal over class 2 too
    np.testing.assert_array_equal(edit.mask, expected)
    assert (edit.mask[2:6, 2:6] == 1).all()  # outside the box: kept
    edit.undo()
    np.testing.assert_array_equal(edit.mask, before)


def test_a_proposal_that_changes_nothing_leaves_no_step():
    mask = start()
    edit = MaskEdit(mask)
    assert edit.paint_mask(mask == 1, 1) is None
    assert edit.paint_mask(np.zeros(mask.shape, bool), 1) is None
    assert edit.paint_mask(np.zeros(mask.shape, bool), 1, replace_in=(30, 0, 40, 10)) is None  # no class there
    assert not edit.can_undo and not edit.changed


def test_an_empty_proposal_with_replace_in_clears_the_class_in_the_box():
    edit = MaskEdit(start())
    assert edit.paint_mask(np.zeros((30, 40), bool), 1, replace_in=(0, 0, 10, 10)) == (2, 2, 6, 6)
    assert not (edit.mask[:10, :10] == 1).any() and (edit.mask == 1).sum() == 16


def test_a_proposal_of_another_size_is_refused():
    with pytest.raises(ValueError, match="a 4×3 proposal for a 40×30 mask"):
        MaskEdit(start()).paint_mask(np.zeros((3, 4), bool), 1)
