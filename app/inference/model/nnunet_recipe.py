"""nnU-Net's prediction recipe as a 3D model's sidecar says it (the `nnunet:` section, written by `seglens-cli import
nnunet`): its crop, per-channel normalisation, resampling rules, window step, and how its outputs become labels
(softmax classes, sigmoid regions painted in order, or several part-models' label maps merged). When present, the
3D path runs the model as nnU-Net's own predictor does (app.inference.volume3d.nnunet).

The sidecar parser checks each value's form (NNUNET_KEYS); `recipe_from_sidecar` checks them against the model
(its input channels and output classes) and refuses a mismatch in one line naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.inference.model.validators import KeyedValueError, boolean, choice, fraction, number, shown, whole

SCHEMES = ("ct", "zscore", "none", "rescale01", "rgb01")
ORDERS = (0, 1, 3)
MAX_PARTS = 64
MAX_REGIONS = 255


@dataclass(frozen=True)
class Resampling:
    """One of nnU-Net's resampling rules (its resampling_fn_*_kwargs and the anisotropy threshold)."""

    order: int = 3
    order_z: int = 0
    force_separate_z: bool | None = None
    anisotropy_threshold: float = 3.0


@dataclass(frozen=True)
class ChannelNorm:
    """How one graph input channel is made: which volume channel feeds it, normalised by which scheme."""

    scheme: str  # ct | zscore | none | rescale01 | rgb01
    source: int = 0  # the volume's channel (its file, in dataset.json's order)
    clip: tuple[float, float] | None = None  # ct: the training set's 0.5 and 99.5 percentiles
    mean: float = 0.0  # ct: the training set's foreground mean
    std: float = 1.0
    mask: bool = False  # zscore: statistics over the non-zero region (use_mask_for_norm), the rest left at 0


@dataclass(frozen=True)
class Part:
    """One part-model's outputs in a merged graph: its channel count and the global label of each of them."""

    outputs: int
    labels: tuple[int, ...]


@dataclass(frozen=True)
class NnunetRecipe:
    channels: tuple[ChannelNorm, ...]
    resample: Resampling = Resampling()
    resample_back: Resampling = Resampling(order=1, order_z=0)
    crop_nonzero: bool = True
    slice_spacing: str = "model"  # "volume": a 2D configuration keeps each volume's own slice spacing
    step: float = 0.5
    regions: tuple[tuple[int, ...], ...] | None = None  # region-based: each output's labels
    regions_class_order: tuple[int, ...] | None = None  # the label painted where each region's sigmoid > 0.5
    parts: tuple[Part, ...] | None = None

    @property
    def sources(self) -> int:
        """How many channels the volume must have."""
        return max(channel.source for channel in self.channels) + 1


def _order(value: Any) -> int:
    if value not in ORDERS or isinstance(value, bool):
        raise ValueError(f"must be a spline order, one of {', '.join(map(str, ORDERS))}, got {shown(value)}")
    return int(value)


def _maybe_bool(value: Any) -> bool | None:
    return None if value is None else boolean(value)


RESAMPLING_KEYS = {"order": _order, "order_z": _order, "force_separate_z": _maybe_bool}


def _resampling(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping {{order, order_z, force_separate_z}}, got {shown(value)}")
    unknown = next((k for k in value if k not in RESAMPLING_KEYS), None)
    if unknown is not None:
        raise KeyedValueError(f".{unknown}", f"is not a resampling key ({', '.join(RESAMPLING_KEYS)})")
    out: dict[str, Any] = {}
    for key, value_here in value.items():
        try:
            out[key] = RESAMPLING_KEYS[key](value_here)
        except ValueError as exc:
            raise KeyedValueError(f".{key}", str(exc)) from None
    return out


def _channel(value: Any) -> ChannelNorm:
    if not isinstance(value, dict) or "scheme" not in value:
        raise ValueError(f"must be a mapping with a scheme ({' | '.join(SCHEMES)}), got {shown(value)}")
    known = {"scheme", "source", "clip", "mean", "std", "mask"}
    unknown = next((k for k in value if k not in known), None)
    if unknown is not None:
        raise KeyedValueError(f".{unknown}", f"is not a channel key ({', '.join(sorted(known))})")
    scheme: str = choice(*SCHEMES)(value["scheme"])
    source: int = whole(0, 63)(value.get("source", 0))
    if scheme == "ct":
        return _ct_channel(value, source)
    if any(k in value for k in ("clip", "mean", "std")):
        raise ValueError(f"clip, mean and std apply to scheme ct, not {scheme}")
    if "mask" in value and scheme != "zscore":
        raise ValueError(f"mask applies to scheme zscore, not {scheme}")
    return ChannelNorm(scheme, source=source, mask=boolean(value.get("mask", False)))


def _ct_channel(value: dict[str, Any], source: int) -> ChannelNorm:
    missing = next((k for k in ("clip", "mean", "std") if k not in value), None)
    if missing is not None:
        raise ValueError(f"scheme ct needs {missing} (the training set's intensity statistics)")
    clip = value["clip"]
    if not (isinstance(clip, list) and len(clip) == 2 and clip[0] <= clip[1]):
        raise ValueError(f"clip must be [low, high] with low <= high, got {shown(clip)}")
    std = number(value["std"])
    if std < 0:
        raise ValueError(f"std must not be negative, got {shown(std)}")
    return ChannelNorm("ct", source=source, clip=(number(clip[0]), number(clip[1])), mean=number(value["mean"]),
                       std=std)


def _channels(value: Any) -> tuple[ChannelNorm, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= 64:
        raise ValueError(f"must be a list of 1 to 64 channels, got {shown(value)}")
    out = []
    for index, item in enumerate(value):
        try:
            out.append(_channel(item))
        except KeyedValueError as exc:
            raise KeyedValueError(f"[{index}]{exc.subkey}", str(exc)) from None
        except ValueError as exc:
            raise KeyedValueError(f"[{index}]", str(exc)) from None
    return tuple(out)


def _label_lists(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_REGIONS:
        raise ValueError(f"must be a list of 1 to {MAX_REGIONS} label lists, got {shown(value)}")
    out = []
    for index, item in enumerate(value):
        items = item if isinstance(item, list) else [item]
        if not items or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 256 for v in items):
            raise KeyedValueError(f"[{index}]", f"must be labels above 0, got {shown(item)}")
        out.append(tuple(items))
    return tuple(out)


def _labels(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 256
                                              for v in value) or not value:
        raise ValueError(f"must be a list of labels (0 to 255), got {shown(value)}")
    return tuple(value)


def _parts(value: Any) -> tuple[Part, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_PARTS:
        raise ValueError(f"must be a list of 1 to {MAX_PARTS} parts, got {shown(value)}")
    out = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or set(item) != {"outputs", "labels"}:
            raise KeyedValueError(f"[{index}]", f"must be {{outputs: K, labels: [...]}}, got {shown(item)}")
        outputs: int = whole(1, 1 << 12)(item["outputs"])
        labels = _labels(item["labels"])
        if len(labels) != outputs:
            raise KeyedValueError(f"[{index}]", f"has {outputs} outputs but {len(labels)} labels")
        out.append(Part(outputs, labels))
    return tuple(out)


NNUNET_KEYS: dict[str, Any] = {
    "crop_nonzero": boolean,
    "resample": _resampling,
    "resample_back": _resampling,
    "anisotropy_threshold": number,
    "slice_spacing": choice("model", "volume"),
    "step": fraction,
    "channels": _channels,
    "regions": _label_lists,
    "regions_class_order": _labels,
    "parts": _parts,
}


def painted_labels(values: Mapping[str, Any]) -> int | None:
    """How many label values a recipe that paints labels (regions, parts) makes — its class count, which is not
    the graph's output count — or None (softmax classes: one per output)."""
    order: tuple[int, ...] | None = values.get("nnunet.regions_class_order")
    if order:
        return max(order) + 1
    parts: tuple[Part, ...] | None = values.get("nnunet.parts")
    if parts:
        return max(max(part.labels) for part in parts) + 1
    return None


class RecipeError(ValueError):
    """A recipe that does not fit its model: `key` (under nnunet.) and the problem."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key, self.problem = key, problem


def recipe_from_sidecar(values: Mapping[str, Any], *, channels: int, outputs: int) -> NnunetRecipe | None:
    """The recipe from the sidecar's checked `nnunet.*` values (None without the section), checked against the
    graph's `channels` inputs and `outputs` channels: RecipeError naming the key when it does not fit."""
    keys = {k.removeprefix("nnunet."): v for k, v in values.items() if k.startswith("nnunet.")}
    if not keys:
        return None
    norms: tuple[ChannelNorm, ...] | None = keys.get("channels")
    if norms is None:
        raise RecipeError("channels", "is missing: one normalisation per input channel")
    if len(norms) != channels:
        raise RecipeError("channels", f"lists {len(norms)} but the model takes {channels}")
    threshold = float(keys.get("anisotropy_threshold", 3.0))
    if threshold <= 0:
        raise RecipeError("anisotropy_threshold", f"must be above 0, got {shown(threshold)}")
    step = float(keys.get("step", 0.5))
    if step <= 0:
        raise RecipeError("step", "must be above 0 and at most 1")
    recipe = NnunetRecipe(
        channels=norms, crop_nonzero=bool(keys.get("crop_nonzero", True)), step=step,
        resample=Resampling(**{"order": 3, "order_z": 0, **keys.get("resample", {}),
                               "anisotropy_threshold": threshold}),
        resample_back=Resampling(**{"order": 1, "order_z": 0, **keys.get("resample_back", {}),
                                    "anisotropy_threshold": threshold}),
        slice_spacing=keys.get("slice_spacing", "model"), regions=keys.get("regions"),
        regions_class_order=keys.get("regions_class_order"), parts=keys.get("parts"),
    )
    _check_outputs(recipe, outputs)
    return recipe


def _check_outputs(recipe: NnunetRecipe, outputs: int) -> None:
    if (recipe.regions is None) != (recipe.regions_class_order is None):
        raise RecipeError("regions", "and regions_class_order go together")
    if recipe.regions is not None and recipe.parts is not None:
        raise RecipeError("parts", "cannot be combined with regions")
    if recipe.regions is not None:
        assert recipe.regions_class_order is not None
        if len(recipe.regions) != outputs or len(recipe.regions_class_order) != outputs:
            raise RecipeError("regions", f"lists {len(recipe.regions)} regions and "
                                         f"{len(recipe.regions_class_order)} labels in regions_class_order, but the "
                                         f"model has {outputs} outputs")
    if recipe.parts is not None and sum(part.outputs for part in recipe.parts) != outputs:
        raise RecipeError("parts", f"add up to {sum(p.outputs for p in recipe.parts)} outputs, but the model has "
                                   f"{outputs}")
