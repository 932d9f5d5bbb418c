"""Ultralytics' preprocessing, exactly, and the way back: the image letterboxed to the working size (one scale
for both sides, each resized side rounded and at least 1 pixel, the padding split around the image with their
`round(d - 0.1)` / `round(d + 0.1)`, grey 114), BGR to RGB, /255, NCHW float32; boxes and masks mapped back
to the image (their `scale_boxes` and `scale_masks`). A fixed-size ONNX is letterboxed to its full size
(`auto=False`); a dynamic one to the smallest rectangle of stride multiples around the resized image (`auto=True`,
as their predictor's `rect` does for a dynamic export).

The classify heads' input is Ultralytics' too (`classify_transforms`): the shorter side resized to the working size
(Pillow's bilinear, as torchvision's Resize does on a PIL image), the centre cropped, /255, no letterbox.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

PAD_VALUE = 114


@dataclass(frozen=True)
class Letterbox:
    """Where the image sits in the model's input: the resized size and the padding before it, from
    Ultralytics' own rounding (LetterBox.get_params, scale_boxes)."""

    image_hw: tuple[int, int]
    input_hw: tuple[int, int]
    resized_hw: tuple[int, int]
    top: int
    left: int

    @property
    def gain_xy(self) -> tuple[float, float]:
        """Input pixels per image pixel along x and y (scale_boxes' gain_x, gain_y: from the rounded sides)."""
        return self.resized_hw[1] / self.image_hw[1], self.resized_hw[0] / self.image_hw[0]


def fit(image_hw: tuple[int, int], input_hw: tuple[int, int], *, stride: int | None = None) -> Letterbox:
    """The letterbox of an image of `image_hw` into `input_hw` (LetterBox, scaleup, centred); with `stride` (a
    dynamic export) the padding only up to the next multiple of it (auto=True)."""
    h, w = image_hw
    r = min(input_hw[0] / h, input_hw[1] / w)
    new_w, new_h = max(round(w * r), 1), max(round(h * r), 1)
    pad_w, pad_h = input_hw[1] - new_w, input_hw[0] - new_h
    if stride is not None:
        pad_w, pad_h = pad_w % stride, pad_h % stride
    return Letterbox(image_hw, (new_h + pad_h, new_w + pad_w), (new_h, new_w), top=round(pad_h / 2 - 0.1),
                     left=round(pad_w / 2 - 0.1))


def letterbox_image(image: np.ndarray, box: Letterbox) -> np.ndarray:
    """The uint8 HWC image resized (bilinear, as cv2 does for them) and padded with 114 to the input size."""
    new_h, new_w = box.resized_hw
    if image.shape[:2] != (new_h, new_w):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    out = np.full((*box.input_hw, image.shape[2]), PAD_VALUE, dtype=image.dtype)
    out[box.top:box.top + new_h, box.left:box.left + new_w] = image
    return out


def to_tensor(image_bgr: np.ndarray, *, rgb: bool = False) -> np.ndarray:
    """HWC BGR (`rgb`: RGB) uint8 → [1, 3, H, W] RGB float32 in 0..1 (a one-channel image stays one channel)."""
    planes = image_bgr[..., ::-1] if image_bgr.shape[2] == 3 and not rgb else image_bgr
    tensor: np.ndarray = np.ascontiguousarray(planes.transpose(2, 0, 1)[None], dtype=np.float32) / np.float32(255)
    return tensor


def preprocess(image_bgr: np.ndarray, input_hw: tuple[int, int], *, stride: int | None = None, rgb: bool = False,
               ) -> tuple[np.ndarray, Letterbox]:
    """The model's input tensor for a BGR (`rgb`: RGB; or gray) uint8 image, and where the image sits in it
    (`stride`: a dynamic export's smallest rectangle, see `fit`)."""
    box = fit(image_bgr.shape[:2], input_hw, stride=stride)
    return to_tensor(letterbox_image(_hwc(image_bgr), box), rgb=rgb), box


def boxes_to_image(boxes: np.ndarray, box: Letterbox) -> np.ndarray:
    """Corner boxes [N, 4] (x0, y0, x1, y1) in input pixels → image pixels, clipped to the image (scale_boxes)."""
    gain_x, gain_y = box.gain_xy
    out = boxes.astype(np.float32, copy=True)
    out[:, [0, 2]] = (out[:, [0, 2]] - np.float32(box.left)) / np.float32(gain_x)
    out[:, [1, 3]] = (out[:, [1, 3]] - np.float32(box.top)) / np.float32(gain_y)
    h, w = box.image_hw
    out[:, [0, 2]] = out[:, [0, 2]].clip(0, w)
    out[:, [1, 3]] = out[:, [1, 3]].clip(0, h)
    return out


def centres_to_image(boxes: np.ndarray, box: Letterbox) -> np.ndarray:
    """Centre-size boxes [N, 4] (cx, cy, w, h) in input pixels → image pixels, not clipped (scale_boxes' xywh:
    an oriented box may reach past the image)."""
    gain_x, gain_y = box.gain_xy
    out = boxes.astype(np.float32, copy=True)
    out[:, 0] -= np.float32(box.left)
    out[:, 1] -= np.float32(box.top)
    out[:, [0, 2]] /= np.float32(gain_x)
    out[:, [1, 3]] /= np.float32(gain_y)
    return out


def classify_input(image_bgr: np.ndarray, size: tuple[int, int], *, rgb: bool = False) -> np.ndarray:
    """Ultralytics' classify input: the shorter side to `size` (square) or the image to `size` (not square) with
    Pillow's bilinear filter, the centre crop, RGB, /255, [1, 3, H, W] float32 (classify_transforms)."""
    from PIL import Image

    h, w = image_bgr.shape[:2]
    if size[0] == size[1]:
        short, long = (h, w) if h <= w else (w, h)
        new_long = int(size[0] * long / short)
        new_hw = (size[0], new_long) if h <= w else (new_long, size[0])
    else:
        new_hw = size
    picture = Image.fromarray(np.ascontiguousarray(_hwc(image_bgr)[..., :3]))
    if (h, w) != new_hw:
        picture = picture.resize((new_hw[1], new_hw[0]), resample=Image.Resampling.BILINEAR)
    top, left = round((new_hw[0] - size[0]) / 2.0), round((new_hw[1] - size[1]) / 2.0)
    resized = np.asarray(picture)
    return to_tensor(resized[top:top + size[0], left:left + size[1]], rgb=rgb)


def _hwc(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        return np.repeat(image[..., None], 3, axis=2)
    return image
