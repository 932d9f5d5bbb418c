"""A UNet-shaped ONNX model built with onnx.helper (random weights), for benchmarks without PyTorch.

Three 2× down-samplings (so H and W must be multiples of 8: the pipeline pads), skip connections,
bilinear up-sampling, `classes` output channels of logits at full resolution.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build_unet(path: Path, *, base: int = 16, classes: int = 4, in_channels: int = 3, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = iter(range(10_000))

    def conv(x: str, cin: int, cout: int, k: int = 3, relu: bool = True) -> str:
        n = next(counter)
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / (cin * k * k))).astype(np.float32)
        bias = np.zeros(cout, np.float32)
        inits.extend([numpy_helper.from_array(w, f"w{n}"), numpy_helper.from_array(bias, f"b{n}")])
        nodes.append(helper.make_node("Conv", [x, f"w{n}", f"b{n}"], [f"c{n}"], pads=[k // 2] * 4))
        if not relu:
            return f"c{n}"
        nodes.append(helper.make_node("Relu", [f"c{n}"], [f"r{n}"]))
        return f"r{n}"

    def block(x: str, cin: int, cout: int) -> str:
        return conv(conv(x, cin, cout), cout, cout)

    def down(x: str) -> str:
        n = next(counter)
        nodes.append(helper.make_node("MaxPool", [x], [f"p{n}"], kernel_shape=[2, 2], strides=[2, 2]))
        return f"p{n}"

    def up_concat(x: str, skip: str) -> str:
        n = next(counter)
        nodes.append(helper.make_node("Resize", [x, "", "scales2"], [f"u{n}"], mode="linear"))
        nodes.append(helper.make_node("Concat", [f"u{n}", skip], [f"k{n}"], axis=1))
        return f"k{n}"

    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales2"))
    widths = [base, base * 2, base * 4, base * 8]
    e1 = block("image", in_channels, widths[0])
    e2 = block(down(e1), widths[0], widths[1])
    e3 = block(down(e2), widths[1], widths[2])
    bottom = block(down(e3), widths[2], widths[3])
    d3 = block(up_concat(bottom, e3), widths[3] + widths[2], widths[2])
    d2 = block(up_concat(d3, e2), widths[2] + widths[1], widths[1])
    d1 = block(up_concat(d2, e1), widths[1] + widths[0], widths[0])
    logits = conv(d1, widths[0], classes, k=1, relu=False)
    nodes.append(helper.make_node("Identity", [logits], ["logits"]))
    graph = helper.make_graph(
        nodes, "unet", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", in_channels, "H", "W"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes, "H", "W"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="seglens-bench")
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
