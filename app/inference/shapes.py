"""Pure shape reasoning for rank-4 image tensors: which axis holds the channels, of an input and of an output."""

from __future__ import annotations


def image_layout(shape: tuple) -> tuple[str | None, int]:
    """("NCHW" | "NHWC", channels) when axis 1 or 3 holds 1 or 3 channels, else (None, 0)."""
    if shape[1] in (1, 3):
        return "NCHW", shape[1]
    if shape[3] in (1, 3):
        return "NHWC", shape[3]
    return None, 0


def channel_axis(out_shape: tuple, in_layout: str, in_hw: tuple) -> int:
    """Axis 1 or 3 of a rank-4 output: the only fixed one; else the one leaving spatial dims shaped like the
    input's H/W (a fixed [1,21,16,16] head of a 64×64 model is NCHW); else the input's layout."""
    fixed = [axis for axis in (1, 3) if isinstance(out_shape[axis], int)]
    preferred = 1 if in_layout == "NCHW" else 3
    if len(fixed) == 1:
        return fixed[0]
    if len(fixed) == 2 and None not in in_hw:
        fits = [axis for axis in (1, 3) if same_aspect(spatial(out_shape, axis), in_hw)]
        if len(fits) == 1:
            return fits[0]
    return preferred


def spatial(shape: tuple, channel_axis: int) -> tuple:
    return (shape[2], shape[3]) if channel_axis == 1 else (shape[1], shape[2])


def same_aspect(hw: tuple, reference: tuple) -> bool:
    h, w = hw
    return isinstance(h, int) and isinstance(w, int) and h * reference[1] == w * reference[0] and h <= reference[0]
