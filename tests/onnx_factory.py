"""Tiny ONNX models built with onnx.helper, one per output pattern SegLens must understand.

Every model computes something simple and known from the pixels, so tests can assert exact masks/labels.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT, HALF, UINT8, INT64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.UINT8, TensorProto.INT64


def save(path: Path, nodes, inputs, outputs, initializers=(), metadata: dict | None = None) -> Path:
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests")
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def tensor(name: str, elem: int, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def const(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def rgb_classes(path: Path, *, metadata: dict | None = None) -> Path:
    """[N,3,H,W] → [N,3,H,W] scores = the RGB channels: class = the brightest channel (0 R, 1 G, 2 B)."""
    weight = np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1)
    return save(path, [helper.make_node("Conv", ["image", "w"], ["scores"])],
                [tensor("image", FLOAT, ["N", 3, "H", "W"])], [tensor("scores", FLOAT, ["N", 3, "H", "W"])],
                [const("w", weight)], metadata)


def permuted_classes(path: Path, order: tuple[int, int, int] = (2, 0, 1)) -> Path:
    """Like rgb_classes, but score channel k is input channel order[k]: with (2, 0, 1) red is class 1, green
    class 2 and blue class 0 (a model B that disagrees with rgb_classes in every way `compare` paints)."""
    weight = np.zeros((3, 3, 1, 1), np.float32)
    for k, channel in enumerate(order):
        weight[k, channel] = 1.0
    return save(path, [helper.make_node("Conv", ["image", "w"], ["scores"])],
                [tensor("image", FLOAT, ["N", 3, "H", "W"])], [tensor("scores", FLOAT, ["N", 3, "H", "W"])],
                [const("w", weight)])


def binary_logits(path: Path, *, end_with_sigmoid: bool = False) -> Path:
    """[N,1,H,W] gray → [N,1,H,W]: logit = 20·(x − 0.5), optionally followed by Sigmoid in the graph."""
    nodes = [helper.make_node("Sub", ["image", "half"], ["centred"]),
             helper.make_node("Mul", ["centred", "gain"], ["logits" if not end_with_sigmoid else "pre"])]
    if end_with_sigmoid:
        nodes.append(helper.make_node("Sigmoid", ["pre"], ["logits"]))
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 1, "H", "W"])],
                [tensor("logits", FLOAT, ["N", 1, "H", "W"])],
                [const("half", np.float32(0.5)), const("gain", np.float32(20.0))])


def embedded_argmax(path: Path) -> Path:
    """[N,3,H,W] → ArgMax over channels → [N,H,W] int64 labels (argmax already in the graph)."""
    nodes = [helper.make_node("Identity", ["image"], ["scores"]),
             helper.make_node("ArgMax", ["scores"], ["labels"], axis=1, keepdims=0)]
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 3, "H", "W"])], [tensor("labels", INT64, ["N", "H", "W"])])


def classifier(path: Path, *, end_with_softmax: bool = False, metadata: dict | None = None) -> Path:
    """[N,3,H,W] → mean colour per channel × 10 → [N,3] logits (class = dominant colour)."""
    out = "pre" if end_with_softmax else "logits"
    nodes = [helper.make_node("GlobalAveragePool", ["image"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
             helper.make_node("Mul", ["flat", "ten"], [out])]
    if end_with_softmax:
        nodes.append(helper.make_node("Softmax", ["pre"], ["logits"], axis=1))
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 3, 224, 224])], [tensor("logits", FLOAT, ["N", 3])],
                [const("ten", np.float32(10.0))], metadata)


def nhwc_classes(path: Path) -> Path:
    """[N,H,W,3] input (channels last) → transposed inside → [N,3,H,W] scores = RGB."""
    nodes = [helper.make_node("Transpose", ["image"], ["nchw"], perm=[0, 3, 1, 2]),
             helper.make_node("Identity", ["nchw"], ["scores"])]
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", "H", "W", 3])], [tensor("scores", FLOAT, ["N", 3, "H", "W"])])


def float16_classes(path: Path) -> Path:
    """float16 [N,3,H,W] in and out: scores = RGB, computed in half precision."""
    nodes = [helper.make_node("Identity", ["image"], ["scores"])]
    return save(path, nodes,
                [tensor("image", HALF, ["N", 3, "H", "W"])], [tensor("scores", HALF, ["N", 3, "H", "W"])])


def fixed_size_classes(path: Path, size: int = 64) -> Path:
    """Fixed [1,3,size,size] input → scores = RGB."""
    nodes = [helper.make_node("Identity", ["image"], ["scores"])]
    return save(path, nodes,
                [tensor("image", FLOAT, [1, 3, size, size])], [tensor("scores", FLOAT, [1, 3, size, size])])


def needs_divisor(path: Path, factor: int = 8) -> Path:
    """UNet-like: scores = RGB + (pool ×3 then upsample ×8) · 0 — fails unless H and W divide by 8."""
    nodes = [helper.make_node("MaxPool", ["image"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxPool", ["p1"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxPool", ["p2"], ["p3"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Resize", ["p3", "", "scales"], ["up"], mode="nearest"),
             helper.make_node("Mul", ["up", "zero"], ["nothing"]),
             helper.make_node("Add", ["image", "nothing"], ["scores"])]
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 3, "H", "W"])], [tensor("scores", FLOAT, ["N", 3, "H", "W"])],
                [const("scales", np.array([1, 1, factor, factor], np.float32)), const("zero", np.float32(0.0))])


def half_resolution_classes(path: Path) -> Path:
    """Output at stride 2 (like many segmentation heads): scores = RGB average-pooled 2×2."""
    nodes = [helper.make_node("AveragePool", ["image"], ["scores"], kernel_shape=[2, 2], strides=[2, 2])]
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 3, "H", "W"])], [tensor("scores", FLOAT, ["N", 3, "h", "w"])])


def uint8_binary(path: Path) -> Path:
    """uint8 [N,1,H,W] pixels in → float [N,1,H,W] = (x − 128) as logits."""
    nodes = [helper.make_node("Cast", ["image"], ["f"], to=FLOAT), helper.make_node("Sub", ["f", "mid"], ["logits"])]
    return save(path, nodes,
                [tensor("image", UINT8, ["N", 1, "H", "W"])], [tensor("logits", FLOAT, ["N", 1, "H", "W"])],
                [const("mid", np.float32(128.0))])


def text_model(path: Path) -> Path:
    """A token-id model: [N,T] int64 → [N,T,8] embeddings. Not an image model."""
    table = np.zeros((100, 8), np.float32)
    nodes = [helper.make_node("Gather", ["table", "tokens"], ["embeddings"])]
    return save(path, nodes, [tensor("tokens", INT64, ["N", "T"])], [tensor("embeddings", FLOAT, ["N", "T", 8])],
                [const("table", table)])


def class_metadata(names: list[str]) -> dict:
    return {"classes": json.dumps(names)}


def argmax_keepdims(path: Path) -> Path:
    """ArgMax with keepdims=1, as torch.argmax(x, 1, keepdim=True) exports: [N,1,H,W] int64 labels."""
    nodes = [helper.make_node("ArgMax", ["image"], ["labels"], axis=1, keepdims=1)]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 3, "H", "W"])],
                [tensor("labels", INT64, ["N", 1, "H", "W"])])


def single_logit_classifier(path: Path) -> Path:
    """[N,1] probability (graph ends in Sigmoid) that the image is bright: logit = 20·(mean − 0.5)."""
    nodes = [helper.make_node("ReduceMean", ["image"], ["mean"], keepdims=0, axes=[1, 2, 3]),
             helper.make_node("Sub", ["mean", "half"], ["centred"]),
             helper.make_node("Mul", ["centred", "gain"], ["logit"]),
             helper.make_node("Unsqueeze", ["logit", "axis1"], ["logit2"]),
             helper.make_node("Sigmoid", ["logit2"], ["probability"])]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 1, 32, 32])], [tensor("probability", FLOAT, ["N", 1])],
                [const("half", np.float32(0.5)), const("gain", np.float32(20.0)),
                 const("axis1", np.array([1], np.int64))])


def stride8_classes(path: Path) -> Path:
    """Output at stride 8 (an 8×8 average of RGB), like a segmentation head without its up-sampling."""
    nodes = [helper.make_node("AveragePool", ["image"], ["scores"], kernel_shape=[8, 8], strides=[8, 8])]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 3, "H", "W"])],
                [tensor("scores", FLOAT, ["N", 3, "h", "w"])])


def fixed_many_classes(path: Path) -> Path:
    """Fixed [1,3,64,64] → [1,21,16,16]: more classes than the output is wide (channel axis must be 1)."""
    weight = np.zeros((21, 3, 1, 1), np.float32)
    weight[5, 0] = weight[7, 1] = weight[9, 2] = 1.0
    nodes = [helper.make_node("AveragePool", ["image"], ["pooled"], kernel_shape=[4, 4], strides=[4, 4]),
             helper.make_node("Conv", ["pooled", "w"], ["scores"])]
    return save(path, nodes, [tensor("image", FLOAT, [1, 3, 64, 64])], [tensor("scores", FLOAT, [1, 21, 16, 16])],
                [const("w", weight)])


def shape_liar(path: Path) -> Path:
    """Declares a [N,H,W] label output but really returns [N,1,H,W] (an exporter's mistake)."""
    nodes = [helper.make_node("ArgMax", ["image"], ["labels"], axis=1, keepdims=1)]
    graph = helper.make_graph(nodes, "liar", [tensor("image", FLOAT, ["N", 3, "H", "W"])],
                              [tensor("labels", INT64, ["N", "H", "W"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))  # no checker: the declared shape is wrong on purpose
    return path


def fixed_batch_two(path: Path) -> Path:
    nodes = [helper.make_node("Identity", ["image"], ["scores"])]
    return save(path, nodes, [tensor("image", FLOAT, [2, 3, "H", "W"])], [tensor("scores", FLOAT, [2, 3, "H", "W"])])


def declared_shapes(path: Path, *, image: tuple = (1, 3, 8, 8), output: tuple = (1, 3, 8, 8),
                    output_type: int = FLOAT, argmax_over: list | None = None) -> Path:
    """A graph that only *declares* shapes (an Identity, or a channel mean expanded to `argmax_over`, then an
    ArgMax over axis 1): for absurd declarations such as a billion classes, refused from the declaration alone."""
    nodes = [helper.make_node("Identity", ["image"], ["out"])]
    initializers = []
    if argmax_over is not None:
        nodes = [helper.make_node("ReduceMean", ["image"], ["gray"], axes=[1], keepdims=1),
                 helper.make_node("Expand", ["gray", "to"], ["scores"]),
                 helper.make_node("ArgMax", ["scores"], ["out"], axis=1, keepdims=0)]
        initializers = [const("to", np.array(argmax_over, np.int64))]
    graph = helper.make_graph(nodes, path.stem, [tensor("image", FLOAT, list(image))],
                              [tensor("out", output_type, list(output))],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests")
    model.ir_version = 8
    onnx.save(model, str(path))  # no checker: the shapes do not have to agree, only to be declared
    return path


def anomaly_named(path: Path, *, with_mask: bool = False) -> Path:
    """An anomalib-style export ([N,1,H,W] gray): outputs named and ordered as anomalib's `to_onnx` names them
    (pred_score, then anomaly_map, then pred_mask): map = the pixels as the model sees them, score = its max,
    and with `with_mask` an own mask where the map is above 0.75 (not the pixel threshold, so its use shows)."""
    nodes = [helper.make_node("Identity", ["image"], ["anomaly_map"]),
             helper.make_node("ReduceMax", ["image"], ["pred_score"], axes=[1, 2, 3], keepdims=0)]
    outputs = [tensor("pred_score", FLOAT, ["N"]), tensor("anomaly_map", FLOAT, ["N", 1, "H", "W"])]
    initializers = []
    if with_mask:
        nodes.append(helper.make_node("Greater", ["image", "cut"], ["pred_mask"]))
        outputs.append(tensor("pred_mask", TensorProto.BOOL, ["N", 1, "H", "W"]))
        initializers.append(const("cut", np.float32(0.75)))
    return save(path, nodes, [tensor("image", FLOAT, ["N", 1, "H", "W"])], outputs, initializers)


def anomaly_by_shape(path: Path) -> Path:
    """As `anomaly_named` with names of its own: a [N,1] score ("score") first, then a [N,1,H,W] map ("heat")."""
    nodes = [helper.make_node("Identity", ["image"], ["heat"]),
             helper.make_node("ReduceMax", ["image"], ["score"], axes=[2, 3], keepdims=0)]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 1, "H", "W"])],
                [tensor("score", FLOAT, ["N", 1]), tensor("heat", FLOAT, ["N", 1, "H", "W"])])


def fixed_bright_spots(path: Path, size: int = 256) -> Path:
    """Fixed [N,1,size,size] gray (dynamic batch) → [N,1,size,size] logits 20·(x − 0.5): bright pixels are
    foreground. A tile-sized model whose objects vanish when a big image is squashed to its input."""
    nodes = [helper.make_node("Sub", ["image", "half"], ["centred"]),
             helper.make_node("Mul", ["centred", "gain"], ["logits"])]
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 1, size, size])], [tensor("logits", FLOAT, ["N", 1, size, size])],
                [const("half", np.float32(0.5)), const("gain", np.float32(20.0))])


def blurred_binary(path: Path, kernel: int = 9) -> Path:
    """Dynamic [N,1,H,W] gray → a kernel×kernel mean (zero padding at the tensor's border) → logits
    20·(mean − 0.5): a model with spatial context, so tiles without blending would show seams."""
    nodes = [helper.make_node("AveragePool", ["image"], ["mean"], kernel_shape=[kernel, kernel],
                              pads=[kernel // 2] * 4, count_include_pad=1),
             helper.make_node("Sub", ["mean", "half"], ["centred"]),
             helper.make_node("Mul", ["centred", "gain"], ["logits"])]
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 1, "H", "W"])], [tensor("logits", FLOAT, ["N", 1, "H", "W"])],
                [const("half", np.float32(0.5)), const("gain", np.float32(20.0))])


def fixed_rgb_classes(path: Path, size: int = 64) -> Path:
    """Fixed [N,3,size,size] (dynamic batch) → scores = RGB: a multi-class fixed model to tile."""
    nodes = [helper.make_node("Identity", ["image"], ["scores"])]
    return save(path, nodes,
                [tensor("image", FLOAT, ["N", 3, size, size])], [tensor("scores", FLOAT, ["N", 3, size, size])])


def wide_classifier(path: Path, classes: int = 1000) -> Path:
    """[N,3,32,32] → [N,classes] logits −10·|(classes − 1)·r − k|, r the mean red (0–1): the top class of a uniform
    image of red value v (0–255) is round((classes − 1)·v / 255)."""
    nodes = [helper.make_node("GlobalAveragePool", ["image"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
             helper.make_node("MatMul", ["flat", "red"], ["position"]),
             helper.make_node("Sub", ["position", "ks"], ["offset"]),
             helper.make_node("Abs", ["offset"], ["distance"]),
             helper.make_node("Mul", ["distance", "gain"], ["logits"])]
    red = np.zeros((3, 1), np.float32)
    red[0, 0] = classes - 1
    return save(path, nodes, [tensor("image", FLOAT, ["N", 3, 32, 32])], [tensor("logits", FLOAT, ["N", classes])],
                [const("red", red), const("ks", np.arange(classes, dtype=np.float32)),
                 const("gain", np.float32(-10.0))])


def constant_classifier(path: Path, scores: tuple[float, ...] = (0.625, 0.25, 0.125)) -> Path:
    """[N,3,32,32] → [N,K] = `scores` whatever the image (0·pixels + scores): with `output.activation: none` the
    probabilities are exactly these (pick binary fractions such as 0.625 to test limits at equality)."""
    nodes = [helper.make_node("GlobalAveragePool", ["image"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
             helper.make_node("MatMul", ["flat", "zeros"], ["nothing"]),
             helper.make_node("Add", ["nothing", "scores"], ["logits"])]
    k = len(scores)
    return save(path, nodes, [tensor("image", FLOAT, ["N", 3, 32, 32])], [tensor("logits", FLOAT, ["N", k])],
                [const("zeros", np.zeros((3, k), np.float32)), const("scores", np.asarray(scores, np.float32))])


def constant_map(path: Path, values: tuple[float, ...] = (0.0,), *, size: int | str = "H") -> Path:
    """[N,3,H,W] → [N,C,H,W] = `values[c]` at every pixel whatever the image (0·mean + value): a broken
    segmentation model when a value is NaN or ±inf (C = 1: binary logits). `size` an int: fixed (tile-sized)."""
    width = size if isinstance(size, int) else "W"
    k = len(values)
    nodes = [helper.make_node("ReduceMean", ["image"], ["gray"], axes=[1], keepdims=1),
             helper.make_node("Mul", ["gray", "zero"], ["nothing"]),
             helper.make_node("Add", ["nothing", "values"], ["scores"])]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 3, size, width])],
                [tensor("scores", FLOAT, ["N", k, size, width])],
                [const("zero", np.float32(0.0)), const("values", np.asarray(values, np.float32).reshape(1, k, 1, 1))])


def nan_where_dark(path: Path) -> Path:
    """[N,1,H,W] gray → logits sqrt(x − 0.25)·20 − 5: NaN where a pixel is darker than a quarter, finite elsewhere
    (a model that breaks on some pixels only)."""
    nodes = [helper.make_node("Sub", ["image", "quarter"], ["shifted"]),
             helper.make_node("Sqrt", ["shifted"], ["root"]),
             helper.make_node("Mul", ["root", "gain"], ["scaled"]),
             helper.make_node("Sub", ["scaled", "five"], ["logits"])]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 1, "H", "W"])],
                [tensor("logits", FLOAT, ["N", 1, "H", "W"])],
                [const("quarter", np.float32(0.25)), const("gain", np.float32(20.0)), const("five", np.float32(5.0))])


def nan_when_dark_classifier(path: Path) -> Path:
    """[N,3,32,32] → [N,3] logits 10·sqrt(mean colour − 0.25): finite for a bright image, NaN in a channel whose
    mean is below a quarter (a classifier that breaks on some inputs only)."""
    nodes = [helper.make_node("GlobalAveragePool", ["image"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
             helper.make_node("Sub", ["flat", "quarter"], ["shifted"]),
             helper.make_node("Sqrt", ["shifted"], ["root"]),
             helper.make_node("Mul", ["root", "ten"], ["logits"])]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 3, 32, 32])], [tensor("logits", FLOAT, ["N", 3])],
                [const("quarter", np.float32(0.25)), const("ten", np.float32(10.0))])


def constant_anomaly(path: Path, *, score: float = 0.0, level: float = 0.0) -> Path:
    """An anomalib-style export ([N,1,H,W] gray) whose map is `level` everywhere and whose score is `score`,
    whatever the image: NaN or ±inf in either is a broken model."""
    nodes = [helper.make_node("Mul", ["image", "zero"], ["nothing"]),
             helper.make_node("Add", ["nothing", "level"], ["anomaly_map"]),
             helper.make_node("ReduceMax", ["nothing"], ["flat"], axes=[1, 2, 3], keepdims=0),
             helper.make_node("Add", ["flat", "score"], ["pred_score"])]
    return save(path, nodes, [tensor("image", FLOAT, ["N", 1, "H", "W"])],
                [tensor("pred_score", FLOAT, ["N"]), tensor("anomaly_map", FLOAT, ["N", 1, "H", "W"])],
                [const("zero", np.float32(0.0)), const("level", np.float32(level)), const("score", np.float32(score))])
