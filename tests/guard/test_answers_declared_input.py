"""app.guard.answers.check_declared_input: a server's declared input bounded by the picture it is given, and —
before any picture (a session opening, its warm-up) — by the ceiling alone (issue 36, the remote helper's
addition: `image_shape=None`)."""

from __future__ import annotations

import pytest

from app.guard.answers import AnswerRefused, check_declared_input


@pytest.mark.parametrize(("declared", "picture"), [
    ((1, 3, 512, 512), (512, 512, 3)),  # the picture's own size
    ((1, 3, 1024, 1024), (256, 256)),  # 48× the picture, but a small input (under 4096² values): not refused
    ((1, 1, 6000, 6000), (3000, 3000)),  # 4× the picture exactly
    ((None, 3, None, None), (64, 64)),  # dynamic: the picture's size goes
])
def test_an_input_of_the_pictures_order_passes(declared, picture):
    check_declared_input("remote h:1/m", declared, picture)


@pytest.mark.parametrize(("declared", "picture", "said"), [
    ((1, 1, 6000, 6000), (512, 512), "declares an input of 1×1×6000×6000 (36000000 values) for a picture of "
                                     "512×512; refused"),
    ((1, 1, 16384, 16384), (16384, 16384), "declares an input of 1×1×16384×16384 (268435456 values) for a "
                                           "picture of 16384×16384; refused"),  # over the ceiling whatever the picture
])
def test_an_input_far_larger_than_the_picture_or_the_ceiling_is_refused_in_one_line(declared, picture, said):
    with pytest.raises(AnswerRefused) as caught:
        check_declared_input("remote h:1/m", declared, picture)
    assert str(caught.value) == f"remote h:1/m: the server {said}"


def test_without_a_picture_only_the_ceiling_bounds_it():
    check_declared_input("remote h:1/m", (1, 3, 4096, 4096), None)  # 50 M values: a large model, allowed
    check_declared_input("remote h:1/m", (None, 1, None, None), None)
    with pytest.raises(AnswerRefused) as caught:
        check_declared_input("remote h:1/m", (1, 1, 16384, 16384), None, max_elements=64 * 2**20)
    assert str(caught.value) == ("remote h:1/m: the server declares an input of 1×1×16384×16384 (268435456 values, "
                                 "more than the 67108864 SegLens uploads for one picture); refused")


@pytest.mark.parametrize("picture", [None, (512, 512)])
def test_a_declared_size_whose_product_overflows_64_bits_is_still_refused(picture):
    with pytest.raises(AnswerRefused, match=r"\(18446744073709551616 values"):
        check_declared_input("remote h:1/m", (1, 1, 2**32, 2**32), picture)  # int64 would wrap it to 0
