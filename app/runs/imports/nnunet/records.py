"""What an nnU-Net v2 trained-model folder says, as frozen records: the configuration's values from plans.json,
the intensity statistics per channel, dataset.json's channels and labels, and each fold's checkpoint with what
it says of itself (trainer, the mirroring axes inference may use). Read by app.runs.imports.nnunet.folder; made
into an ONNX graph and a sidecar by app.runs.imports.nnunet.importer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app.io.checkpoint import Checkpoint

FOLDER_FILES = ("plans.json", "dataset.json", "dataset_fingerprint.json")
CHECKPOINTS = {"final": "checkpoint_final.pth", "best": "checkpoint_best.pth"}


@dataclass(frozen=True)
class Resampling:
    """One of the configuration's resampling functions with its kwargs (resample_data_or_seg_to_shape's)."""

    function: str
    order: int
    order_z: int
    force_separate_z: bool | None
    is_seg: bool


@dataclass(frozen=True)
class ChannelIntensity:
    """The training set's foreground intensities of one channel (CTNormalization's statistics) and the file that
    gave them."""

    mean: float
    std: float
    percentile_00_5: float
    percentile_99_5: float
    source: str


@dataclass(frozen=True)
class Configuration:
    """One configuration of plans.json (`inherits_from` resolved), the values inference depends on."""

    name: str
    data_identifier: str
    preprocessor: str
    batch_size: int
    patch_size: tuple[int, ...]
    spacing: tuple[float, ...]
    median_image_size: tuple[int, ...]
    normalization_schemes: tuple[str, ...]
    use_mask_for_norm: tuple[bool, ...]
    resampling_data: Resampling
    resampling_seg: Resampling
    resampling_probabilities: Resampling
    architecture: Mapping[str, object]  # {network_class_name, arch_kwargs, …}: network.read_architecture reads it
    previous_stage: str | None  # a cascade's full-resolution stage needs the low-resolution stage's prediction

    @property
    def dims(self) -> int:
        return len(self.patch_size)


@dataclass(frozen=True)
class Labels:
    """dataset.json's labels as the network's output channels: one name per channel (background first), or, for a
    region-based label set, one per region (each a set of label values; no background) with regions_class_order."""

    names: tuple[str, ...]
    regions: tuple[tuple[int, ...], ...] = ()
    regions_class_order: tuple[int, ...] = ()
    ignore_label: int | None = None

    @property
    def region_based(self) -> bool:
        return bool(self.regions)


@dataclass(frozen=True)
class Fold:
    """One fold's checkpoint, its tensors not yet read, and what it says of itself."""

    name: str  # "0" … or "all"
    path: Path
    checkpoint: Checkpoint
    trainer_name: str | None
    mirroring_axes: tuple[int, ...] | None  # inference_allowed_mirroring_axes (None: mirroring not allowed)


@dataclass(frozen=True)
class NnunetFolder:
    """A trained-model folder `<Trainer>__<Plans>__<configuration>/` with the folds chosen."""

    path: Path
    trainer: str
    plans_name: str
    dataset_name: str
    configuration: Configuration
    transpose_forward: tuple[int, ...]
    transpose_backward: tuple[int, ...]
    median_spacing: tuple[float, ...] | None  # original_median_spacing_after_transp: a 2D model's slice spacing
    intensities: tuple[ChannelIntensity, ...]  # per input channel
    channel_names: tuple[str, ...]
    labels: Labels
    file_ending: str
    folds_found: tuple[str, ...]
    folds: tuple[Fold, ...]
    checkpoint_name: str  # checkpoint_final.pth or checkpoint_best.pth
