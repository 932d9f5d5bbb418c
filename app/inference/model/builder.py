"""load_spec: a model's ModelSpec (app.inference.model.spec) resolved from the ONNX file and its sidecar.

Detection rules (when no sidecar says otherwise):
- input layout: NCHW when axis 1 holds 1 or 3 channels, NHWC when axis 3 does;
- input size: fixed H/W are used as they are; dynamic H/W keep the image's size, padded to a multiple of 32;
- float16 inputs get float16 tensors; uint8 inputs get raw pixels;
- output `[N,C,H,W]` with C > 1: per-class scores (argmax); `[N,1,H,W]`: binary (sigmoid unless the graph
  already ends in Sigmoid); `[N,H,W]` integers: a label map already argmaxed in the graph; `[N,K]`:
  classification (softmax unless the graph ends in Softmax);
- several outputs, one an anomaly map and one an image score: an anomaly model (`shapes.anomaly_outputs`);
- a 5-D input `[N,C,D,H,W]`: a 3D segmentation model, its input, output and volume spec from app.inference.model.spec3d;
- an Ultralytics YOLO export (its metadata, or a YOLO head's shape: app.inference.model.yolo_head): a detection,
  instance-segmentation or oriented-box model (task "instances") or a classifier, letterboxed and decoded as
  Ultralytics' own predictor does (app.inference.yolo), the sidecar's `detect:` section over its defaults.
Every value records where it came from: "detected", "metadata", "sidecar" or "default".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from app.errors import SidecarError, with_article
from app.inference.model.labels import MAX_LABELS
from app.inference.model.metadata import parse_name_list
from app.inference.model.nnunet_recipe import painted_labels
from app.inference.model.onnx_graph import Dim, GraphInfo, TensorInfo, read_graph
from app.inference.model.resolver import Resolver, shortened
from app.inference.model.rules import Rule, ScoreRule, VerdictRules, resolve_review, resolve_rules
from app.inference.model.runtime_options import RuntimeOptions
from app.inference.model.shapes import FLOAT_INPUTS, INT_DTYPES, anomaly_outputs, channel_axis, image_layout
from app.inference.model.sidecar import MAX_SIDE, UNSET_COLOR, find_sidecar, load_sidecar, overlap_2d
from app.inference.model.spec import (
    ClassInfo,
    DetectorSpec,
    InputSpec,
    ModelSpec,
    OutputSpec,
    PostprocessSpec,
    VolumeInputSpec,
)
from app.inference.model.spec3d import is_volume_model, refuse_3d_keys, volume_parts
from app.inference.model.tiles import tile_spec_from, untileable
from app.inference.model.validators import visible
from app.inference.model.yolo_head import YoloHead, is_ultralytics, read_head
from app.inference.model.yolo_options import options_from_sidecar
from app.io.render import PALETTE
from app.spelling import counted

_FLOAT_INPUTS = FLOAT_INPUTS
# The sidecar keys an Ultralytics export takes: its input and output are Ultralytics' own
DETECTOR_KEYS = ("name", "task", "classes", "classes_file", "input.size", "detect.", "verdict.", "runtime.",
                 "postprocess.top_k", "output.min_confidence", "output.min_margin")
_INPUT_DTYPES = (*_FLOAT_INPUTS, "uint8")
MAX_MASK_CLASSES = 256  # a segmentation mask is uint8: one value per class
# A class name is made per class; ImageNet-21k has ~22k. A declared [1, 1000000000] output (a 121-byte file) is
# hostile or broken, and must be refused before anything is allocated per class.
MAX_CLASSIFICATION_CLASSES = MAX_LABELS  # 100 000
_INT_DTYPES = INT_DTYPES



def load_spec(model_path: str | Path, sidecar: str | Path | None = None, *,
              verdict: VerdictRules | None = None) -> ModelSpec:
    """Build the spec of the model at `model_path`; `sidecar` overrides the `<model>.yaml` found beside it, and
    `verdict` (a station file's) the sidecar's verdict section."""
    path = Path(model_path)
    sidecar_path = given_sidecar(sidecar) if sidecar is not None else find_sidecar(path)
    return spec_from_graph(path, read_graph(path), sidecar_path, verdict=verdict)


def spec_from_graph(path: Path, graph: GraphInfo, sidecar: Path | None, *,
                    verdict: VerdictRules | None = None) -> ModelSpec:
    """The spec of a model described by `graph` (an ONNX file's, or a remote model's metadata made into one by
    app.inference.remote.graph), `sidecar` over it; `path` names the model in every message."""
    overrides = load_sidecar(sidecar) if sidecar else {}
    if verdict is not None:
        overrides = _with_verdict(overrides, verdict)
    return _Builder(path, sidecar, graph, overrides, verdict=verdict).build()


def _with_verdict(overrides: dict[str, Any], verdict: VerdictRules) -> dict[str, Any]:
    """The sidecar's values with its whole verdict section replaced by `verdict`; its `output.image_threshold`
    dropped when `verdict` has fail rules (they replace the anomaly default rule that the threshold is the limit
    of)."""
    kept = {key: value for key, value in overrides.items() if not key.startswith("verdict.")}
    if verdict.fail_if is not None:
        kept.pop("output.image_threshold", None)
    return {**kept, **verdict.as_overrides()}


def given_sidecar(sidecar: str | Path) -> Path:
    """A sidecar named by the user, refused in one line when it is not there."""
    path = Path(sidecar)
    if not path.exists() and str(path).startswith(("http:/", "https:/")):  # a Path made of a URL lost a slash
        url = str(path).replace(":/", "://", 1).split("?", 1)[0].split("#", 1)[0]  # a query may hold a signature
        raise SidecarError(f"{url}: a sidecar given by URL is fetched for a model on "
                           "a server (--device remote); for a local model, download it beside the model")
    if not path.exists():  # a FIFO or folder goes on to be refused by name (not "not found")
        raise SidecarError(f"{path}: sidecar file not found")
    return path


class _Builder(Resolver):
    """A model's spec: its input and output (2D here, 3D in app.inference.model.spec3d), classes, verdict and the
    rest."""

    def __init__(self, path: Path, sidecar: Path | None, graph: GraphInfo, overrides: dict[str, Any], *,
                 verdict: VerdictRules | None = None):
        super().__init__(path, sidecar, graph, overrides)
        self.verdict_source = None if verdict is None else verdict.source
        self.input_layout = "NCHW"
        self.input_hw: tuple[int | None, int | None] = (None, None)
        self.output_kind = ""
        self.image_threshold: float | None = None

    # -- build ---------------------------------------------------------------------------------------

    def build(self) -> ModelSpec:
        if not is_volume_model(self.graph) and is_ultralytics(self.graph):
            return self._detector()
        if key := next((k for k in self.overrides if k.startswith("detect.")), None):  # it would decide nothing
            raise self.sidecar_error(key, "applies to Ultralytics YOLO exports (detect, segment, obb, classify), "
                                          "but this model is none: remove the detect: section")
        volume: VolumeInputSpec | None = None
        if is_volume_model(self.graph):
            inp, out, volume = volume_parts(self, max_classes=MAX_MASK_CLASSES)
            self.output_kind = out.kind
        else:
            refuse_3d_keys(self)
            inp, out = self._input(), self._output()
        task = self.pick("task", "classification" if out.kind == "classification" else "segmentation")
        if inp.resize == "tile" and volume is None and untileable(out.kind):
            raise self.sidecar_error("input.resize", f"is tile, but {untileable(out.kind)}")
        if (task == "classification") != (out.kind == "classification"):
            output = shortened(self._tensor(out.name).describe(), 120)
            raise self.sidecar_error("task", f"is {task}, but the model's output {output} is "
                                     f"{with_article(out.kind)} output")
        classes = self._classes(out)
        out = self._uncertainty(out, task)
        self._image_threshold_used(out)
        post = PostprocessSpec(
            min_area=self.pick("postprocess.min_area", 0, "default"),
            close_kernel=self.pick("postprocess.close_kernel", 0, "default"),
            top_k=self.pick("postprocess.top_k", 5, "default"),
        )
        if out.min_margin > 0 and post.top_k < 2:
            raise self.sidecar_error("output.min_margin", "needs postprocess.top_k of at least 2 (the margin is "
                                                          "top-1 − top-2)")
        name = self.pick("name", *self._default_name())
        return ModelSpec(
            path=self.path, sidecar=self.sidecar, name=name, task=task, input=inp, output=out,
            classes=classes, postprocess=post, inputs=self.graph.inputs, outputs=self.graph.outputs,
            runtime=RuntimeOptions.written({k.removeprefix("runtime."): v for k, v in self.overrides.items()
                                            if k.startswith("runtime.")}),
            sources=self.sources, metadata=self.graph.metadata, opset=self.graph.opset,
            producer=self.graph.producer, verdict=(verdict := self._verdict(task, classes)),
            review=self._review(task, classes, verdict),
            classes_file=self.overrides.get("classes_file"), volume=volume,
        )

    def _detector(self) -> ModelSpec:
        """An Ultralytics YOLO export's spec: its head (app.inference.model.yolo_head), the sidecar's `detect:`
        options, its classes all painted (an instance has no background), and the sidecar keys that would change
        nothing refused."""
        head = read_head(self.path, self.graph, sidecar=self.overrides)
        if key := next((k for k in self.overrides if not k.startswith(DETECTOR_KEYS)), None):
            raise self.sidecar_error(key, f"does not apply to an Ultralytics YOLO export ({head.task}): its input "
                                          "and output are Ultralytics' own (letterbox, their decoding); it takes "
                                          "name, classes, input.size, detect, verdict and runtime")
        options, option_sources = options_from_sidecar(self.overrides, head.names, sidecar=self.sidecar)
        task = "classification" if head.task == "classify" else "instances"
        if self.overrides.get("task", task) != task:
            raise self.sidecar_error("task", f"is {self.overrides['task']}, but the model is an Ultralytics YOLO "
                                             f"{head.task} export ({task})")
        self._detector_sources(head, option_sources)
        self.output_kind = "classification" if task == "classification" else "instances"
        classes = self._detector_classes(head)
        out = self._detector_output(head, options.conf)
        out = self._uncertainty(out, task)
        post = PostprocessSpec(top_k=self.pick("postprocess.top_k", min(5, head.nc), "default"))
        name = self.pick("name", *self._default_name())
        return ModelSpec(
            path=self.path, sidecar=self.sidecar, name=name, task=task, input=self._detector_input(head),
            output=out, classes=classes, postprocess=post, inputs=self.graph.inputs, outputs=self.graph.outputs,
            runtime=RuntimeOptions.written({k.removeprefix("runtime."): v for k, v in self.overrides.items()
                                            if k.startswith("runtime.")}),
            sources=self.sources, metadata=self.graph.metadata, opset=self.graph.opset,
            producer=self.graph.producer, verdict=(verdict := self._verdict(task, classes)),
            review=self._review(task, classes, verdict), classes_file=self.overrides.get("classes_file"),
            detector=DetectorSpec(head, options),
        )

    def _detector_sources(self, head: YoloHead, option_sources: dict[str, str]) -> None:
        """Where each of the head's values and each `detect:` option came from, under the sidecar's key names."""
        for field_name, key in (("task", "task"), ("layout", "output.layout"), ("imgsz", "input.size"),
                                ("names", "classes"), ("stride", "input.stride")):
            self.sources[key] = head.sources.get(field_name, "detected")
        for option, source in option_sources.items():
            self.sources[f"detect.{option}"] = source

    def _detector_input(self, head: YoloHead) -> InputSpec:
        """What the head's input is: RGB 0..1, letterboxed to `imgsz` (a classify head: its shorter side resized
        and the centre cropped, app.inference.yolo.letterbox)."""
        t = self.graph.inputs[0]
        shape = t.shape or ()
        model_hw = cast(tuple[int | None, int | None],
                        tuple(d if isinstance(d, int) else None for d in shape[2:4]))
        return InputSpec(name=head.input_name, layout="NCHW", channels=3, dtype=t.dtype, model_hw=model_hw,
                         size=head.imgsz, resize="crop" if head.task == "classify" else "letterbox",
                         size_divisor=head.stride if head.dynamic else 1, color="rgb", scale=1 / 255,
                         mean=(0.0,) * 3, std=(1.0,) * 3)

    def _detector_output(self, head: YoloHead, conf: float) -> OutputSpec:
        if head.task == "classify":
            return OutputSpec(head.output, "classification", None, "none", conf)
        return OutputSpec(head.output, "instances", None, "none", conf, protos_name=head.protos)

    def _detector_classes(self, head: YoloHead) -> tuple[ClassInfo, ...]:
        """The head's classes, each painted: the sidecar's colours and codes where it lists the classes."""
        listed = self.overrides.get("classes") or ()
        entries = listed if len(listed) == head.nc else tuple((name, UNSET_COLOR, None) for name in head.names)
        return tuple(ClassInfo(name, PALETTE[i % len(PALETTE)] if color is UNSET_COLOR else color, code)
                     for i, (name, color, code) in enumerate((*entry, None)[:3] for entry in entries))

    def _uncertainty(self, out: OutputSpec, task: str) -> OutputSpec:
        """The output with a classifier's `min_confidence` / `min_margin`, refused for any other task."""
        keys = ("output.min_confidence", "output.min_margin")
        given = next((key for key in keys if key in self.overrides), None)
        if given and task != "classification":
            raise self.sidecar_error(given, f"applies to classification models, but this model's task is {task}")
        if task != "classification":
            return out
        return replace(out, min_confidence=self.pick(keys[0], 0.0, "default"),
                       min_margin=self.pick(keys[1], 0.0, "default"))

    def _image_threshold_used(self, out: OutputSpec) -> None:
        """`output.image_threshold` is the anomaly default rule's limit: given where that rule does not exist (another
        kind of model, or a verdict section replacing it) it would silently decide nothing, so it is refused."""
        key = "output.image_threshold"
        if key not in self.overrides:
            return
        if out.kind != "anomaly":
            raise self.sidecar_error(key, f"applies to anomaly models (their default rule: NG when the image score is "
                                          f">= it), but this model's output is a {out.kind} output: it would never "
                                          "be used")
        if self.overrides.get("verdict.fail_if") is not None:
            raise self.sidecar_error(key, "is not used when the sidecar has a verdict section (its rules replace the "
                                          "default rule score >= image_threshold): remove it, or give the limit in "
                                          "verdict.fail_if as {score_above: ...}")

    def _verdict(self, task: str, classes: tuple[ClassInfo, ...]) -> tuple[Rule, ...] | None:
        """The sidecar's verdict rules with class names resolved to label values, refused when a rule does not
        fit the task (areas need a mask, top-1 needs a classifier) or names a class the model does not have."""
        raw = self.overrides.get("verdict.fail_if")
        if raw is None and self.output_kind == "anomaly":  # NG when the image score reaches the image threshold
            self.sources["verdict"] = "default"
            assert self.image_threshold is not None  # _output set it: an anomaly output has one
            return (ScoreRule(self.image_threshold, inclusive=True),)
        if raw is None and self.overrides.get("verdict.review_if") is not None:
            self.sources["verdict"] = "sidecar"
            return ()  # a band without fail rules: OK or REVIEW (fail closed still makes NG)
        if raw is None:
            return None
        self.sources["verdict"] = "sidecar"
        return resolve_rules(raw, task, tuple(c.name for c in classes), self._verdict_error,
                             output_kind=self.output_kind)

    def _review(self, task: str, classes: tuple[ClassInfo, ...], fail: tuple[Rule, ...] | None) -> tuple[Rule, ...]:
        """The sidecar's `verdict.review_if` rules, each refused when it cannot make a band with the fail rules."""
        raw = self.overrides.get("verdict.review_if")
        if raw is None:
            return ()
        fail_key = "verdict.fail_if" if self.overrides.get("verdict.fail_if") is not None else "output.image_threshold"
        return resolve_review(raw, fail or (), task, tuple(c.name for c in classes), self._verdict_error,
                              output_kind=self.output_kind, fail_key=fail_key)

    def _verdict_error(self, key: str, problem: str) -> SidecarError:
        """A verdict rule refused, naming where the rules were written (a station file's, or the sidecar)."""
        if self.verdict_source is None:
            return self.sidecar_error(key, problem)
        return SidecarError(f"{self.verdict_source}: '{key}' {problem}")

    def _default_name(self) -> tuple[str, str]:
        for key in ("name", "model_name", "title"):
            if self.graph.metadata.get(key, "").strip():  # untrusted: a control character is spelt out
                return visible(self.graph.metadata[key].strip()), "metadata"
        return self.path.stem.replace("_", " "), "default"

    def _input(self) -> InputSpec:
        t, layout, channels, model_hw = self._image_input()
        size, divisor = self._input_size(model_hw)
        scale, mean, std, color = self._normalisation(t.dtype in _FLOAT_INPUTS, channels)
        resize = self.pick("input.resize", "stretch", "default")
        if "input.tile.overlap" in self.overrides:  # the sidecar reads any number: 2D tiles overlap at most 0.9
            try:
                overlap_2d(self.overrides["input.tile.overlap"])
            except ValueError as exc:
                raise self.sidecar_error("input.tile.overlap", str(exc)) from None
        if resize == "tile" and None in model_hw and (size is not None or model_hw != (None, None)):
            raise self.sidecar_error("input.size", "must be null with resize: tile on a dynamic model (the tile "
                                                   "size is input.tile.size)")
        return InputSpec(
            name=t.name, layout=layout, channels=channels, dtype=t.dtype, model_hw=model_hw,
            size=size, resize=resize, size_divisor=divisor,
            color=color, scale=scale, mean=_per_channel(mean, channels), std=_per_channel(std, channels),
            window=self._window_or_range("input.window"), value_range=self._window_or_range("input.range"),
            tile=tile_spec_from(self.overrides),
            modality=self.pick("input.modality", (), "default"), color_matters=self._color_matters(channels),
        )

    def _color_matters(self, channels: int) -> bool:
        matters: bool = self.pick("input.color_matters", False, "default")
        if matters and channels != 3:
            raise self.sidecar_error("input.color_matters", f"is true, but the model's input has {channels} "
                                                            "channel (a gray model never sees colour)")
        return matters

    def _image_input(self) -> tuple[TensorInfo, str, int, tuple[int | None, int | None]]:
        """The one 4-D image input: (tensor, layout, channels, model H×W with None for dynamic sides)."""
        if len(self.graph.inputs) != 1:
            raise self.fail(f"not an image model: it takes {len(self.graph.inputs)} inputs, "
                            "SegLens needs one image tensor")
        t = self.graph.inputs[0]
        if t.shape is None or len(t.shape) != 4 or t.dtype not in _INPUT_DTYPES:
            raise self.fail("not an image model: the input must be a 4-D float32, float16 or uint8 tensor "
                            "(N,C,H,W or N,H,W,C)")
        layout, channels = image_layout(t.shape)
        if layout is None:
            raise self.fail("not an image model: no axis of the input holds 1 or 3 channels")
        if isinstance(t.shape[0], int) and t.shape[0] != 1:
            raise self.fail(f"the model's batch size is fixed at {t.shape[0]}; SegLens runs one image at a time "
                            "(export with batch 1 or a dynamic batch axis)")
        hw = (t.shape[2], t.shape[3]) if layout == "NCHW" else (t.shape[1], t.shape[2])
        model_hw = cast(tuple[int | None, int | None], tuple(d if isinstance(d, int) else None for d in hw))
        if any(d is not None and not 0 < d <= MAX_SIDE for d in model_hw):  # the warm-up allocates this size
            sides = "×".join("?" if d is None else str(d) for d in model_hw)
            raise self.fail(f"the model's input is fixed at {sides} pixels; SegLens handles sides from 1 to "
                            f"{MAX_SIDE}")
        self.input_layout, self.input_hw = layout, model_hw
        return t, layout, channels, model_hw

    def _input_size(self, model_hw: tuple[int | None, int | None]) -> tuple[tuple[int, int] | None, int]:
        """(working size, size divisor), checked against the sides the model fixes."""
        fixed = None not in model_hw
        size = self.pick("input.size", model_hw if fixed else None)
        if fixed and tuple(size or ()) != model_hw and self.sources["input.size"] == "sidecar":
            raise self.sidecar_error("input.size", f"is {list(size) if size else 'null'}, but the model's input "
                                                   f"is fixed at {list(model_hw)}")
        if not fixed and model_hw != (None, None):
            fixed_dim = "height" if model_hw[0] else "width"
            value = model_hw[0] or model_hw[1]
            if size is None:
                raise self.fail(f"the model's input {fixed_dim} is fixed at {value} but the other side is dynamic: "
                                "give input.size in a sidecar")
            if (size[0] if model_hw[0] else size[1]) != value:
                raise self.sidecar_error("input.size", f"is {list(size)}, but the model's input {fixed_dim} is "
                                                       f"fixed at {value}")
        divisor = self.pick("input.size_divisor", 1 if model_hw != (None, None) else 32, "detected")
        if size is not None and (size[0] % divisor or size[1] % divisor) and model_hw != (None, None):
            raise self.sidecar_error("input.size_divisor", f"is {divisor}, but the model's fixed input size "
                                                           f"{list(size)} is not a multiple of it")
        return size, divisor

    def _normalisation(self, is_float: bool, channels: int) -> tuple[float, tuple[float, ...], tuple[float, ...], str]:
        """(scale, mean, std, colour order) of the input, checked against its channels and dtype."""
        scale = self.pick("input.scale", 1 / 255 if is_float else 1.0, "default")
        mean = self.pick("input.mean", (0.0,) * channels, "default")
        std = self.pick("input.std", (1.0,) * channels, "default")
        for key, values in (("input.mean", mean), ("input.std", std)):
            if len(values) not in (1, channels):
                raise self.sidecar_error(key, f"has {len(values)} values, but the model's input has "
                                              f"{counted(channels, 'channel')}")
        if not is_float and any(k in self.overrides for k in ("input.scale", "input.mean", "input.std")):
            raise self.sidecar_error("input.scale", "cannot apply: the model takes uint8 pixels as they are")
        color = self.pick("input.color", "rgb" if channels == 3 else "gray")
        if (color == "gray") != (channels == 1):
            raise self.sidecar_error("input.color", f"is {color}, but the model's input has "
                                                    f"{counted(channels, 'channel')}")
        return scale, mean, std, color

    def _window_or_range(self, key: str) -> tuple[float, float] | None:
        if "input.window" in self.overrides and "input.range" in self.overrides:
            raise self.sidecar_error("input.range", "and 'input.window' both given: use one")
        window: tuple[float, float] | None = self.pick(key, None, "default")
        return window

    def _tensor(self, name: str) -> TensorInfo:
        return next(t for t in self.graph.outputs if t.name == name)

    def _output(self) -> OutputSpec:
        out = self._output_by_kind()
        self.output_kind, self.image_threshold = out.kind, out.image_threshold
        return out

    def _output_by_kind(self) -> OutputSpec:
        anomaly = anomaly_outputs(self.graph.outputs)
        if anomaly is not None:
            map_name, score_name, mask_name = anomaly
            # the map is used as it is, clipped to 0..1: anomalib's exports normalise it (and the score) there
            return OutputSpec(map_name, "anomaly", 1, "none", self.pick("output.threshold", 0.5, "default"),
                              score_name=score_name, mask_name=mask_name,
                              image_threshold=self.pick("output.image_threshold", 0.5, "default"))
        t = self.graph.outputs[0]
        final = self.graph.final_ops.get(t.name, "")
        shape: tuple[Dim, ...] = t.shape if t.shape is not None else ()
        rank = len(shape) if t.shape is not None else -1
        threshold = self.pick("output.threshold", 0.5, "default")
        is_labels = t.dtype in _INT_DTYPES or final == "ArgMax"
        if rank == 4:
            axis = channel_axis(shape, self.input_layout, self.input_hw)
            channels = shape[axis]
            if channels == 1 and is_labels:  # ArgMax with keepdims=1: a label map with a channel axis
                return OutputSpec(t.name, "labels", axis, self.activation(final, None, "none"), threshold)
            if isinstance(channels, int) and channels > MAX_MASK_CLASSES:
                raise self.fail(f"the output has {channels} classes; SegLens masks hold at most "
                                f"{MAX_MASK_CLASSES}")
            if channels == 1:
                return OutputSpec(t.name, "binary", axis, self.activation(final, "Sigmoid", "sigmoid"),
                                  threshold)
            if isinstance(channels, int):
                return OutputSpec(t.name, "scores", axis, self.activation(final, "Softmax", "softmax"),
                                  threshold)
        elif rank == 3:
            if is_labels:
                return OutputSpec(t.name, "labels", None, self.activation(final, None, "none"), threshold)
            return OutputSpec(t.name, "binary", None, self.activation(final, "Sigmoid", "sigmoid"), threshold)
        elif rank == 2 and t.dtype in (*_FLOAT_INPUTS, "float64"):
            kind_activation = "sigmoid" if shape[1] == 1 else "softmax"
            return OutputSpec(t.name, "classification", None,
                              self.activation(final, kind_activation.capitalize(), kind_activation), threshold)
        raise self.fail("not an image model SegLens understands: the first output must be [N,C,H,W] scores, "
                        "[N,1,H,W] or [N,H,W] masks, or [N,K] class scores")

    def _classes(self, out: OutputSpec) -> tuple[ClassInfo, ...]:
        count = self._class_count(out)
        names = self.overrides.get("classes")
        if names is not None:
            self.sources["classes"] = "sidecar"
            if out.kind in ("binary", "anomaly") and len(names) == 1:
                names = (("background", UNSET_COLOR), *names)
            if count is not None and len(names) != count:
                raise self._count_error(len(names), count)
        elif out.kind == "anomaly":
            self.sources["classes"] = "default"
            names = (("background", UNSET_COLOR), ("anomaly", UNSET_COLOR))
        else:
            names = self._metadata_classes(count)
        paint_background = out.kind != "classification"
        return tuple(
            ClassInfo(name, _default_color(i, paint_background) if color is UNSET_COLOR else color, code)
            for i, (name, color, code) in enumerate((*entry, None)[:3] for entry in names)  # detected: no code
        )

    def _count_error(self, listed: int, count: int) -> SidecarError:
        labels = self.overrides.get("classes_file")
        if labels is None:
            return self.sidecar_error("classes", f"lists {listed} classes, but the model's output has {count}")
        return self.sidecar_error("classes_file", f"{labels} lists {listed} labels, but the model's output has "
                                                  f"{count} classes")

    def _class_count(self, out: OutputSpec) -> int | None:
        """The declared number of classes, refused when absurd: names are then made one per class."""
        count = self._declared_class_count(out)
        limit = MAX_CLASSIFICATION_CLASSES if out.kind == "classification" else MAX_MASK_CLASSES
        if count is not None and not 1 <= count <= limit:
            what = "SegLens classifies into" if out.kind == "classification" else "SegLens masks hold"
            raise self.fail(f"the output declares {count} classes; {what} 1 to {limit}")
        return count

    def _declared_class_count(self, out: OutputSpec) -> int | None:
        t = self.graph.outputs[0]
        shape = cast(tuple[Dim, ...], t.shape)  # an output of a kind SegLens understands has a rank
        if out.kind in ("binary", "anomaly") or (out.kind == "classification" and shape[1] == 1):
            return 2
        if out.kind == "scores":  # its channel axis holds a fixed size (_output_by_kind)
            if (painted := painted_labels(self.overrides)) is not None:  # nnU-Net regions or parts paint labels
                return painted
            channels = shape[cast(int, out.channel_axis)]
            return channels if isinstance(channels, int) else None
        if out.kind == "classification":
            return shape[1] if isinstance(shape[1], int) else None
        return self.graph.argmax_channels.get(t.name)

    def _metadata_classes(self, count: int | None) -> tuple[tuple[str, Any], ...]:
        for key in ("classes", "class_names", "names", "labels"):
            raw = self.graph.metadata.get(key)
            names = parse_name_list(raw) if raw else None
            if names and (count is None or len(names) == count):
                self.sources["classes"] = "metadata"
                return tuple((n, UNSET_COLOR) for n in names)
        self.sources["classes"] = "default"
        is_classification = self.graph.outputs[0].shape is not None and len(self.graph.outputs[0].shape) == 2
        if count is None:
            count = 2  # a label map of unknown range: labels beyond the list are reported as "other"
        if is_classification:
            return tuple((f"class {i}", UNSET_COLOR) for i in range(count))
        return (("background", UNSET_COLOR), *((f"class {i}", UNSET_COLOR) for i in range(1, count)))


def _per_channel(values: tuple[float, ...], channels: int) -> tuple[float, ...]:
    return tuple(values) * channels if len(values) == 1 else tuple(values)


def _default_color(index: int, paint_background: bool) -> tuple[int, int, int] | None:
    if paint_background and index == 0:
        return None
    return PALETTE[(index - 1) % len(PALETTE)]
