"""nnU-Net's inference values said in SegLens's sidecar keys: each value mapped to the key that expresses it
exactly, with the file it came from: the plans' patch, spacing and mirroring axes, and the `nnunet:` section that
runs the model as nnUNetPredictor does (app.inference.model.nnunet_recipe). A step SegLens would not do as nnU-Net
does is listed as a gap ("not yet exact: …"), never silently dropped; a value no key can express (another
resampling function, a cascade's second stage) is refused in one line instead."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from app.errors import ModelError
from app.runs.imports.nnunet.records import NnunetFolder

_T = TypeVar("_T")
TILE_OVERLAP = 0.5  # nnUNetPredictor's tile_step_size default
_ANISOTROPY = 3.0  # nnU-Net's ANISO_THRESHOLD: a spacing ratio above it resamples the thick axis separately
_SCHEMES = {"NoNormalization": "none", "RGBTo0_1Normalization": "rgb01", "RescaleTo01Normalization": "rescale01"}


@dataclass(frozen=True)
class Mapped:
    """The sidecar's values (key → value, in the sidecar's order), where each came from, and the gaps."""

    values: dict[str, object]
    sources: dict[str, str]
    gaps: tuple[str, ...]


def mapped(folder: NnunetFolder) -> Mapped:
    """`folder`'s inference values as sidecar keys; ModelError when a value cannot be expressed at all."""
    config = folder.configuration
    plans = f"nnunet plans.json configurations.{config.name}"
    _refuse_unexpressible(folder)
    values: dict[str, object] = {"name": _name(folder), "task": "segmentation"}
    sources = {"name": "nnunet plans.json dataset_name + the folder's configuration"}
    order = _order_note(folder)
    patch, spacing = _patch_spacing(folder)
    slices = " (one slice: a 2D configuration)" if config.dims == 2 else ""
    values["input.patch"], sources["input.patch"] = native(folder, patch), f"{plans}.patch_size{slices}{order}"
    values["input.spacing"] = native(folder, spacing)
    sources["input.spacing"] = f"{plans}.spacing{order}" + (
        " (along the slices each volume keeps its own: nnunet.slice_spacing)" if config.dims == 2 else "")
    values["input.axes"], sources["input.axes"] = "native", "nnU-Net reads arrays as stored ([slice, row, column])"
    if folder.channel_names[0].upper() == "CT":
        values["input.modality"], sources["input.modality"] = "CT", "nnunet dataset.json channel_names"
    axes = folder.folds[0].mirroring_axes  # the first fold's, as nnUNetPredictor takes them
    shift = 3 - config.dims  # a 2D configuration's axes are a slice's (H, W)
    values["input.tta"] = {"mirror": sorted(folder.transpose_forward[a + shift] for a in axes)} if axes else None
    sources["input.tta"] = (f"nnunet fold_{folder.folds[0].name}/{folder.checkpoint_name} "
                            "inference_allowed_mirroring_axes")
    values["output.activation"] = "sigmoid" if folder.labels.region_based else "softmax"
    sources["output.activation"] = "nnunet dataset.json labels (regions: sigmoid)"
    values["classes"] = list(_class_names(folder))
    sources["classes"] = "nnunet dataset.json labels" + (" (each region named at the label it paints)"
                                                         if folder.labels.region_based else "")
    _recipe(folder, values, sources, plans)
    return Mapped(values, sources, _gaps(folder))


def _class_names(folder: NnunetFolder) -> tuple[str, ...]:
    """The label map's names by value: background, then each label; a region-based set names the label each
    region paints (regions_class_order)."""
    labels = folder.labels
    if not labels.region_based:
        return labels.names
    names = ["background"] + [f"label {value}" for value in range(1, max(labels.regions_class_order) + 1)]
    for name, value in zip(labels.names, labels.regions_class_order, strict=True):
        names[value] = name
    return tuple(names)


def _recipe(folder: NnunetFolder, values: dict[str, object], sources: dict[str, str], plans: str) -> None:
    """The nnunet: section: nnUNetPredictor's steps, each value from plans.json or the predictor's defaults."""
    config = folder.configuration
    values["nnunet.crop_nonzero"] = True
    sources["nnunet.crop_nonzero"] = "nnU-Net's DefaultPreprocessor crops every volume to its non-zero region"
    for key, rule, what in (("resample", config.resampling_data, "data"),
                            ("resample_back", config.resampling_probabilities, "probabilities")):
        values[f"nnunet.{key}"] = {"order": rule.order, "order_z": rule.order_z,
                                   "force_separate_z": rule.force_separate_z}
        sources[f"nnunet.{key}"] = f"{plans}.resampling_fn_{what}_kwargs"
    values["nnunet.anisotropy_threshold"] = _ANISOTROPY
    sources["nnunet.anisotropy_threshold"] = "nnunetv2.configuration.ANISO_THRESHOLD"
    values["nnunet.slice_spacing"] = "volume" if config.dims == 2 else "model"
    sources["nnunet.slice_spacing"] = "a 2D configuration keeps each volume's slice spacing" if config.dims == 2 \
        else "a 3D configuration resamples every axis"
    values["nnunet.step"] = TILE_OVERLAP
    sources["nnunet.step"] = "nnUNetPredictor's tile_step_size default (Gaussian weights, mirroring as allowed)"
    values["nnunet.channels"] = [_channel(folder, c) for c in range(len(folder.channel_names))]
    sources["nnunet.channels"] = (f"{plans}.normalization_schemes and use_mask_for_norm; ct statistics: "
                                  f"foreground_intensity_properties_per_channel ({folder.intensities[0].source})")
    if folder.labels.region_based:
        values["nnunet.regions"] = [list(region) for region in folder.labels.regions]
        values["nnunet.regions_class_order"] = list(folder.labels.regions_class_order)
        sources["nnunet.regions"] = sources["nnunet.regions_class_order"] = "nnunet dataset.json"


def _channel(folder: NnunetFolder, c: int) -> dict[str, object]:
    scheme = folder.configuration.normalization_schemes[c]
    if scheme == "CTNormalization":
        stats = folder.intensities[c]
        return {"scheme": "ct", "clip": [stats.percentile_00_5, stats.percentile_99_5], "mean": stats.mean,
                "std": stats.std, "source": c}
    if scheme == "ZScoreNormalization":
        return {"scheme": "zscore", "mask": folder.configuration.use_mask_for_norm[c], "source": c}
    return {"scheme": _SCHEMES[scheme], "source": c}


def native(folder: NnunetFolder, values: tuple[_T, ...]) -> list[_T]:
    """Values along nnU-Net's transposed axes (its patch, spacing) along the volume's own axes: native axis j is
    transposed axis transpose_backward[j]. The graph transposes the volume itself (importer.transposed)."""
    return [values[folder.transpose_backward[axis]] for axis in range(len(values))]


def _patch_spacing(folder: NnunetFolder) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The patch and spacing along nnU-Net's transposed D, H, W; a 2D configuration's patch is one slice deep
    and its slice spacing the training set's median (each volume keeps its own: nnunet.slice_spacing)."""
    config = folder.configuration
    if config.dims == 3:
        return config.patch_size, config.spacing
    slices = folder.median_spacing[0] if folder.median_spacing is not None else 1.0  # not used: each volume's own
    return (1, *config.patch_size), (slices, *config.spacing)


def _order_note(folder: NnunetFolder) -> str:
    if folder.transpose_forward == (0, 1, 2):
        return ""
    return (f" (in the volume's axis order: the graph applies transpose_forward {list(folder.transpose_forward)} "
            "and transpose_backward itself)")


def _name(folder: NnunetFolder) -> str:
    return f"{folder.dataset_name or folder.path.name} ({folder.configuration.name}, nnU-Net)"


def _refuse_unexpressible(folder: NnunetFolder) -> None:
    config = folder.configuration
    where = folder.path / "plans.json"
    if config.previous_stage is not None:
        raise ModelError(f"{where}: configuration {config.name} is a cascade's second stage (it needs "
                         f"{config.previous_stage}'s prediction as input): not yet importable")
    for channel, scheme in enumerate(config.normalization_schemes):
        if scheme not in ("CTNormalization", "ZScoreNormalization", *_SCHEMES):
            raise ModelError(f"{where}: channel {channel}'s normalization {scheme!r:.60} is not one of nnU-Net's "
                             f"own (CTNormalization, ZScoreNormalization, {', '.join(_SCHEMES)})")
    for what, rule in (("data", config.resampling_data), ("probabilities", config.resampling_probabilities)):
        if rule.function != "resample_data_or_seg_to_shape":
            raise ModelError(f"{where}: resampling_fn_{what} is {rule.function!r:.60}; SegLens resamples as "
                             "nnU-Net's resample_data_or_seg_to_shape only")
        if rule.order not in (0, 1, 3) or rule.order_z not in (0, 1, 3):
            raise ModelError(f"{where}: resampling_fn_{what}_kwargs asks for spline order {rule.order} "
                             f"(order_z {rule.order_z}); SegLens resamples with orders 0, 1 and 3")


def _gaps(folder: NnunetFolder) -> tuple[str, ...]:
    """What SegLens does not do as nnU-Net does (none known: every step is nnU-Net's own)."""
    del folder
    return ()


def sidecar_text(mapped_values: Mapped, *, header: list[str]) -> str:
    """The sidecar as YAML: the header and gaps as comments, each value with its source as a comment."""
    lines = [f"# {line}" for line in header]
    lines += [f"# not yet exact: {gap}" for gap in mapped_values.gaps]
    top: dict[str, dict[str, object]] = {}
    flat = mapped_values.values
    for key, value in flat.items():
        section, _, rest = key.partition(".")
        if rest:
            top.setdefault(section, {})[rest] = value
        else:
            lines.append(f"{key}: {_flow(value)}  # {mapped_values.sources.get(key, '')}".rstrip(" #"))
    for section, entries in top.items():
        lines.append(f"{section}:")
        lines += _section_lines(section, entries, mapped_values.sources)
    return "\n".join(lines) + "\n"


def _section_lines(section: str, entries: dict[str, object], sources: dict[str, str]) -> list[str]:
    lines: list[str] = []
    nested: dict[str, dict[str, object]] = {}
    for key, value in entries.items():
        head, _, rest = key.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
            continue
        source = sources.get(f"{section}.{key}")
        lines.append(f"  {key}: {_flow(value)}" + (f"  # {source}" if source else ""))
    for head, inner in nested.items():
        source = sources.get(f"{section}.{head}")
        lines.append(f"  {head}: {_flow(inner)}" + (f"  # {source}" if source else ""))
    return lines


def _flow(value: object) -> str:
    """A value in YAML's flow style (JSON is a subset of it); floats with all their digits."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite number: {value}")
    return json.dumps(value, ensure_ascii=False)


def with_parts(parts: Sequence[Mapped], *, classes: Sequence[str], labels: Sequence[Sequence[int]]) -> Mapped:
    """Several part-models' values as one merged model's (one graph: the parts' input channels in order, their
    logits side by side): the first part's values, every part's `nnunet.channels` in order (each normalises the
    volume its own way), `nnunet.parts` (each part's outputs and the merged label of each: `labels[k]`), the
    merged `classes`; every part's gaps."""
    values = dict(parts[0].values)
    sources = dict(parts[0].sources)
    values["nnunet.channels"] = [channel for part in parts for channel in _part_channels(part)]
    sources["nnunet.channels"] = "each part's own, in the parts' order: " + "; ".join(
        dict.fromkeys(part.sources.get("nnunet.channels", "") for part in parts))
    values["nnunet.parts"] = [{"outputs": len(part_labels), "labels": list(part_labels)} for part_labels in labels]
    sources["nnunet.parts"] = ("each part's dataset.json labels, by name in TotalSegmentator's merged label map; "
                               "later parts painted over earlier ones, as TotalSegmentator's CLI merges them")
    values["classes"] = list(classes)
    sources["classes"] = "TotalSegmentator's merged label map (class_map), the classes the parts hold"
    return Mapped(values, sources, tuple(dict.fromkeys(gap for part in parts for gap in part.gaps)))


def _part_channels(part: Mapped) -> list[object]:
    channels = part.values.get("nnunet.channels")
    if not isinstance(channels, list):
        raise ModelError("a part's sidecar values have no nnunet.channels")
    return channels
