"""The network of an nnU-Net v2 configuration as an ONNX graph, emitted without PyTorch: the plans' `architecture`
(dynamic_network_architectures' PlainConvUNet or ResidualEncoderUNet with its keyword arguments) and the checkpoint's
state dict become the graph that module computes in eval mode with deep supervision off — per conv block conv →
(dropout: nothing in eval) → norm → nonlin, transposed convs with kernel = stride, the upsampled features
concatenated before the skip, ResNet-D blocks (average pool + 1×1 conv on the skip where the stride or the width
changes), and the last segmentation layer only (the deep-supervision heads are checked against the state dict and
dropped).

Input `[N, C, D, H, W]` (`[N, C, H, W]` in 2D) with N and the spatial axes dynamic; each spatial size must be a
multiple of the product of the strides on its axis (the graph's doc string and its metadata `seglens.spatial_multiple`
say which). Output: logits `[N, K, …]` of the input's spatial size.

Whatever the plans ask for that this graph would not compute exactly — another class, another norm or nonlin, a
keyword argument it does not know — is refused in one line naming the plans file and the value, never approximated;
so is a state dict whose keys or shapes are not exactly the module's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from app.errors import ModelError

CLASSES = ("PlainConvUNet", "ResidualEncoderUNet")
_PACKAGE = "dynamic_network_architectures.architectures."  # its module moved (unet, residual_unet): the class counts
_COMMON_KWARGS = frozenset({
    "n_stages", "features_per_stage", "conv_op", "kernel_sizes", "strides", "n_conv_per_stage_decoder", "conv_bias",
    "norm_op", "norm_op_kwargs", "dropout_op", "dropout_op_kwargs", "nonlin", "nonlin_kwargs", "deep_supervision",
})
_KWARGS = {
    "PlainConvUNet": _COMMON_KWARGS | {"n_conv_per_stage", "nonlin_first"},
    "ResidualEncoderUNet": _COMMON_KWARGS | {"n_blocks_per_stage", "block", "bottleneck_channels", "stem_channels"},
}
_BLOCKS: dict[str, Literal["basic", "bottleneck"]] = {
    "dynamic_network_architectures.building_blocks.residual.BasicBlockD": "basic",
    "dynamic_network_architectures.building_blocks.residual.BottleneckD": "bottleneck",
}
_ACTIVATIONS: tuple[tuple[str, Literal["LeakyRelu", "Relu"]], ...] = (("LeakyReLU", "LeakyRelu"), ("ReLU", "Relu"))
_NONLINS = {f"torch.nn{module}.{name}": op for module in ("", ".modules.activation") for name, op in _ACTIVATIONS}
_DROPOUTS = frozenset(f"torch.nn{module}.{name}" for module in ("", ".modules.dropout")
                      for name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d"))


@dataclass(frozen=True)
class Norm:
    """InstanceNorm as the plans configure it (without running statistics: each image normalised by its own)."""

    eps: float
    affine: bool


@dataclass(frozen=True)
class Nonlin:
    """The activation: ONNX's op and LeakyReLU's negative slope (torch's default 1e-2)."""

    op: Literal["LeakyRelu", "Relu"]
    slope: float


@dataclass(frozen=True)
class Architecture:
    """What the graph computes, read from the plans' `architecture`: every per-stage value one entry per stage,
    every per-axis value one int per spatial axis."""

    name: str  # one of CLASSES
    dims: int
    features: tuple[int, ...]
    kernels: tuple[tuple[int, ...], ...]
    strides: tuple[tuple[int, ...], ...]
    encoder_depth: tuple[int, ...]  # convs (PlainConvUNet) or residual blocks (ResidualEncoderUNet) per stage
    decoder_depth: tuple[int, ...]
    conv_bias: bool
    norm: Norm | None
    nonlin: Nonlin | None
    dropout: bool  # a dropout module in the conv blocks: nothing in eval, but it shifts the `all_modules` names
    nonlin_first: bool
    block: Literal["basic", "bottleneck"]
    bottleneck: tuple[int, ...]  # BottleneckD's inner width per stage (unused by BasicBlockD)
    stem: int

    @property
    def multiple(self) -> tuple[int, ...]:
        """Each spatial size must be a multiple of this: the product of the strides on its axis."""
        return tuple(int(np.prod([stride[axis] for stride in self.strides])) for axis in range(self.dims))


def network_graph(architecture: Mapping[str, object], weights: Mapping[str, np.ndarray], *, in_channels: int,
                  num_classes: int, dims: Literal[2, 3], opset: int = 17, plans: str = "plans.json",
                  checkpoint: str = "checkpoint") -> onnx.ModelProto:
    """The ONNX model of the plans' network with `weights` (the checkpoint's state dict as arrays, its keys exactly
    the module's). `plans` and `checkpoint` name the files in the one-line ModelError a mismatch raises."""
    arch = read_architecture(architecture, dims=dims, plans=plans)
    graph = _Graph(weights, arch, checkpoint)
    skips = _encoder(graph, arch, in_channels)
    logits = _decoder(graph, arch, skips, num_classes)
    graph.check_keys()
    model = _model(graph, arch, logits, in_channels=in_channels, num_classes=num_classes, opset=opset)
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise ModelError(f"{plans}: the {arch.name} graph does not validate: {str(exc).splitlines()[0]}") from exc
    return model


# ---------------------------------------------------------------------------------------------------- the plans
def read_architecture(architecture: Mapping[str, object], *, dims: int, plans: str = "plans.json") -> Architecture:
    """The plans' `architecture` ({network_class_name, arch_kwargs, _kw_requires_import}) checked and normalised."""
    read = _Plans(plans, dims)
    name = read.class_name(architecture.get("network_class_name"))
    kwargs = architecture.get("arch_kwargs")
    if not isinstance(kwargs, Mapping):
        raise read.error(f"the architecture's arch_kwargs are {kwargs!r}, not a mapping")
    unknown = sorted(set(kwargs) - _KWARGS[name])
    if unknown:
        raise read.error(f"{name}'s argument '{unknown[0]}' is not one SegLens can express")
    return read.architecture(name, kwargs)


class _Plans:
    """Reads the values of one plans file's arch_kwargs; every refusal is one line naming the file and the value."""

    def __init__(self, source: str, dims: int) -> None:
        self.source = source
        self.dims = dims

    def error(self, text: str) -> ModelError:
        return ModelError(f"{self.source}: {text}")

    def class_name(self, value: object) -> str:
        short = value.rsplit(".", 1)[-1] if isinstance(value, str) else ""
        if not (isinstance(value, str) and value.startswith(_PACKAGE) and short in CLASSES):
            raise self.error(f"architecture {value!r} is not one SegLens imports ({', '.join(CLASSES)})")
        return short

    def architecture(self, name: str, kwargs: Mapping[str, object]) -> Architecture:
        stages = self.integer(kwargs.get("n_stages"), "n_stages")
        plain = name == "PlainConvUNet"
        features = self.per_stage(kwargs.get("features_per_stage"), stages, "features_per_stage")
        block = self.block(kwargs.get("block"))
        return Architecture(
            name=name, dims=self.conv_dims(kwargs.get("conv_op")),
            features=tuple(self.integer(f, "features_per_stage") for f in features),
            kernels=tuple(self.per_axis(k, "kernel_sizes") for k in self.per_stage(kwargs.get("kernel_sizes"), stages,
                                                                                   "kernel_sizes")),
            strides=tuple(self.per_axis(s, "strides") for s in self.per_stage(kwargs.get("strides"), stages,
                                                                              "strides")),
            encoder_depth=self.depths(kwargs, "n_conv_per_stage" if plain else "n_blocks_per_stage", stages),
            decoder_depth=self.depths(kwargs, "n_conv_per_stage_decoder", stages - 1),
            conv_bias=self.flag(kwargs.get("conv_bias", False), "conv_bias"),
            norm=self.norm(kwargs.get("norm_op"), kwargs.get("norm_op_kwargs")),
            nonlin=self.nonlin(kwargs.get("nonlin"), kwargs.get("nonlin_kwargs")),
            dropout=self.dropout(kwargs.get("dropout_op")),
            nonlin_first=self.flag(kwargs.get("nonlin_first", False), "nonlin_first"),
            block=block, bottleneck=self.bottleneck(kwargs.get("bottleneck_channels"), stages, block),
            stem=self.integer(kwargs.get("stem_channels") or features[0], "stem_channels"),
        )

    def integer(self, value: object, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(f"{key} {value!r} is not a positive whole number")
        return value

    def flag(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(f"{key} {value!r} is not true or false")
        return value

    def per_stage(self, value: object, stages: int, key: str, *, each: str = "stages") -> list[object]:
        """A value given once for all stages (or axes), or one per stage."""
        if isinstance(value, int) and not isinstance(value, bool):
            return [value] * stages
        if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != stages:
            raise self.error(f"{key} {value!r} does not give one value to each of the {stages} {each}")
        return list(value)

    def per_axis(self, value: object, key: str) -> tuple[int, ...]:
        """A value given once for all spatial axes, or one per axis."""
        values = self.per_stage(value, self.dims, f"{key} entry", each="spatial axes")
        return tuple(self.integer(v, key) for v in values)

    def depths(self, kwargs: Mapping[str, object], key: str, count: int) -> tuple[int, ...]:
        return tuple(self.integer(n, key) for n in self.per_stage(kwargs.get(key), count, key))

    def conv_dims(self, value: object) -> int:
        for dims in (2, 3):
            if value in (f"torch.nn.Conv{dims}d", f"torch.nn.modules.conv.Conv{dims}d"):
                if dims != self.dims:
                    raise self.error(f"conv_op {value!r} is {dims}D, not the {self.dims}D this import asked for")
                return dims
        raise self.error(f"conv_op {value!r} is not one SegLens imports (Conv2d, Conv3d)")

    def norm(self, value: object, kwargs: object) -> Norm | None:
        if value is None:
            return None
        names = (f"torch.nn.InstanceNorm{self.dims}d", f"torch.nn.modules.instancenorm.InstanceNorm{self.dims}d")
        if value not in names:
            raise self.error(f"norm_op {value!r} is not one SegLens imports (InstanceNorm{self.dims}d)")
        options = self.options(kwargs, "norm_op_kwargs", {"eps", "affine", "momentum", "track_running_stats"})
        if options.get("track_running_stats", False) is not False:
            raise self.error("norm_op_kwargs track_running_stats True is not one SegLens imports")
        eps = options.get("eps", 1e-5)  # torch's InstanceNorm defaults: eps 1e-5, affine False
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
            raise self.error(f"norm_op_kwargs eps {eps!r} is not a small positive number")
        return Norm(eps=float(eps), affine=self.flag(options.get("affine", False), "norm_op_kwargs affine"))

    def nonlin(self, value: object, kwargs: object) -> Nonlin | None:
        if value is None:
            return None
        op = _NONLINS.get(value) if isinstance(value, str) else None
        if op is None:
            raise self.error(f"nonlin {value!r} is not one SegLens imports (LeakyReLU, ReLU)")
        allowed = {"inplace", "negative_slope"} if op == "LeakyRelu" else {"inplace"}
        slope = self.options(kwargs, "nonlin_kwargs", allowed).get("negative_slope", 1e-2)  # torch's default
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise self.error(f"nonlin_kwargs negative_slope {slope!r} is not a number")
        return Nonlin(op=op, slope=float(slope))

    def options(self, value: object, key: str, allowed: set[str]) -> Mapping[str, object]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(f"{key} {value!r} is not a mapping")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise self.error(f"{key} '{unknown[0]}' is not one SegLens can express")
        return value

    def dropout(self, value: object) -> bool:
        if value is not None and value not in _DROPOUTS:
            raise self.error(f"dropout_op {value!r} is not one SegLens imports (Dropout, Dropout2d, Dropout3d)")
        return value is not None

    def block(self, value: object) -> Literal["basic", "bottleneck"]:
        if value is None:
            return "basic"
        block = _BLOCKS.get(value) if isinstance(value, str) else None
        if block is None:
            raise self.error(f"block {value!r} is not one SegLens imports (BasicBlockD, BottleneckD)")
        return block

    def bottleneck(self, value: object, stages: int, block: str) -> tuple[int, ...]:
        if block == "basic":
            return (0,) * stages
        return tuple(self.integer(v, "bottleneck_channels")
                     for v in self.per_stage(value, stages, "bottleneck_channels"))


# ---------------------------------------------------------------------------------------------------- the graph
class _Graph:
    """The nodes and initializers being emitted, and the state-dict keys they took: the initializers carry the
    state dict's names, so a value in the ONNX file is traceable to the checkpoint."""

    def __init__(self, weights: Mapping[str, np.ndarray], arch: Architecture, checkpoint: str) -> None:
        self.weights = weights
        self.arch = arch
        self.checkpoint = checkpoint
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.expected: dict[str, tuple[int, ...]] = {}  # every key the module's state dict has, with its shape
        self.aliases: dict[str, str] = {}  # a second name torch gives the same tensor → the first

    def expect(self, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
        """`key`'s array, checked against `shape` (None where the weights lack it: check_keys says so)."""
        self.expected[key] = shape
        value = self.weights.get(key)
        if value is not None and tuple(np.shape(value)) != shape:
            raise ModelError(f"{self.checkpoint}: '{key}' has shape {tuple(np.shape(value))}, the plans' "
                             f"{self.arch.name} needs {shape}")
        return value

    def param(self, key: str, shape: tuple[int, ...]) -> str:
        """The initializer named `key`: the checkpoint's array as float32."""
        value = self.expect(key, shape)
        if value is not None:
            self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), key))
        return key

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def alias(self, alias: str, key: str) -> None:
        self.aliases[alias] = key

    def node(self, op: str, inputs: list[str], *, output: str = "", **attributes: Any) -> str:
        output = output or f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [output], **attributes))
        return output

    def check_keys(self) -> None:
        """The weights are the module's state dict: no key missing, none extra, every alias of the right shape.
        Aliases (the names torch gives a module registered twice: `all_modules.i`, `decoder.encoder.`) may be absent."""
        encoder = {key: key for key in self.expected} | self.aliases  # the decoder holds the encoder too
        self.aliases.update({f"decoder.{key}": canonical for key, canonical in encoder.items()
                             if key.startswith("encoder.")})
        missing = [key for key in self.expected if key not in self.weights]
        if missing:
            raise ModelError(f"{self.checkpoint}: the weights lack '{missing[0]}'{_more(missing)} that the plans' "
                             f"{self.arch.name} has")
        extra = [key for key in self.weights if key not in self.expected and key not in self.aliases]
        if extra:
            raise ModelError(f"{self.checkpoint}: '{extra[0]}'{_more(extra)} is not a weight of the plans' "
                             f"{self.arch.name}")
        for alias in set(self.aliases) & set(self.weights):
            shape, wanted = tuple(np.shape(self.weights[alias])), self.expected[self.aliases[alias]]
            if shape != wanted:
                raise ModelError(f"{self.checkpoint}: '{alias}' has shape {shape}, the plans' {self.arch.name} "
                                 f"needs {wanted}")


def _more(keys: list[str]) -> str:
    return f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""


def _conv_block(graph: _Graph, x: str, prefix: str, channels: tuple[int, int], kernel: tuple[int, ...],
                stride: tuple[int, ...], *, bias: bool, dropout: bool, nonlin: bool) -> str:
    """dynamic_network_architectures' ConvDropoutNormReLU at `prefix` (its modules also named `all_modules.i`)."""
    arch = graph.arch
    cin, cout = channels
    inputs = [x, graph.param(f"{prefix}.conv.weight", (cout, cin, *kernel))]
    if bias:
        inputs.append(graph.param(f"{prefix}.conv.bias", (cout,)))
    for name in ("weight", "bias")[:len(inputs) - 1]:
        graph.alias(f"{prefix}.all_modules.0.{name}", f"{prefix}.conv.{name}")
    pads = [(k - 1) // 2 for k in kernel]
    y = graph.node("Conv", inputs, kernel_shape=list(kernel), strides=list(stride), pads=pads * 2)
    has_nonlin = nonlin and arch.nonlin is not None
    if has_nonlin and arch.nonlin_first:
        y = _nonlin(graph, y)
    if arch.norm is not None:
        swapped = has_nonlin and arch.nonlin_first  # conv, dropout, nonlin, norm
        y = _norm(graph, y, prefix, cout, index=1 + int(dropout) + int(swapped))
    if has_nonlin and not arch.nonlin_first:
        y = _nonlin(graph, y)
    return y


def _norm(graph: _Graph, x: str, prefix: str, channels: int, *, index: int) -> str:
    norm = graph.arch.norm
    assert norm is not None
    if norm.affine:
        scale = graph.param(f"{prefix}.norm.weight", (channels,))
        shift = graph.param(f"{prefix}.norm.bias", (channels,))
        graph.alias(f"{prefix}.all_modules.{index}.weight", scale)
        graph.alias(f"{prefix}.all_modules.{index}.bias", shift)
    else:
        scale = graph.constant(f"{prefix}.norm.ones", np.ones(channels))
        shift = graph.constant(f"{prefix}.norm.zeros", np.zeros(channels))
    return graph.node("InstanceNormalization", [x, scale, shift], epsilon=norm.eps)


def _nonlin(graph: _Graph, x: str) -> str:
    nonlin = graph.arch.nonlin
    assert nonlin is not None
    if nonlin.op == "LeakyRelu":
        return graph.node("LeakyRelu", [x], alpha=nonlin.slope)
    return graph.node("Relu", [x])


def _encoder(graph: _Graph, arch: Architecture, in_channels: int) -> list[str]:
    """The encoder's output at each stage (the skips; the last is the bottleneck)."""
    skips: list[str] = []
    x, channels = "input", in_channels
    if arch.name == "ResidualEncoderUNet":
        x = _conv_block(graph, x, "encoder.stem.convs.0", (in_channels, arch.stem), arch.kernels[0],
                        (1,) * arch.dims, bias=arch.conv_bias, dropout=arch.dropout, nonlin=True)
        channels = arch.stem
    for stage, features in enumerate(arch.features):
        for index in range(arch.encoder_depth[stage]):
            stride = arch.strides[stage] if index == 0 else (1,) * arch.dims
            if arch.name == "PlainConvUNet":
                x = _conv_block(graph, x, f"encoder.stages.{stage}.0.convs.{index}", (channels, features),
                                arch.kernels[stage], stride, bias=arch.conv_bias, dropout=arch.dropout, nonlin=True)
            else:
                x = _residual_block(graph, x, f"encoder.stages.{stage}.blocks.{index}", (channels, features),
                                    stage, stride)
            channels = features
        skips.append(x)
    return skips


def _residual_block(graph: _Graph, x: str, prefix: str, channels: tuple[int, int], stage: int,
                    stride: tuple[int, ...]) -> str:
    """BasicBlockD (conv1 → conv2 without nonlin) or BottleneckD (1×1 → k×k strided → 1×1), plus the skip, then
    the nonlin."""
    arch = graph.arch
    cin, cout = channels
    kernel, unit = arch.kernels[stage], (1,) * arch.dims
    if arch.block == "basic":
        y = _conv_block(graph, x, f"{prefix}.conv1", (cin, cout), kernel, stride, bias=arch.conv_bias,
                        dropout=arch.dropout, nonlin=True)
        y = _conv_block(graph, y, f"{prefix}.conv2", (cout, cout), kernel, unit, bias=arch.conv_bias,
                        dropout=False, nonlin=False)
    else:
        inner = arch.bottleneck[stage]
        y = _conv_block(graph, x, f"{prefix}.conv1", (cin, inner), unit, unit, bias=arch.conv_bias, dropout=False,
                        nonlin=True)
        y = _conv_block(graph, y, f"{prefix}.conv2", (inner, inner), kernel, stride, bias=arch.conv_bias,
                        dropout=arch.dropout, nonlin=True)
        y = _conv_block(graph, y, f"{prefix}.conv3", (inner, cout), unit, unit, bias=arch.conv_bias, dropout=False,
                        nonlin=False)
    y = graph.node("Add", [y, _skip(graph, x, prefix, channels, stride)])
    return _nonlin(graph, y) if arch.nonlin is not None else y


def _skip(graph: _Graph, x: str, prefix: str, channels: tuple[int, int], stride: tuple[int, ...]) -> str:
    """ResNet-D's skip: an average pool of kernel = stride where the block strides, a 1×1 conv (no bias) and norm
    where the width changes, else the input itself."""
    strided = any(s != 1 for s in stride)
    if strided:
        x = graph.node("AveragePool", [x], kernel_shape=list(stride), strides=list(stride))
    if channels[0] != channels[1]:
        unit = (1,) * graph.arch.dims
        x = _conv_block(graph, x, f"{prefix}.skip.{int(strided)}", channels, unit, unit, bias=False,
                        dropout=False, nonlin=False)
    return x


def _decoder(graph: _Graph, arch: Architecture, skips: list[str], num_classes: int) -> str:
    """UNetDecoder: from the bottleneck up, a transposed conv (kernel = stride), the skip concatenated after it,
    the stage's convs; the logits of the last segmentation layer (the others are checked, not emitted)."""
    x, stages = skips[-1], len(arch.features)
    for s in range(stages - 1):
        below, width, stride = arch.features[-(s + 1)], arch.features[-(s + 2)], arch.strides[-(s + 1)]
        inputs = [x, graph.param(f"decoder.transpconvs.{s}.weight", (below, width, *stride))]
        if arch.conv_bias:
            inputs.append(graph.param(f"decoder.transpconvs.{s}.bias", (width,)))
        x = graph.node("ConvTranspose", inputs, kernel_shape=list(stride), strides=list(stride))
        x = graph.node("Concat", [x, skips[-(s + 2)]], axis=1)
        channels = 2 * width
        for index in range(arch.decoder_depth[s]):
            x = _conv_block(graph, x, f"decoder.stages.{s}.convs.{index}", (channels, width), arch.kernels[-(s + 2)],
                            (1,) * arch.dims, bias=arch.conv_bias, dropout=arch.dropout, nonlin=True)
            channels = width
        head = (num_classes, width, *(1,) * arch.dims)
        if s < stages - 2:  # a deep-supervision head: in the state dict, not in the graph
            graph.expect(f"decoder.seg_layers.{s}.weight", head)
            graph.expect(f"decoder.seg_layers.{s}.bias", (num_classes,))
    last = stages - 2
    inputs = [x, graph.param(f"decoder.seg_layers.{last}.weight", (num_classes, arch.features[0], *(1,) * arch.dims)),
              graph.param(f"decoder.seg_layers.{last}.bias", (num_classes,))]
    return graph.node("Conv", inputs, kernel_shape=[1] * arch.dims, output="logits")


def _model(graph: _Graph, arch: Architecture, logits: str, *, in_channels: int, num_classes: int,
           opset: int) -> onnx.ModelProto:
    axes = ["depth", "height", "width"][-arch.dims:]
    multiple = ", ".join(str(m) for m in arch.multiple)
    doc = (f"nnU-Net v2 {arch.name} ({arch.dims}D), deep supervision off: input [N, C, {', '.join(axes)}] with "
           f"each spatial size a multiple of ({multiple}), output logits [N, K, {', '.join(axes)}]")
    model = helper.make_model(
        helper.make_graph(
            graph.nodes, f"nnunet_{arch.name}",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", in_channels, *axes])],
            [helper.make_tensor_value_info(logits, TensorProto.FLOAT, ["batch", num_classes, *axes])],
            graph.initializers, doc_string=doc),
        opset_imports=[helper.make_opsetid("", opset)], producer_name="SegLens", doc_string=doc)
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import))
    helper.set_model_props(model, {"seglens.source": f"nnU-Net v2 {arch.name}",
                                   "seglens.spatial_multiple": ",".join(str(m) for m in arch.multiple)})
    return model
