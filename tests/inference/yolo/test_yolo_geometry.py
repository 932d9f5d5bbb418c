"""Ultralytics' letterbox and its way back, the bilinear resampling of the masks, and its two NMS (greedy for
boxes, Fast-NMS on the probabilistic IoU for oriented boxes), on tiny arrays."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from app.inference.yolo.letterbox import (
    boxes_to_image,
    centres_to_image,
    classify_input,
    fit,
    letterbox_image,
    preprocess,
    to_tensor,
)
from app.inference.yolo.masks import _bilinear, _resamplers, instance_masks
from app.inference.yolo.nms import fast_nms_rotated, nms, probiou


@pytest.mark.parametrize(("image_hw", "input_hw", "resized", "top", "left"), [
    ((240, 400), (160, 160), (96, 160), 32, 0),
    ((333, 187), (160, 160), (160, 90), 0, 35),
    ((105, 160), (160, 160), (105, 160), 27, 0),  # 55 rows of padding: 27 above, 28 below (their round(d ∓ 0.1))
    ((100, 100), (160, 224), (160, 160), 0, 32),  # scaled up, as Ultralytics does (scaleup)
    ((1, 3000), (160, 160), (1, 160), 79, 0),  # a thin image keeps a row (159 rows: 79 above)
])
def test_the_letterbox_rounds_as_ultralytics(image_hw: tuple[int, int], input_hw: tuple[int, int],
                                             resized: tuple[int, int], top: int, left: int) -> None:
    box = fit(image_hw, input_hw)
    assert (box.resized_hw, box.top, box.left) == (resized, top, left)


def test_a_dynamic_export_is_padded_to_the_next_stride_multiple_only() -> None:
    box = fit((240, 400), (160, 160), stride=32)  # 96 × 160 resized: 96 is a multiple already
    assert (box.input_hw, box.top, box.left) == ((96, 160), 0, 0)
    box = fit((333, 187), (160, 160), stride=32)  # 160 × 90: 6 columns to 96, 3 on each side
    assert (box.input_hw, box.top, box.left) == ((160, 96), 0, 3)


def test_the_padding_is_grey_114_around_the_resized_image() -> None:
    image = np.full((105, 160, 3), 7, dtype=np.uint8)
    out = letterbox_image(image, fit(image.shape[:2], (160, 160)))
    assert out.shape == (160, 160, 3)
    assert (out[:27] == 114).all() and (out[27:132] == 7).all() and (out[132:] == 114).all()


def test_the_tensor_is_rgb_over_255_nchw() -> None:
    image = np.zeros((2, 3, 3), dtype=np.uint8)
    image[..., 0] = 255  # blue, in BGR
    tensor = to_tensor(image)
    assert tensor.shape == (1, 3, 2, 3) and tensor.dtype == np.float32
    assert (tensor[0, 2] == 1).all() and (tensor[0, :2] == 0).all()


def test_a_gray_image_becomes_three_channels() -> None:
    tensor, box = preprocess(np.full((40, 80), 200, dtype=np.uint8), (64, 64))
    assert tensor.shape == (1, 3, 64, 64) and box.resized_hw == (32, 64)
    assert np.allclose(tensor[0, :, 16:48], 200 / 255)


def test_boxes_go_back_to_the_image_and_are_clipped() -> None:
    box = fit((240, 400), (160, 160))  # gain 0.4, 32 rows above
    back = boxes_to_image(np.array([[40.0, 52.0, 80.0, 72.0], [-10.0, 0.0, 170.0, 200.0]]), box)
    np.testing.assert_allclose(back, [[100, 50, 200, 100], [0, 0, 400, 240]])
    centred = centres_to_image(np.array([[60.0, 62.0, 40.0, 20.0]]), box)
    np.testing.assert_allclose(centred, [[150, 75, 100, 50]])  # the size scaled, not shifted


def test_classify_input_resizes_the_short_side_and_crops_the_centre() -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (60, 100, 3), dtype=np.uint8)
    tensor = classify_input(image, (32, 32))
    resized = np.asarray(Image.fromarray(image).resize((53, 32), resample=Image.Resampling.BILINEAR))
    expected = resized[:, 10:42, ::-1].transpose(2, 0, 1)[None] / 255  # int(32 * 100 / 60) = 53, crop at 10
    np.testing.assert_allclose(tensor, expected, atol=1e-6)


@pytest.mark.parametrize(("size_in", "size_out"), [(10, 40), (40, 10), (7, 13), (13, 7)])
def test_the_bilinear_matrix_is_pytorch_s_resize(size_in: int, size_out: int) -> None:
    """cv2's INTER_LINEAR uses the same half-pixel rule without antialiasing as PyTorch's bilinear."""
    values = np.random.default_rng(1).random((size_in, 5)).astype(np.float32)
    expected = cv2.resize(values, (5, size_out), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(_bilinear(size_in, size_out) @ values, expected, atol=1e-5)


def test_a_mask_is_the_prototype_resampled_and_cut_to_its_box() -> None:
    protos = np.full((32, 40, 40), -1.0, dtype=np.float32)
    protos[0, 10:30, 10:30] = 1.0  # a square in the middle of a 160 × 160 input
    coeffs = np.zeros((2, 32), dtype=np.float32)
    coeffs[:, 0] = 1.0
    boxes = np.array([[0.0, 0.0, 160.0, 160.0], [0.0, 0.0, 60.5, 160.0]])
    (whole, whole_box), (cut, cut_box) = instance_masks(protos, coeffs, boxes, (160, 160))
    assert whole_box == (0, 0, 160, 160) and cut_box == (0, 0, 61, 160)
    rows, cols = np.nonzero(whole)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (40, 119, 40, 119)
    assert cut.shape == (160, 61) and cut[41:119, 41:].all() and not cut[:, :40].any()  # corners: bilinear


def test_masks_follow_the_letterbox_back_to_the_image() -> None:
    protos = np.full((32, 40, 40), -1.0, dtype=np.float32)
    protos[0, 8:32, :] = 1.0  # the image's rows (a 2:1 picture letterboxed: 8 prototype rows of padding each side)
    coeffs = np.zeros((1, 32), dtype=np.float32)
    coeffs[0, 0] = 1.0
    [(mask, box)] = instance_masks(protos, coeffs, np.array([[0.0, 0.0, 200.0, 100.0]]), (100, 200))
    assert box == (0, 0, 200, 100) and mask.all()


@pytest.mark.parametrize("image_hw", [(720, 1280), (333, 187), (160, 160), (1000, 37)])
def test_masks_inside_their_boxes_equal_the_whole_resampling_matrices(image_hw: tuple[int, int]) -> None:
    """Each mask is made from the few prototype pixels its box draws on: the same as both whole resampling
    matrices applied to the whole prototype logits, cut to the box (but for pixels within float rounding of 0)."""
    rng = np.random.default_rng(7)
    protos = rng.standard_normal((32, 40, 40)).astype(np.float32)
    coeffs = rng.standard_normal((12, 32)).astype(np.float32)
    h, w = image_hw
    corners = np.sort(rng.uniform(-10, [w + 10, h + 10], (12, 2, 2)), axis=1).reshape(12, 4)
    boxes = np.clip(corners[:, [0, 2, 1, 3]], 0, [w, h, w, h])
    boxes[0] = (0, 0, w, h)
    rows, columns = _resamplers(40, 40, image_hw)
    for coeff, (mask, (x0, y0, x1, y1)) in zip(coeffs, instance_masks(protos, coeffs, boxes, image_hw), strict=True):
        whole = (rows @ np.einsum("c,chw->hw", coeff, protos) @ columns.T)[y0:y1, x0:x1]
        assert mask.shape == whole.shape
        assert np.array_equal(mask[np.abs(whole) > 1e-4], whole[np.abs(whole) > 1e-4] > 0)


def test_greedy_nms_keeps_the_best_of_overlapping_boxes() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30], [0, 0, 10, 10]], dtype=np.float32)
    scores = np.array([0.5, 0.9, 0.3, 0.4], dtype=np.float32)
    assert nms(boxes, scores, 0.7).tolist() == [1, 2]
    assert nms(boxes, scores, 1.0).tolist() == [1, 0, 3, 2]  # nothing overlaps by more than 1


def test_greedy_nms_keeps_a_box_at_exactly_the_limit() -> None:
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 5]], dtype=np.float32)  # IoU 0.5
    assert nms(boxes, np.array([0.9, 0.8]), 0.5).tolist() == [0, 1]
    assert nms(boxes, np.array([0.9, 0.8]), 0.49).tolist() == [0]


def test_probiou_of_a_box_with_itself_and_far_away() -> None:
    box = np.array([[50, 50, 20, 10, 0.3]], dtype=np.float64)
    turned = np.array([[50, 50, 10, 20, 0.3 + np.pi / 2]])  # the same box, described the other way
    far = np.array([[500, 500, 20, 10, 0.3]])
    assert probiou(box, box)[0, 0] == pytest.approx(1.0, abs=1e-3)
    assert probiou(box, turned)[0, 0] == pytest.approx(1.0, abs=1e-3)
    assert probiou(box, far)[0, 0] == pytest.approx(0.0, abs=1e-6)


def test_fast_nms_drops_a_box_overlapped_by_a_dropped_one() -> None:
    """A > B > C in score; A overlaps B, B overlaps C, A not C: greedy NMS keeps C, Fast-NMS drops it too."""
    boxes = np.array([[0, 0, 10, 10, 0], [3, 0, 10, 10, 0], [6, 0, 10, 10, 0]], dtype=np.float64)
    scores = np.array([0.9, 0.8, 0.7])
    ious = probiou(boxes, boxes)
    assert ious[0, 1] > 0.5 and ious[1, 2] > 0.5 and ious[0, 2] < 0.5
    assert fast_nms_rotated(boxes, scores, 0.5).tolist() == [0]
    assert fast_nms_rotated(boxes[[2, 0]], scores[[2, 0]], 0.5).tolist() == [1, 0]
