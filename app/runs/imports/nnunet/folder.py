"""An nnU-Net v2 trained-model folder read: `<Trainer>__<Plans>__<configuration>/` with plans.json, dataset.json,
dataset_fingerprint.json (optional: plans.json carries the intensity statistics it was planned with) and
`fold_N/checkpoint_final.pth` (or `checkpoint_best.pth`).

Someone else's folder: every file through the reading gate (regular only, bounded, no link out of the folder), the
JSON parsed with no NaN or Infinity, every value checked for its type and range, and each refusal one line
(ModelError) naming the file and the value — as nnU-Net's own predictor (initialize_from_trained_model_folder)
would read them: the configuration named by the folder, `inherits_from` resolved, labels in dataset.json's order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from app.errors import ModelError
from app.guard.untrusted import read_untrusted, untrusted_problem
from app.io.checkpoint import CHECKPOINT_FILE_LIMIT, Checkpoint, read_checkpoint
from app.runs.imports.nnunet.records import (
    CHECKPOINTS,
    ChannelIntensity,
    Configuration,
    Fold,
    Labels,
    NnunetFolder,
    Resampling,
)

JSON_FILE_LIMIT = 64 << 20  # a dataset.json listing every training case, a fingerprint of thousands: a few MB
MAX_FOLDS = 100
MAX_CHANNELS = 16
MAX_LABELS = 1000
_MAX_INHERITANCE = 16
_T = TypeVar("_T")
_INTENSITY_KEYS = ("mean", "std", "percentile_00_5", "percentile_99_5")


class _Bad(Exception):
    """A value's problem; the caller names the file."""


def read_folder(folder: Path, *, folds: Sequence[str] | None = None, checkpoint: str = "final") -> NnunetFolder:
    """The folder at `folder` with `folds` ("0", "1", …, "all"; None: every fold found) and their `checkpoint`
    ("final" or "best") opened. ModelError in one line for anything missing, malformed or inconsistent."""
    if not folder.is_dir():
        raise ModelError(f"{folder}: not a folder (an nnU-Net trained-model folder "
                         "<Trainer>__<Plans>__<configuration>)")
    trainer, plans_name, configuration = _folder_name(folder)
    plans = load_json(folder / "plans.json", root=folder)
    dataset = load_json(folder / "dataset.json", root=folder)
    fingerprint = _optional_json(folder / "dataset_fingerprint.json", root=folder)
    config = _read("plans.json", folder, lambda: _configuration(plans, configuration))
    channels = _read("dataset.json", folder, lambda: _channel_names(dataset))
    labels = _read("dataset.json", folder, lambda: _labels(dataset))
    _read("plans.json", folder, lambda: _same_channels(config, channels))
    forward, backward = _read("plans.json", folder, lambda: _transposes(plans))
    found = _folds_found(folder)
    chosen = _chosen_folds(folder, found, folds)
    name = CHECKPOINTS.get(checkpoint)
    if name is None:
        raise ModelError(f"--checkpoint {checkpoint}: expected {' or '.join(CHECKPOINTS)}")
    return NnunetFolder(
        path=folder, trainer=trainer, plans_name=plans_name,
        dataset_name=_read("plans.json", folder, lambda: _text(plans, "dataset_name", default="")),
        configuration=config,
        transpose_forward=forward, transpose_backward=backward,
        median_spacing=_read("plans.json", folder, lambda: _median_spacing(plans)),
        intensities=_intensities(folder, plans, fingerprint, config),
        channel_names=channels, labels=labels,
        file_ending=_read("dataset.json", folder, lambda: _text(dataset, "file_ending", default="")),
        folds_found=found, folds=tuple(_fold(folder, fold, name, configuration) for fold in chosen),
        checkpoint_name=name,
    )


# --- the files ---------------------------------------------------------------------------------------------------

def load_json(path: Path, *, root: Path) -> dict[str, object]:
    """`path`'s JSON object (through the reading gate, beneath `root`); ModelError naming the file otherwise."""
    try:
        data = read_untrusted(path, limit=JSON_FILE_LIMIT, root=root)
    except FileNotFoundError:
        raise ModelError(f"{path}: missing (an nnU-Net trained-model folder has plans.json and dataset.json)") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        document = json.loads(data.decode("utf-8-sig"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise ModelError(f"{path}: nested too deeply") from None
    except _Bad as exc:
        raise ModelError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: invalid JSON at line {exc.lineno} ({exc.msg})") from None
    if not isinstance(document, dict):
        raise ModelError(f"{path}: not a JSON object")
    return document


def _optional_json(path: Path, *, root: Path) -> dict[str, object] | None:
    if not path.exists() and not path.is_symlink():
        return None
    return load_json(path, root=root)


def _no_constant(name: str) -> object:
    raise _Bad(f"{name} is not a number JSON allows")


def _read(file: str, folder: Path, reader: Callable[[], _T]) -> _T:
    try:
        return reader()
    except _Bad as exc:
        raise ModelError(f"{folder / file}: {exc}") from None


def _folder_name(folder: Path) -> tuple[str, str, str]:
    parts = folder.resolve().name.split("__")
    if len(parts) != 3 or not all(parts):
        raise ModelError(f"{folder}: the folder's name is not <Trainer>__<Plans>__<configuration> (as nnU-Net names "
                         "a trained model's folder, e.g. nnUNetTrainer__nnUNetPlans__3d_fullres)")
    return parts[0], parts[1], parts[2]


# --- plans.json ------------------------------------------------------------------------------------------------

def _configuration(plans: Mapping[str, object], name: str) -> Configuration:
    values = _resolved(plans, name)
    patch = _ints(values, "patch_size", low=1, high=4096)
    if len(patch) not in (2, 3):
        raise _Bad(f"configurations.{name}.patch_size has {len(patch)} values; a 2D or 3D patch has 2 or 3")
    schemes = _texts(values, "normalization_schemes")
    mask = _bools(values, "use_mask_for_norm")
    if len(mask) != len(schemes):
        raise _Bad(f"configurations.{name}: {len(schemes)} normalization_schemes but {len(mask)} use_mask_for_norm")
    architecture = values.get("architecture")
    if not isinstance(architecture, dict):
        raise _Bad(f"configurations.{name} has no architecture (an nnU-Net v2 plans file from before 2.4 describes "
                   "the network with UNet_class_name: not yet importable)")
    return Configuration(
        name=name, data_identifier=_text(values, "data_identifier", default=""),
        preprocessor=_text(values, "preprocessor_name", default="DefaultPreprocessor"),
        batch_size=_int(values, "batch_size", low=1, high=1 << 16),
        patch_size=patch, spacing=_floats(values, "spacing", size=len(patch)),
        median_image_size=_ints(values, "median_image_size_in_voxels", low=0, high=1 << 31, integral=False),
        normalization_schemes=schemes, use_mask_for_norm=mask,
        resampling_data=_resampling(values, "data"), resampling_seg=_resampling(values, "seg"),
        resampling_probabilities=_resampling(values, "probabilities"),
        architecture=architecture, previous_stage=_text(values, "previous_stage", default="") or None,
    )


def _resolved(plans: Mapping[str, object], name: str) -> dict[str, object]:
    """The configuration with what it inherits (PlansManager.get_configuration: the parent's values, the child's
    over them)."""
    configurations = plans.get("configurations")
    if not isinstance(configurations, dict):
        raise _Bad("no configurations (not an nnU-Net v2 plans file)")
    chain: list[dict[str, object]] = []
    current: str | None = name
    while current is not None:
        values = configurations.get(current)
        if not isinstance(values, dict):
            known = ", ".join(sorted(str(k) for k in configurations)) or "none"
            raise _Bad(f"the configuration '{current:.80}' is not in the plans (they have: {known:.200})")
        if len(chain) >= _MAX_INHERITANCE:
            raise _Bad(f"configuration '{name}' inherits in a circle or more than {_MAX_INHERITANCE} deep")
        chain.append(values)
        parent = values.get("inherits_from")
        current = parent if isinstance(parent, str) else None
    merged: dict[str, object] = {}
    for values in reversed(chain):
        merged.update(values)
    merged.pop("inherits_from", None)
    return merged


def _resampling(values: Mapping[str, object], what: str) -> Resampling:
    kwargs = values.get(f"resampling_fn_{what}_kwargs", {})
    if not isinstance(kwargs, dict):
        raise _Bad(f"resampling_fn_{what}_kwargs is not a mapping")
    separate = kwargs.get("force_separate_z")
    if separate is not None and not isinstance(separate, bool):
        raise _Bad(f"resampling_fn_{what}_kwargs.force_separate_z is {separate!r:.40}, not true, false or null")
    return Resampling(
        function=_text(values, f"resampling_fn_{what}", default="resample_data_or_seg_to_shape"),
        order=_int(kwargs, "order", low=0, high=5, default=1 if what != "data" else 3),
        order_z=_int(kwargs, "order_z", low=0, high=5, default=0),
        force_separate_z=separate, is_seg=bool(kwargs.get("is_seg", what == "seg")),
    )


def _median_spacing(plans: Mapping[str, object]) -> tuple[float, ...] | None:
    if "original_median_spacing_after_transp" not in plans:
        return None
    return _floats(plans, "original_median_spacing_after_transp", size=3)


def _transposes(plans: Mapping[str, object]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """transpose_forward and transpose_backward, the second undoing the first."""
    forward, backward = _transpose(plans, "transpose_forward"), _transpose(plans, "transpose_backward")
    if tuple(forward[axis] for axis in backward) != (0, 1, 2):
        raise _Bad(f"transpose_backward {list(backward)} does not undo transpose_forward {list(forward)}")
    return forward, backward


def _transpose(plans: Mapping[str, object], key: str) -> tuple[int, ...]:
    order = _ints(plans, key, low=0, high=2, default=(0, 1, 2))
    if sorted(order) != [0, 1, 2]:
        raise _Bad(f"{key} is {list(order)}, not an order of the axes 0, 1, 2")
    return order


def _intensities(folder: Path, plans: Mapping[str, object], fingerprint: Mapping[str, object] | None,
                 config: Configuration) -> tuple[ChannelIntensity, ...]:
    """Per channel, the statistics CTNormalization uses: the plans' (nnU-Net's preprocessor reads those), else
    the fingerprint's. Needed only for the channels normalised with CTNormalization."""
    documents = (("plans.json", plans), ("dataset_fingerprint.json", fingerprint))
    return tuple(_channel_from(folder, documents, channel, scheme)
                 for channel, scheme in enumerate(config.normalization_schemes))


def _channel_from(folder: Path, documents: tuple[tuple[str, Mapping[str, object] | None], ...], channel: int,
                  scheme: str) -> ChannelIntensity:
    for file, document in documents:
        per_channel = document.get("foreground_intensity_properties_per_channel") if document else None
        if isinstance(per_channel, dict) and str(channel) in per_channel:
            try:
                return _channel_intensity(per_channel, channel, file)
            except _Bad as exc:
                raise ModelError(f"{folder / file}: {exc}") from None
    if scheme == "CTNormalization":
        raise ModelError(f"{folder / 'plans.json'}: channel {channel} is normalised with CTNormalization, but neither "
                         "plans.json nor dataset_fingerprint.json has its foreground_intensity_properties_per_channel")
    return ChannelIntensity(0.0, 1.0, 0.0, 0.0, "none")


def _channel_intensity(per_channel: Mapping[str, object], channel: int, file: str) -> ChannelIntensity:
    values = per_channel[str(channel)]
    if not isinstance(values, dict):
        raise _Bad(f"foreground_intensity_properties_per_channel.{channel} is not a mapping")
    numbers = {key: _float(values, key, where=f"foreground_intensity_properties_per_channel.{channel}.")
               for key in _INTENSITY_KEYS}
    if numbers["std"] < 0 or numbers["percentile_00_5"] > numbers["percentile_99_5"]:
        raise _Bad(f"foreground_intensity_properties_per_channel.{channel}: std below 0 or percentile_00_5 above "
                   "percentile_99_5")
    return ChannelIntensity(numbers["mean"], numbers["std"], numbers["percentile_00_5"], numbers["percentile_99_5"],
                            file)


# --- dataset.json ----------------------------------------------------------------------------------------------

def _channel_names(dataset: Mapping[str, object]) -> tuple[str, ...]:
    """channel_names (or the older `modality`): {"0": "CT", "1": "T2"} in channel order 0, 1, …"""
    names = dataset.get("channel_names", dataset.get("modality"))
    if not isinstance(names, dict) or not 1 <= len(names) <= MAX_CHANNELS:
        raise _Bad(f"channel_names must map channel numbers \"0\", \"1\", … to names (1 to {MAX_CHANNELS})")
    if sorted(names) != sorted(str(i) for i in range(len(names))):
        raise _Bad(f"channel_names' keys are {sorted(names)!r:.80}, not \"0\" … \"{len(names) - 1}\"")
    return tuple(_text(names, str(i)) for i in range(len(names)))


def _labels(dataset: Mapping[str, object]) -> Labels:
    """labels: {"background": 0, "liver": 1, …} (consecutive values from 0; "ignore" is left out of the network's
    outputs), or regions {"background": 0, "whole tumour": [1, 2, 3], …} with regions_class_order."""
    labels = dataset.get("labels")
    if not isinstance(labels, dict) or not 2 <= len(labels) <= MAX_LABELS:
        raise _Bad(f"labels must map 2 to {MAX_LABELS} names to values (background 0 first)")
    if any(isinstance(v, list) for v in labels.values()):
        return _regions(dataset, labels)
    values: dict[str, int] = {}
    for name, value in labels.items():
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_LABELS:
            raise _Bad(f"label '{name:.60}' has the value {value!r:.40}, not a whole number from 0")
        values[str(name)] = value
    ignore = values.pop("ignore", None)
    ordered = sorted(values.items(), key=lambda item: item[1])
    if [value for _, value in ordered] != list(range(len(ordered))):
        raise _Bad(f"labels' values are {[v for _, v in ordered]!r:.80}; nnU-Net's are consecutive from 0 "
                   "(background)")
    if ignore is not None and ignore != len(ordered):
        raise _Bad(f"the ignore label is {ignore}; nnU-Net's is the highest value ({len(ordered)})")
    return Labels(names=tuple(name for name, _ in ordered), ignore_label=ignore)


def _regions(dataset: Mapping[str, object], labels: Mapping[str, object]) -> Labels:
    names, regions = [], []
    for name, value in labels.items():
        members = value if isinstance(value, list) else [value]
        found = tuple(m for m in members if isinstance(m, int) and not isinstance(m, bool) and m >= 0)
        if not members or len(found) != len(members):
            raise _Bad(f"region '{name:.60}' is {value!r:.60}, not a label value or a list of them")
        if name in ("background", "ignore"):
            continue
        names.append(str(name))
        regions.append(found)
    order = _ints(dataset, "regions_class_order", low=1, high=MAX_LABELS)
    if len(order) != len(regions):
        raise _Bad(f"{len(regions)} regions but {len(order)} values in regions_class_order")
    return Labels(names=tuple(names), regions=tuple(regions), regions_class_order=order)


def _same_channels(config: Configuration, channels: tuple[str, ...]) -> None:
    if len(config.normalization_schemes) != len(channels):
        raise _Bad(f"configuration {config.name} normalises {len(config.normalization_schemes)} channels, but "
                   f"dataset.json names {len(channels)}")


# --- the folds -------------------------------------------------------------------------------------------------

def _folds_found(folder: Path) -> tuple[str, ...]:
    names = sorted(entry.name.removeprefix("fold_") for entry in folder.iterdir()
                   if entry.name.startswith("fold_") and entry.is_dir() and not entry.is_symlink())
    if len(names) > MAX_FOLDS:
        raise ModelError(f"{folder}: {len(names)} fold folders; an nnU-Net model has at most {MAX_FOLDS}")
    return tuple(sorted(names, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)))


def _chosen_folds(folder: Path, found: tuple[str, ...], folds: Sequence[str] | None) -> tuple[str, ...]:
    if folds is None:
        if not found:
            raise ModelError(f"{folder}: no fold_N folders (a trained model has fold_0 … or fold_all)")
        return found
    missing = next((fold for fold in folds if fold not in found), None)
    if missing is not None:
        raise ModelError(f"{folder}: fold {missing} is missing (found: {', '.join(found) or 'none'})")
    return tuple(dict.fromkeys(folds))


def _fold(folder: Path, fold: str, checkpoint_name: str, configuration: str) -> Fold:
    path = folder / f"fold_{fold}" / checkpoint_name
    problem = untrusted_problem(path, limit=CHECKPOINT_FILE_LIMIT, root=folder)
    if problem is not None:
        raise ModelError(f"{path}: {problem}")
    checkpoint = read_checkpoint(path)
    content = checkpoint.content if isinstance(checkpoint.content, dict) else {}
    trainer = content.get("trainer_name")
    init = content.get("init_args")
    said = init.get("configuration") if isinstance(init, dict) else None
    if isinstance(said, str) and said != configuration:
        raise ModelError(f"{path}: trained for the configuration '{said:.60}', but the folder is '{configuration}'")
    return Fold(name=fold, path=path, checkpoint=checkpoint, trainer_name=trainer if isinstance(trainer, str) else None,
                mirroring_axes=_mirroring(checkpoint, content.get("inference_allowed_mirroring_axes")))


def _mirroring(checkpoint: Checkpoint, axes: object) -> tuple[int, ...] | None:
    if axes is None:
        return None
    if not isinstance(axes, (list, tuple)) or not all(isinstance(a, int) and 0 <= a <= 2 for a in axes):
        raise ModelError(f"{checkpoint.path}: inference_allowed_mirroring_axes is {axes!r:.60}, not spatial axes "
                         "0 to 2")
    return tuple(sorted(set(int(a) for a in axes)))


# --- values ----------------------------------------------------------------------------------------------------

_MISSING = object()


def _text(values: Mapping[str, object], key: str, *, default: object = _MISSING) -> str:
    value = values.get(key, default)
    if value is _MISSING:
        raise _Bad(f"{key} is missing")
    if not isinstance(value, str) or len(value) > 1000:
        raise _Bad(f"{key} is {value!r:.60}, not a text")
    return value


def _texts(values: Mapping[str, object], key: str) -> tuple[str, ...]:
    items = values.get(key)
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_CHANNELS or not all(isinstance(i, str) for i in items):
        raise _Bad(f"{key} is {items!r:.60}, not a list of 1 to {MAX_CHANNELS} names")
    return tuple(items)


def _bools(values: Mapping[str, object], key: str) -> tuple[bool, ...]:
    items = values.get(key)
    if not isinstance(items, list) or not all(isinstance(i, bool) for i in items):
        raise _Bad(f"{key} is {items!r:.60}, not a list of true/false")
    return tuple(items)


def _int(values: Mapping[str, object], key: str, *, low: int, high: int, default: object = _MISSING) -> int:
    value = values.get(key, default)
    if value is _MISSING:
        raise _Bad(f"{key} is missing")
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _Bad(f"{key} is {value!r:.60}, not a whole number from {low} to {high}")
    return value


def _ints(values: Mapping[str, object], key: str, *, low: int, high: int, integral: bool = True,
          default: object = _MISSING) -> tuple[int, ...]:
    items = values.get(key, default)
    if items is _MISSING:
        raise _Bad(f"{key} is missing")
    if isinstance(items, tuple):
        return items
    ok = isinstance(items, list) and 0 < len(items) <= MAX_LABELS and all(
        isinstance(i, (int, float)) and not isinstance(i, bool) and low <= i <= high
        and (not integral or isinstance(i, int)) for i in items)
    if not ok or not isinstance(items, list):
        raise _Bad(f"{key} is {items!r:.60}, not a list of whole numbers from {low} to {high}")
    return tuple(round(i) for i in items)


def _float(values: Mapping[str, object], key: str, *, where: str = "") -> float:
    value = values.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise _Bad(f"{where}{key} is {value!r:.60}, not a number")
    return float(value)


def _floats(values: Mapping[str, object], key: str, *, size: int) -> tuple[float, ...]:
    items = values.get(key)
    if not isinstance(items, list) or len(items) != size:
        raise _Bad(f"{key} is {items!r:.60}, not {size} numbers")
    found = tuple(_float({"v": item}, "v", where="") for item in items)
    if not all(0 < v <= 1000 for v in found):
        raise _Bad(f"{key} is {list(found)!r:.60}; spacings are above 0 and at most 1000 mm")
    return found
