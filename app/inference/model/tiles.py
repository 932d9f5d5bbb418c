"""The sidecar's `input.tile` section as a record (TileSpec), its bounds, and which outputs can be tiled: what the
spec says about tiling (app.inference.image.tiling does the tiling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import with_article

BLENDS = ("gaussian", "linear", "constant")
# MONAI's sliding window takes any overlap below 1 and nnU-Net any step above 0, so neither bounds the work: at
# 0.99 a 600² image took a stride of 1 px, 288,369 tiles. 0.9 (a step of a tenth of the tile; nnU-Net's default
# is 0.5) keeps at most ~100 tiles over any pixel; a 16384² image in 128² tiles at 0.5 overlap needs 65,025
# tiles, so MAX_TILES stops only a tile size that is a typo.
MAX_OVERLAP = 0.9
MAX_TILES = 65_536


@dataclass(frozen=True)
class TileSpec:
    """The sidecar's `input.tile` section (defaults when absent)."""

    overlap: float = 0.25
    blend: str = "gaussian"
    size: tuple[int, int] = (1024, 1024)  # dynamic models only; a fixed model's tile is its input size
    max_pixels: int = 4096 * 4096  # dynamic models: tiled only above this many pixels
    batch: int = 1  # tiles per session.run (models with a dynamic batch axis)


def tile_spec_from(values: dict[str, Any]) -> TileSpec:
    """The TileSpec of a validated sidecar's flat values (`input.tile.overlap` …), defaults for the rest."""
    prefix = "input.tile."
    return TileSpec(**{k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)})


def untileable(output_kind: str) -> str | None:
    """Why a model with this output kind cannot be tiled, or None: tiles blend per-pixel scores."""
    if output_kind in ("binary", "scores"):
        return None
    return (f"the model's output is {with_article(output_kind)} output; tiled inference blends per-pixel scores "
            "([N,C,H,W] scores or a [N,1,H,W] binary map)")
