"""The checks a labels file someone else wrote passes value by value, and the bounds on it: each refusal is a few
words (`Bad`) that the reader puts after the file's name in its one line."""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.inference.model.instances import Instance
from app.io.decoded import DEFAULT_MAX_PIXELS

MAX_SIDE = 1 << 16  # an image's width or height
MAX_PIXELS = DEFAULT_MAX_PIXELS  # an image's width × height: a run-length mask is decoded at that size
MAX_INSTANCES = 10_000  # per image (COCOeval looks at 100)
MAX_POINTS = 100_000  # numbers in one instance's polygons
MAX_MASK_PIXELS = 1 << 28  # one image's masks together (their cropped boxes): a whole 16k² image and a little more
MAX_COORDINATE = 1e6  # a polygon's point, in pixels: anything further is no point of an image


class Bad(ValueError):
    """What is wrong with one value, in a few words."""


def integer(value: object, what: str, *, low: int = 0, high: int = 1 << 62) -> int:
    """`value` as an int in [low, high] (a JSON integer, not a bool nor a float)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Bad(f"{what} is not a whole number ({_shown(value)})")
    if not low <= value <= high:
        raise Bad(f"{what} {value} is out of range ({low}…{high})")
    return value


def number(value: object, what: str) -> float:
    """`value` as a finite float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Bad(f"{what} is not a number ({_shown(value)})")
    result = float(value)
    if not math.isfinite(result):
        raise Bad(f"{what} is not a finite number")
    return result


def numbers(value: object, what: str, *, count: int | None = None, most: int = MAX_POINTS) -> list[float]:
    """`value` as a list of finite floats, `count` of them when given, at most `most`."""
    if not isinstance(value, list):
        raise Bad(f"{what} is not a list of numbers")
    if (count is not None and len(value) != count) or len(value) > most:
        raise Bad(f"{what} holds {len(value)} numbers, not {count if count is not None else f'at most {most}'}")
    return [number(item, what) for item in value]


def text(value: object, what: str) -> str:
    """`value` as a non-empty string of at most 1,000 characters."""
    if not isinstance(value, str) or not value or len(value) > 1000:
        raise Bad(f"{what} is not a name ({_shown(value)})")
    return value


def image_size(width: object, height: object) -> tuple[int, int]:
    """(h, w) of an image, each side 1…MAX_SIDE and their product at most MAX_PIXELS."""
    w = integer(width, "width", low=1, high=MAX_SIDE)
    h = integer(height, "height", low=1, high=MAX_SIDE)
    if w * h > MAX_PIXELS:
        raise Bad(f"an image of {w} × {h} pixels is over the limit of {MAX_PIXELS:,}")
    return h, w


def coordinates(values: Sequence[float], what: str) -> None:
    """Refuse a point further than MAX_COORDINATE pixels from the image."""
    if any(abs(v) > MAX_COORDINATE for v in values):
        raise Bad(f"{what} has a point more than {MAX_COORDINATE:.0e} pixels away")


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "…"



def mask_pixels(total: int, item: Instance, what: str) -> int:
    """`total` (the pixels of one image's masks decoded so far) with `item`'s; Bad past MAX_MASK_PIXELS (a few bytes
    of run-length counts or a polygon over the whole image decode to its every pixel: checked as each is made)."""
    total += 0 if item.mask is None else int(item.mask.size)
    if total > MAX_MASK_PIXELS:
        raise Bad(f"{what}'s masks hold more than {MAX_MASK_PIXELS:,} pixels together")
    return total
