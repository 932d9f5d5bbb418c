"""The instances a reader corrects, as plain records (app/ui/state/instance_edits.py): the threshold hides the model's
weaker instances but never one the reader drew; a correction replaces the model's list for that picture only; the
export's list leaves out the pictures it is told to and those it cannot name."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.model.instances import Instance, Instances
from app.ui.state.instance_edits import InstanceBook, drawn_instance, redrawn
from app.ui.state.messages import ViewKey

A, B = ViewKey("a.png"), ViewKey("b.png")


def model_instances() -> Instances:
    mask = np.ones((10, 10), bool)
    return Instances((Instance(0, "pit", 0.9, (0.0, 0.0, 10.0, 10.0), mask, (0, 0, 10, 10)),
                      Instance(1, "scratch", 0.4, (20.0, 20.0, 30.0, 25.0))), (50, 60))


def test_the_threshold_hides_the_weaker_model_instances_not_the_drawn_ones():
    book = InstanceBook()
    book.saw(A, model_instances())
    assert [i.score for i in book.shown(A, 0.5).items] == [0.9]
    drawn = drawn_instance(1, "scratch", (5.2, 5.0, 14.6, 9.0), (50, 60), with_mask=False)
    book.add(A, drawn)
    assert book.shown(A, 0.99).items == (drawn,) and drawn.score == 1.0
    assert drawn.box == (5.0, 5.0, 15.0, 9.0) and drawn.mask is None
    assert book.shown(B, None) is None and book.is_corrected(A) and not book.is_corrected(B)


def test_delete_and_redraw_change_only_that_picture():
    book = InstanceBook()
    book.saw(A, model_instances())
    book.saw(B, model_instances())
    pit, scratch = book.items(A)
    book.delete(A, pit)
    new = redrawn(scratch, (40.0, 30.0, 70.0, 60.0), (50, 60))  # clipped to the image
    assert new is not None
    book.replace(A, scratch, new)
    (only,) = book.shown(A, None).items
    assert only.box == (40.0, 30.0, 60.0, 50.0) and only.class_name == "scratch" and only.mask is None
    assert len(book.shown(B, None)) == 2


def test_a_drawn_box_of_a_mask_model_has_its_mask_and_a_sliver_is_none():
    made = drawn_instance(0, "pit", (2.0, 3.0, 6.0, 5.0), (50, 60), with_mask=True)
    assert made is not None and made.mask_box == (2, 3, 6, 5) and made.area_px == 8
    assert drawn_instance(0, "pit", (2.0, 3.0, 2.2, 9.0), (50, 60), with_mask=True) is None


def test_the_labelled_pictures_leave_out_those_asked_and_those_without_a_name():
    book = InstanceBook()
    for key in (A, B, ViewKey("gone.png")):
        book.saw(key, model_instances())
    names = {A: "a.png", B: "sub/b.png"}
    found = book.labelled(names.get, 0.5, lambda key: key == A)
    assert [(name, len(instances)) for name, instances in found] == [("sub/b.png", 1)]
    book.clear()
    assert book.labelled(names.get, None, lambda key: False) == []


def test_a_painted_stroke_is_a_mask_inside_its_box_clipped_to_the_image():
    from app.ui.state.instance_edits import painted_instance

    made = painted_instance(2, "stain", [(10.0, 10.0), (20.0, 10.0)], 2, (50, 60), with_mask=True)
    assert made is not None and made.box == (8.0, 8.0, 23.0, 13.0) and made.mask.shape == (5, 15)
    assert made.mask[2].all() and made.score == 1.0  # the stroke's row painted end to end
    edge = painted_instance(0, "pit", [(0.0, 0.0)], 3, (50, 60), with_mask=False)
    assert edge is not None and edge.box == (0.0, 0.0, 4.0, 4.0) and edge.mask is None
    assert painted_instance(0, "pit", [(100.0, 100.0)], 3, (50, 60), with_mask=True) is None


def test_undo_takes_corrections_back_one_by_one_to_the_model_and_redo_makes_them_again():
    book = InstanceBook()
    book.saw(A, model_instances())
    pit, scratch = book.items(A)
    book.delete(A, pit)
    book.delete(A, scratch)
    assert book.items(A) == () and book.can_undo(A)
    assert book.undo(A) and book.items(A) == (scratch,)
    assert book.undo(A) and book.items(A) == (pit, scratch) and not book.is_corrected(A)
    assert not book.undo(A) and not book.can_undo(A)
    assert book.redo(A) and book.items(A) == (scratch,)
    book.add(A, pit)  # a new correction: nothing left to redo
    assert not book.redo(A) and book.items(A) == (scratch, pit)


def test_a_prompted_mask_becomes_a_mask_a_box_or_a_rotated_box_as_the_model_gives():
    import cv2

    from app.ui.state.instance_edits import prompted_instance

    mask = np.zeros((60, 80), np.uint8)
    corners = cv2.boxPoints(((40.0, 30.0), (40.0, 16.0), 30.0))
    cv2.fillPoly(mask, [np.round(corners).astype(np.int32)], 1)
    mask = mask.astype(bool)
    ys, xs = np.nonzero(mask)
    bounds = (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))
    segment = prompted_instance(2, "stain", mask, shape="mask")
    assert segment is not None and segment.box == bounds and segment.score == 1.0
    np.testing.assert_array_equal(segment.full_mask((60, 80)), mask)
    assert segment.mask.shape == (bounds[3] - bounds[1], bounds[2] - bounds[0])
    box = prompted_instance(2, "stain", mask, shape="box")
    assert box is not None and box.box == bounds and box.mask is None and box.rotated is None
    rotated = prompted_instance(2, "stain", mask, shape="rotated")
    assert rotated is not None and rotated.mask is None and rotated.angle is not None
    cx, cy, w, h, angle = rotated.rotated
    # the pixels' corners, not their centres: a pixel or two wider than the drawn 16 × 40
    assert abs(cx - 40) <= 1 and abs(cy - 30) <= 1 and sorted((w, h)) == pytest.approx([17.5, 41.5], abs=1.5)
    assert abs(abs(np.degrees(angle)) % 90 - 30) <= 3 or abs(abs(np.degrees(angle)) % 90 - 60) <= 3
    x0, y0, x1, y1 = rotated.box  # its bounds: the mask's, within a pixel
    assert max(abs(a - b) for a, b in zip((x0, y0, x1, y1), bounds, strict=True)) <= 1.5
    assert prompted_instance(0, "pit", np.zeros((5, 5), bool), shape="mask") is None
