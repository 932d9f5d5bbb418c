"""nnU-Net's inference values said in SegLens's sidecar keys: each value mapped to the key that expresses it
exactly, with the file it came from, and each step of nnU-Net's predictor SegLens's 3D path does not yet do
exactly listed as a gap ("not yet exact: …") — never silently dropped. A value no key can express even roughly
(a per-volume 0–1 rescale, a cascade's second stage) is refused in one line instead."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TypeVar

from app.errors import ModelError
from app.runs.imports.nnunet.records import Configuration, NnunetFolder

_T = TypeVar("_T")
TILE_OVERLAP = 0.5  # nnUNetPredictor's tile_step_size default
_ANISOTROPY = 3.0  # nnU-Net's ANISO_THRESHOLD: a spacing ratio above it resamples the thick axis separately
_SCALES = {"NoNormalization": 1.0, "RGBTo0_1Normalization": 1.0 / 255.0}


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
    values["input.spacing"] = native(folder, spacing) if spacing else None
    sources["input.spacing"] = f"{plans}.spacing{order}" + (
        ", along the slices: nnunet plans.json original_median_spacing_after_transp" if config.dims == 2 else "")
    values["input.axes"], sources["input.axes"] = "native", "nnU-Net reads arrays as stored ([slice, row, column])"
    if folder.channel_names[0].upper() == "CT":
        values["input.modality"], sources["input.modality"] = "CT", "nnunet dataset.json channel_names"
    _normalize(folder, values, sources, plans)
    values["input.tile.overlap"] = TILE_OVERLAP
    values["input.tile.blend"] = "gaussian"
    values["input.tile.pad"] = "zeros"
    sources["input.tile"] = "nnUNetPredictor's defaults (tile_step_size 0.5, use_gaussian, pad with 0)"
    axes = folder.folds[0].mirroring_axes  # the first fold's, as nnUNetPredictor takes them
    shift = 3 - config.dims  # a 2D configuration's axes are a slice's (H, W)
    values["input.tta"] = {"mirror": sorted(folder.transpose_forward[a + shift] for a in axes)} if axes else None
    sources["input.tta"] = (f"nnunet fold_{folder.folds[0].name}/{folder.checkpoint_name} "
                            "inference_allowed_mirroring_axes")
    values["output.activation"] = "sigmoid" if folder.labels.region_based else "softmax"
    sources["output.activation"] = "nnunet dataset.json labels (regions: sigmoid)"
    values["classes"] = list(folder.labels.names)
    sources["classes"] = "nnunet dataset.json labels"
    return Mapped(values, sources, _gaps(folder))


def native(folder: NnunetFolder, values: tuple[_T, ...]) -> list[_T]:
    """Values along nnU-Net's transposed axes (its patch, spacing) along the volume's own axes: native axis j is
    transposed axis transpose_backward[j]. The graph transposes the volume itself (importer.transposed)."""
    return [values[folder.transpose_backward[axis]] for axis in range(len(values))]


def _patch_spacing(folder: NnunetFolder) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
    """The patch and spacing along nnU-Net's transposed D, H, W; a 2D configuration's patch is one slice deep
    and its slice spacing the training set's median (nnU-Net keeps each volume's own: a gap)."""
    config = folder.configuration
    if config.dims == 3:
        return config.patch_size, config.spacing
    if folder.median_spacing is None:
        return (1, *config.patch_size), None
    return (1, *config.patch_size), (folder.median_spacing[0], *config.spacing)


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
        if scheme not in ("CTNormalization", "ZScoreNormalization", *_SCALES):
            raise ModelError(f"{where}: channel {channel}'s normalization {scheme!r:.60} is not one SegLens "
                             "expresses (CTNormalization, ZScoreNormalization, NoNormalization, RGBTo0_1Normalization)")
    if len(set(config.normalization_schemes)) > 1 or len(set(config.use_mask_for_norm)) > 1:
        raise ModelError(f"{where}: its channels are normalised differently ({', '.join(config.normalization_schemes)})"
                         "; SegLens normalises every channel of a volume the same way")


def _normalize(folder: NnunetFolder, values: dict[str, object], sources: dict[str, str], plans: str) -> None:
    config = folder.configuration
    scheme = config.normalization_schemes[0]
    sources["input.normalize"] = f"{plans}.normalization_schemes ({scheme})"
    if scheme == "CTNormalization":
        stats = folder.intensities[0]
        values["input.normalize"] = {"kind": "ct", "clip": [stats.percentile_00_5, stats.percentile_99_5],
                                     "mean": stats.mean, "std": max(stats.std, 1e-8)}
        sources["input.normalize"] += (f", clip/mean/std: nnunet {stats.source} "
                                       "foreground_intensity_properties_per_channel.0")
    elif scheme == "ZScoreNormalization":
        values["input.normalize"] = {"kind": "zscore", "nonzero": config.use_mask_for_norm[0]}
        sources["input.normalize"] += f", nonzero: {plans}.use_mask_for_norm"
    elif _SCALES[scheme] != 1.0:
        values["input.scale"] = _SCALES[scheme]


def _gaps(folder: NnunetFolder) -> tuple[str, ...]:
    config = folder.configuration
    gaps = ["crop to the non-zero region: nnU-Net crops each volume to the box around its non-zero voxels before "
            "resampling (and fills that mask's holes); SegLens runs the whole volume (equal when no border is all "
            "zero)"]
    gaps.append(_resampling_gap(config))
    if config.dims == 2:
        median = f" ({folder.median_spacing[0]:g} mm)" if folder.median_spacing else ""
        gaps.append(f"a 2D configuration: nnU-Net keeps each volume's own slice spacing; SegLens resamples along the "
                    f"slices to the training set's median{median}" if median else
                    "a 2D configuration: plans.json has no original_median_spacing_after_transp, so SegLens keeps "
                    "each volume's own spacing in-plane too (nnU-Net resamples in-plane to the plans' spacing)")
    gaps.append("sliding window: SegLens places windows as MONAI (steps of half a patch, the last shifted back) and "
                "weighs them with an analytic Gaussian; nnU-Net spreads its steps evenly and filters a centred delta "
                "(sigma patch/8 in both)")
    gaps.append("blending: nnU-Net adds the windows' logits (and the mirrored passes') and applies softmax after "
                "resampling back; SegLens adds probabilities (the argmax can differ where two classes are close)")
    if any(config.use_mask_for_norm):
        gaps.append("use_mask_for_norm: nnU-Net's mask is the non-zero region with its holes filled; SegLens "
                    "leaves out exactly the zero voxels")
    if len(folder.channel_names) > 1:
        gaps.append(f"{len(folder.channel_names)} input channels ({', '.join(folder.channel_names)}): nnU-Net reads "
                    "one file per channel; SegLens's 3D path reads one volume")
    if folder.labels.region_based:
        gaps.append("region-based labels: nnU-Net thresholds each region's sigmoid at 0.5 and paints them in "
                    f"regions_class_order {list(folder.labels.regions_class_order)}; SegLens takes the argmax of "
                    "the regions' probabilities")
    if any(fold.mirroring_axes != folder.folds[0].mirroring_axes for fold in folder.folds):
        gaps.append("the folds allow different mirroring axes; the first fold's are used (as nnU-Net does)")
    return tuple(gaps)


def _resampling_gap(config: Configuration) -> str:
    data, probabilities = config.resampling_data, config.resampling_probabilities
    spacing = config.spacing
    anisotropic = max(spacing) / min(spacing) > _ANISOTROPY
    separate = (f" (the thick axis separately, order {data.order_z})" if anisotropic or data.force_separate_z
                else "")
    return (f"resampling: nnU-Net resamples the data with spline order {data.order}{separate} and the logits back "
            f"with order {probabilities.order}; SegLens resamples both trilinearly (order 1)")


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
