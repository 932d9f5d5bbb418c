"""The model's spec as records: what the pipeline needs to know about a model (ModelSpec and its input, output,
classes and postprocess parts), each value with where it came from ("detected", "metadata", "sidecar" or
"default"). They are built by app.inference.model.builder.load_spec, from the ONNX file and its sidecar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.inference.model.codes import ClassCode
from app.inference.model.nnunet_recipe import NnunetRecipe
from app.inference.model.onnx_graph import TensorInfo
from app.inference.model.rules import Rule
from app.inference.model.runtime_options import RuntimeOptions
from app.inference.model.tiles import TileSpec
from app.inference.model.yolo_head import YoloHead
from app.inference.model.yolo_options import YoloOptions


@dataclass(frozen=True)
class ClassInfo:
    name: str
    color: tuple[int, int, int] | None  # None: not painted (background)
    code: ClassCode | None = None  # the sidecar's `code:` (DICOM SEG category/type); None: codes.DEFAULT_CODE


@dataclass(frozen=True)
class InputSpec:
    name: str
    layout: str  # "NCHW" | "NHWC"
    channels: int  # 1 or 3
    dtype: str  # "float32" | "float16" | "uint8"
    model_hw: tuple[int | None, int | None]  # what the graph declares; None = dynamic
    size: tuple[int, int] | None  # (H, W) the image is resized to; None = keep the image's size
    resize: str  # "stretch" | "letterbox" | "tile" (app.inference.image.tiling)
    size_divisor: int
    color: str  # "rgb" | "bgr" | "gray"
    scale: float
    mean: tuple[float, ...]
    std: tuple[float, ...]
    window: tuple[float, float] | None = None  # (center, width) applied to high-range values (HU) for the model
    value_range: tuple[float, float] | None = None  # (low, high) mapped to 0..255 for the model
    tile: TileSpec = field(default_factory=TileSpec)  # the sidecar's input.tile (used when resize is "tile")
    modality: tuple[str, ...] = ()  # input.modality: DICOM Modality codes the model expects (app.inference.image.fit)
    color_matters: bool = False  # input.color_matters: a gray image into this 3-channel model is a misfit

    @property
    def dynamic_hw(self) -> bool:
        return None in self.model_hw

    def warmup_hw(self) -> tuple[int, int]:
        """A valid (H, W) for a warm-up run: the working size, else 512×512 rounded to the divisor."""
        h, w = self.size or (512, 512)
        d = self.size_divisor
        return -(-h // d) * d, -(-w // d) * d


@dataclass(frozen=True)
class OutputSpec:
    name: str
    kind: str  # "scores" | "binary" | "labels" | "classification" | "anomaly" | "instances"
    channel_axis: int | None  # for rank-4 outputs: 1 (NCHW) or 3 (NHWC)
    activation: str  # "softmax" | "sigmoid" | "none" (resolved, never "auto")
    threshold: float  # binary: probability cut; anomaly: pixel cut on the map (map >= threshold)
    # anomaly models only: `name` is the anomaly map, these the image score, the exported mask (if any) and the
    # image threshold of the default verdict (score >= image_threshold → NG)
    score_name: str | None = None
    mask_name: str | None = None
    image_threshold: float | None = None
    # classification only: a result is uncertain when top-1 < min_confidence or top-1 − top-2 < min_margin (0: off)
    min_confidence: float = 0.0
    min_margin: float = 0.0
    protos_name: str | None = None  # instances: a segment head's prototype masks, fetched after the predictions

    @property
    def fetched(self) -> tuple[str, ...]:
        """The outputs a session run returns, in order: the first alone unless the model is an anomaly model (map,
        score[, mask]) or a segment head (predictions, prototypes)."""
        extra = ((self.score_name, self.mask_name) if self.kind == "anomaly"
                 else (self.protos_name,) if self.kind == "instances" else ())
        return (self.name, *(name for name in extra if name))


@dataclass(frozen=True)
class PostprocessSpec:
    min_area: int = 0
    close_kernel: int = 0
    top_k: int = 5


@dataclass(frozen=True)
class Normalize3D:
    """How a 3D model's input voxels are normalised (the sidecar's input.normalize)."""

    kind: str  # "ct" | "zscore" | "scale"
    clip: tuple[float, float] | None = None  # ct: clip to [lo, hi] (HU) before (x - mean) / std
    mean: float = 0.0  # ct: the training set's mean; scale: see below
    std: float = 1.0
    nonzero: bool = False  # zscore: statistics over non-zero voxels only (nnU-Net's use_mask_for_norm), else all
    scale: float = 1.0  # "scale": the existing input.scale/mean/std: (x * scale - mean) / std


@dataclass(frozen=True)
class Tile3D:
    """The 3D sliding window's options (the sidecar's input.tile on a 3D model)."""

    overlap: float = 0.5  # step = patch × (1 − overlap), the last window shifted inside (MONAI's rule)
    blend: str = "gaussian"  # "gaussian" (σ = sigma_scale × patch, MONAI's compute_importance_map) | "constant"
    batch: int = 1  # patches per session.run (needs a dynamic batch axis for > 1)
    sigma_scale: float = 0.125
    pad: str = "zeros"  # a volume below the patch: "zeros" (MONAI's and nnU-Net's) | "edge" (border voxels repeated)


@dataclass(frozen=True)
class VolumeInputSpec:
    """What a 3D model needs of a volume: its patch, spacing, axes, normalisation, tiling and TTA."""

    patch: tuple[int, int, int]  # D, H, W of one patch: the fixed input's, else the sidecar's input.patch
    spacing: tuple[float, float, float] | None  # mm along the tensor's D, H, W; None: the volume's own (no resampling)
    # "native" (the volume as stored: [slice, row, column] — SimpleITK's and nnU-Net's array order) or a 3-letter
    # code like "RAS", "LPS", "SPL": letter n is the patient direction tensor axis n (D, H, W) increases toward
    axes: str
    normalize: Normalize3D
    tile: Tile3D
    # mirrored spatial axes (0 = D, 1 = H, 2 = W) for test-time augmentation, every combination of them averaged
    # (8 passes for all three); () = off
    tta: tuple[int, ...] = ()
    # True: the whole (resampled, padded to the divisor) volume in one run (dynamic models only; the CLI's --no-tile)
    whole: bool = False
    size_divisor: int = 1  # input.size_divisor: a whole-volume run pads each side to a multiple
    # the sidecar's nnunet: section (a model imported from nnU-Net): run as nnU-Net's own predictor does
    nnunet: NnunetRecipe | None = None
    # input.grid: where the resampled grid's voxels lie — "centre" (half-voxel centres, torch's align_corners=False;
    # round(n × spacing / target) voxels) or "corner" (MONAI's Spacing: the first voxel's centre kept, stepping by
    # the target spacing; round((n − 1) × spacing / target + 1) voxels); used to the model's grid and back
    grid: str = "centre"
    # output.activate: where the activation (softmax / sigmoid) is taken — "each_patch" (each patch's output, then
    # the probabilities blended), "after_blend" (the raw outputs blended, activated on the model's grid, then
    # resampled back: a MONAI bundle's Activations before Invertd) or "after_resample" (raw outputs blended and
    # resampled back, activated on the volume's grid: Invertd before Activations)
    activate: str = "each_patch"


@dataclass(frozen=True)
class RemoteModel:
    """A spec's model that is on a server, not a file on this machine (app.inference.remote.session): what stands
    for its name and its file's hash wherever a record, a DICOM export or a panel says which model made a result."""

    where: str  # "remote host:port/model", as ModelSpec.path reads
    sha256: str  # the server, the model and the tensors its metadata declares, hashed (remote.graph.metadata_sha256)


@dataclass(frozen=True)
class DetectorSpec:
    """A detection, instance-segmentation, oriented-box or classify export of Ultralytics YOLO: its head as read from
    the graph and the metadata, and how its predictions are kept (the sidecar's `detect:` over their defaults)."""

    head: YoloHead
    options: YoloOptions = field(default_factory=YoloOptions)


@dataclass(frozen=True)
class ModelSpec:
    path: Path
    sidecar: Path | None
    name: str
    task: str  # "segmentation" | "classification" | "instances"
    input: InputSpec
    output: OutputSpec
    classes: tuple[ClassInfo, ...]
    postprocess: PostprocessSpec
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions, compare=False)  # the sidecar's `runtime:`
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    metadata: dict[str, str] = field(default_factory=dict, compare=False)
    opset: int | None = None
    producer: str = ""
    verdict: tuple[Rule, ...] | None = None  # the sidecar's `verdict.fail_if`; None: no verdict section
    review: tuple[Rule, ...] = ()  # the sidecar's `verdict.review_if` (app.inference.decide.band): REVIEW
    classes_file: Path | None = None  # the sidecar's `classes_file:`, resolved; the names are in `classes`
    volume: VolumeInputSpec | None = None  # a 3D model's volume input (layout "NCDHW"); None for every 2D model
    remote: RemoteModel | None = None  # a model on a server (no file here: `path` only names it); None: a local file
    detector: DetectorSpec | None = None  # an Ultralytics YOLO export (its own letterbox and decoding); None: any other

    @property
    def is_3d(self) -> bool:
        """True for a 3D (volumetric, 5-D input) model."""
        return self.volume is not None

    @property
    def volume_channels(self) -> int:
        """The channels a volume gives the model (its files CASE_0000 …): a 3D model's input channels, or those its
        nnU-Net recipe reads (a merged part-model set feeds each part the one CT); 1 for a 2D model."""
        if self.volume is None:
            return 1
        return self.volume.nnunet.sources if self.volume.nnunet is not None else self.input.channels

    @property
    def class_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.classes)

    @property
    def label_count(self) -> int:
        """How many label values a mask of this model can hold: its classes, and at least 2 (background and
        foreground) for a model of one class or none, whose mask is still a two-valued one."""
        return max(len(self.classes), 2)
