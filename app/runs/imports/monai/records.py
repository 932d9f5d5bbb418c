"""What a MONAI bundle says, as frozen records: its metadata (name, version, the input's channels and modality,
the output's channel names), the network's definition, the inference pipeline's transforms in order, the inferer,
and where each came from in the config (`preprocessing#transforms#2`), so a refusal names it. Read by
app.runs.imports.monai.reader; said in sidecar keys by app.runs.imports.monai.translation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CONFIG_NAMES = ("inference.json", "inference.yaml", "inference.yml")
METADATA_NAME = "metadata.json"
WEIGHTS_NAME = "model.pt"
TORCHSCRIPT_NAME = "model.ts"

# The `_target_` names SegLens knows (app.runs.imports.monai.translation says each in sidecar keys or refuses a
# value of it); any other name is refused before its arguments are read. `Name` or `monai.….Name`.
PREPROCESSING = frozenset({
    "LoadImage", "LoadImaged", "EnsureChannelFirst", "EnsureChannelFirstd", "Orientation", "Orientationd",
    "Spacing", "Spacingd", "ScaleIntensityRange", "ScaleIntensityRanged", "NormalizeIntensity",
    "NormalizeIntensityd", "CropForeground", "CropForegroundd", "EnsureType", "EnsureTyped", "ToTensor",
    "ToTensord", "CastToType", "CastToTyped", "Identity", "Identityd"})
POSTPROCESSING = frozenset({
    "Activations", "Activationsd", "AsDiscrete", "AsDiscreted", "Invertd", "SaveImage", "SaveImaged",
    "EnsureType", "EnsureTyped", "ToTensor", "ToTensord", "CastToType", "CastToTyped", "Identity", "Identityd"})
INFERERS = frozenset({"SlidingWindowInferer", "SimpleInferer"})
NETWORKS = frozenset({"UNet", "BasicUNet", "SegResNet", "SwinUNETR", "DynUNet", "UNETR", "AttentionUnet"})
OPAQUE = frozenset({"Invertd", "SaveImage", "SaveImaged"})  # their arguments are never read (SegLens does this itself)


@dataclass(frozen=True)
class Component:
    """One `_target_` of the config with its arguments (references resolved, literals only), and its place."""

    name: str  # the class name without its module: "Spacingd", "SlidingWindowInferer", "UNet"
    args: Mapping[str, object]
    where: str  # its id in the config: "preprocessing#transforms#3"


@dataclass(frozen=True)
class Metadata:
    """configs/metadata.json: what the bundle says of itself and of its network's input and output."""

    name: str
    version: str
    channels: int | None  # network_data_format.inputs.image.num_channels
    modality: str | None  # network_data_format.inputs.image.modality ("CT", "MR")
    channel_names: tuple[str, ...] | None  # network_data_format.outputs.pred.channel_def, channel 0 first


@dataclass(frozen=True)
class Bundle:
    """A MONAI bundle folder: the inference config's parts SegLens translates, its metadata and its weights."""

    path: Path
    config: Path  # configs/inference.json (or .yaml)
    metadata: Metadata
    weights: Path  # models/model.pt
    network: Component
    preprocessing: tuple[Component, ...]
    inferer: Component
    postprocessing: tuple[Component, ...]

    def shown(self, where: str) -> str:
        """A place in the config as a refusal names it: `configs/inference.json preprocessing#transforms#3`."""
        return f"{self.config.relative_to(self.path)} {where}"
