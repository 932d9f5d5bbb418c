"""Value checks of the sidecar's 3D keys (input.patch, spacing, axes, tta; app.inference.model.spec3d uses them): each
returns the clean value or raises ValueError("must be …, got …"), which app.inference.model.sidecar prefixes with the
file and key."""

from __future__ import annotations

from typing import Any

from app.inference.model.validators import boolean, choice, number, shown

MAX_PATCH_SIDE = 2048  # a 3D patch side in voxels (nnU-Net's are 28 to 320)
MAX_SPACING_MM = 1000.0


def patch_size(value: Any) -> tuple[int, int, int]:
    """`input.patch`: [D, H, W] voxels, each 1 to MAX_PATCH_SIDE."""
    if (not isinstance(value, list | tuple) or len(value) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_PATCH_SIDE for v in value)):
        raise ValueError(f"must be [D, H, W] in voxels (1 to {MAX_PATCH_SIDE} each), got {shown(value)}")
    return int(value[0]), int(value[1]), int(value[2])


def spacing_mm(value: Any) -> tuple[float, float, float] | None:
    """`input.spacing`: [d, h, w] mm, each above 0, or null (the volume's own spacing)."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ValueError(f"must be [d, h, w] in mm (or null: the volume's own), got {shown(value)}")
    steps = tuple(number(v) for v in value)
    if not all(0.0 < v <= MAX_SPACING_MM for v in steps):
        raise ValueError(f"must be [d, h, w] in mm, each above 0 and at most {MAX_SPACING_MM:g}, got {shown(value)}")
    return steps[0], steps[1], steps[2]


_OPPOSITES = ("RL", "AP", "SI")


def axes_code(value: Any) -> str:
    """`native` or a 3-letter orientation code (RAS, LPS, SPL …): each of R/L, A/P and S/I exactly once."""
    code = value.strip() if isinstance(value, str) else ""
    if code.lower() == "native":
        return "native"
    code = code.upper()
    if len(code) == 3 and all(sum(letter in pair for letter in code) == 1 for pair in _OPPOSITES):
        return code
    raise ValueError(f"must be native or a 3-letter orientation code with each of R/L, A/P and S/I once (RAS, LPS, "
                     f"SPL, ...), got {shown(value)}")


def tta_axes(value: Any) -> tuple[int, ...]:
    """`mirror` (all three axes), `{mirror: [0, 2]}` (those axes: 0 = D, 1 = H, 2 = W), or null/false (off)."""
    if value is None or value is False:
        return ()
    if value == "mirror":
        return 0, 1, 2
    if not isinstance(value, dict) or set(value) != {"mirror"}:
        raise ValueError(f"must be mirror or {{mirror: [axes]}} (0 = D, 1 = H, 2 = W), got {shown(value)}")
    axes = value["mirror"]
    if (not isinstance(axes, list) or not 1 <= len(axes) <= 3
            or not all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a <= 2 for a in axes)
            or len(set(axes)) != len(axes)):
        raise ValueError(f"must mirror 1 to 3 different axes among 0 (D), 1 (H), 2 (W), got {shown(axes)}")
    return tuple(sorted(axes))


def positive(value: Any) -> float:
    """A finite number above 0 (a standard deviation: it divides)."""
    amount = number(value)
    if amount <= 0:
        raise ValueError(f"must be a number above 0, got {shown(value)}")
    return amount


def clip_range(value: Any) -> tuple[float, float] | None:
    """`input.normalize.clip`: [lo, hi] intensities (HU) with lo < hi, or null (no clip)."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"must be [lo, hi] or null, got {shown(value)}")
    low, high = number(value[0]), number(value[1])
    if high <= low:
        raise ValueError(f"must be [lo, hi] with low < high, got {shown(value)}")
    return low, high


# `input.normalize`: its keys' checks; which of them a kind needs is app.inference.model.spec3d's to say
NORMALIZE_KEYS = {
    "kind": choice("ct", "zscore"),
    "clip": clip_range,
    "mean": number,
    "std": positive,
    "nonzero": boolean,
}
