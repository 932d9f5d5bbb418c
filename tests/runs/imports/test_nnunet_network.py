"""The ONNX graph SegLens emits from an nnU-Net v2 plans' architecture and a state dict computes what the real module
does: dynamic_network_architectures' PlainConvUNet and ResidualEncoderUNet (2D and 3D, built as nnU-Net's
get_network_from_plans builds them, random weights, eval mode, deep supervision off) against onnxruntime on inputs
of several sizes; and a plans value or a state dict it cannot express exactly is one line.

PyTorch and dynamic-network-architectures are test-only: `.ci/run` installs them; without them the parity tests
skip locally and fail in CI.
"""

from __future__ import annotations

import pydoc
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from volume3d_models import require

from app.errors import ModelError
from app.runs.imports.nnunet.network import network_graph

INSTALL = "pip install --no-deps dynamic-network-architectures==0.4.4 beside torch==2.13.0 (as .ci/run does)"
UNET = "dynamic_network_architectures.architectures.unet."
IMPORTS = ["conv_op", "norm_op", "dropout_op", "nonlin"]  # nnU-Net's _kw_requires_import


def architecture(name: str, dims: int, **changes: Any) -> dict[str, Any]:
    """A small plans `architecture` as nnU-Net's planners write it (JSON values: class names as strings)."""
    stages = changes.pop("n_stages", 4)
    strides = {2: [[1, 1], [2, 2], [2, 2], [2, 1]], 3: [[1, 1, 1], [1, 2, 2], [2, 2, 2], [2, 2, 1]]}[dims]
    kernels = {2: [[3, 3]] * 3 + [[3, 1]], 3: [[1, 3, 3]] + [[3, 3, 3]] * 3}[dims]
    kwargs: dict[str, Any] = {
        "n_stages": stages, "features_per_stage": [4, 8, 12, 16][:stages],
        "conv_op": f"torch.nn.modules.conv.Conv{dims}d",
        "kernel_sizes": kernels[:stages], "strides": strides[:stages],
        "n_conv_per_stage" if name == "PlainConvUNet" else "n_blocks_per_stage": [2, 2, 1, 2][:stages],
        "n_conv_per_stage_decoder": [1, 2, 1][:stages - 1], "conv_bias": True,
        "norm_op": f"torch.nn.modules.instancenorm.InstanceNorm{dims}d",
        "norm_op_kwargs": {"eps": 1e-5, "affine": True},
        "dropout_op": None, "dropout_op_kwargs": None,
        "nonlin": "torch.nn.LeakyReLU", "nonlin_kwargs": {"inplace": True},
    }
    kwargs.update(changes)
    return {"network_class_name": UNET + name, "arch_kwargs": kwargs, "_kw_requires_import": IMPORTS}


def torch_network(arch: dict[str, Any], *, in_channels: int, num_classes: int) -> Any:
    """The module nnU-Net builds from the same plans (nnunetv2.utilities.get_network_from_plans), with random
    weights (norm scales and shifts too, which start at 1 and 0), in eval mode without deep supervision."""
    torch = require("torch", INSTALL)
    kwargs = dict(arch["arch_kwargs"])
    for key in [*arch["_kw_requires_import"], "block"]:
        if kwargs.get(key) is not None:
            kwargs[key] = pydoc.locate(kwargs[key])
    network_class = pydoc.locate(arch["network_class_name"])
    assert network_class is not None
    kwargs["deep_supervision"] = False
    network = network_class(input_channels=in_channels, num_classes=num_classes, **kwargs)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.copy_(torch.randn_like(parameter) * 0.3)
    return network.eval()


def state_dict(network: Any) -> dict[str, np.ndarray]:
    return {key: value.detach().cpu().numpy() for key, value in network.state_dict().items()}


def relative_error(ours: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(ours - reference).max() / np.abs(reference).max())


def compare(arch: dict[str, Any], dims: int, sizes: list[tuple[int, ...]], *, in_channels: int = 2,
            num_classes: int = 3) -> float:
    """The largest relative difference between the ONNX graph (onnxruntime) and the module over `sizes`."""
    require("dynamic_network_architectures", INSTALL)
    torch = require("torch", INSTALL)
    network = torch_network(arch, in_channels=in_channels, num_classes=num_classes)
    model = network_graph(arch, state_dict(network), in_channels=in_channels, num_classes=num_classes, dims=dims)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    worst = 0.0
    rng = np.random.default_rng(len(sizes))
    for size in sizes:
        image = rng.normal(size=(2, in_channels, *size)).astype(np.float32)
        with torch.no_grad():
            reference = network(torch.from_numpy(image)).numpy()
        (ours,) = session.run(None, {"input": image})
        assert ours.shape == reference.shape == (2, num_classes, *size)
        worst = max(worst, relative_error(ours, reference))
    return worst


CASES_2D = [
    pytest.param("PlainConvUNet", {}, id="plain"),
    pytest.param("PlainConvUNet", {"nonlin_first": True, "dropout_op": "torch.nn.Dropout2d",
                                   "dropout_op_kwargs": {"p": 0.2}, "nonlin_kwargs": {"negative_slope": 0.2}},
                 id="plain-nonlin-first-dropout"),
    pytest.param("PlainConvUNet", {"conv_bias": False, "norm_op_kwargs": {"eps": 1e-3}, "nonlin": "torch.nn.ReLU",
                                   "nonlin_kwargs": None}, id="plain-no-affine-relu"),
    pytest.param("ResidualEncoderUNet", {}, id="resenc"),
    pytest.param("ResidualEncoderUNet", {"dropout_op": "torch.nn.Dropout2d", "dropout_op_kwargs": {"p": 0.5},
                                         "stem_channels": 6, "n_conv_per_stage_decoder": 1}, id="resenc-stem-dropout"),
    pytest.param("ResidualEncoderUNet", {
        "block": "dynamic_network_architectures.building_blocks.residual.BottleneckD",
        "bottleneck_channels": [2, 4, 6, 8]}, id="resenc-bottleneck"),
]


@pytest.mark.parametrize(("name", "changes"), CASES_2D)
def test_2d_graph_equals_the_module(name, changes):
    arch = architecture(name, 2, **changes)
    assert compare(arch, 2, [(16, 8), (16, 12), (24, 36)]) < 1e-4  # multiples of (8, 4)


@pytest.mark.parametrize("name", ["PlainConvUNet", "ResidualEncoderUNet"])
def test_3d_graph_equals_the_module(name):
    arch = architecture(name, 3)
    assert compare(arch, 3, [(8, 8, 8), (4, 16, 12), (12, 16, 8)], num_classes=2) < 1e-4  # multiples of (4, 8, 4)


def test_3d_with_three_stages_and_one_input_channel():
    arch = architecture("ResidualEncoderUNet", 3, n_stages=3, n_blocks_per_stage=[1, 3, 2])
    assert compare(arch, 3, [(4, 8, 4), (6, 12, 8)], in_channels=1, num_classes=4) < 1e-4


def test_spatial_axes_are_dynamic_and_the_multiple_is_said():
    require("dynamic_network_architectures", INSTALL)
    arch = architecture("PlainConvUNet", 3)
    network = torch_network(arch, in_channels=1, num_classes=2)
    model = network_graph(arch, state_dict(network), in_channels=1, num_classes=2, dims=3)
    shapes = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in (*model.graph.input, *model.graph.output)]
    assert shapes == [["batch", 1, "depth", "height", "width"], ["batch", 2, "depth", "height", "width"]]
    assert {p.key: p.value for p in model.metadata_props}["seglens.spatial_multiple"] == "4,8,4"
    assert "multiple of (4, 8, 4)" in model.graph.doc_string
    assert not any(i.name.startswith("decoder.seg_layers.0") for i in model.graph.initializer)  # a dropped head


def test_the_names_torch_gives_a_module_twice_may_be_absent():
    """`all_modules.i` and `decoder.encoder.` repeat tensors a state dict has under their first names."""
    require("dynamic_network_architectures", INSTALL)
    arch = architecture("ResidualEncoderUNet", 2)
    weights = state_dict(torch_network(arch, in_channels=2, num_classes=3))
    canonical = {k: v for k, v in weights.items() if ".all_modules." not in k and not k.startswith("decoder.encoder.")}
    assert len(canonical) < len(weights)
    full = network_graph(arch, weights, in_channels=2, num_classes=3, dims=2)
    assert network_graph(arch, canonical, in_channels=2, num_classes=3, dims=2) == full


@pytest.fixture(scope="module")
def plain_weights() -> dict[str, np.ndarray]:
    require("dynamic_network_architectures", INSTALL)
    return state_dict(torch_network(architecture("PlainConvUNet", 2), in_channels=2, num_classes=3))


@pytest.mark.parametrize(("change", "message"), [
    (lambda w: w.pop("decoder.seg_layers.0.bias"),
     "checkpoint: the weights lack 'decoder.seg_layers.0.bias' that the plans' PlainConvUNet has"),
    (lambda w: w.update({"decoder.extra.weight": np.zeros(3)}),
     "checkpoint: 'decoder.extra.weight' is not a weight of the plans' PlainConvUNet"),
    (lambda w: w.update({"encoder.stages.1.0.convs.0.conv.weight": np.zeros((8, 4, 3, 2))}),
     "checkpoint: 'encoder.stages.1.0.convs.0.conv.weight' has shape (8, 4, 3, 2), the plans' PlainConvUNet needs "
     "(8, 4, 3, 3)"),
    (lambda w: w.update({"decoder.encoder.stages.0.0.convs.0.all_modules.1.bias": np.zeros(5)}),
     "checkpoint: 'decoder.encoder.stages.0.0.convs.0.all_modules.1.bias' has shape (5,), the plans' PlainConvUNet "
     "needs (4,)"),
])
def test_weights_that_are_not_the_modules_are_one_line(plain_weights, change, message):
    weights = dict(plain_weights)
    change(weights)
    with pytest.raises(ModelError) as caught:
        network_graph(architecture("PlainConvUNet", 2), weights, in_channels=2, num_classes=3, dims=2)
    assert str(caught.value) == message


def test_weights_for_other_channels_are_one_line(plain_weights):
    with pytest.raises(ModelError, match=r"^checkpoint: 'encoder.stages.0.0.convs.0.conv.weight' has shape "
                                         r"\(4, 2, 3, 3\), the plans' PlainConvUNet needs \(4, 1, 3, 3\)$"):
        network_graph(architecture("PlainConvUNet", 2), plain_weights, in_channels=1, num_classes=3, dims=2)


def plans_error(arch: dict[str, Any], dims: int = 2) -> str:
    with pytest.raises(ModelError) as caught:
        network_graph(arch, {}, in_channels=1, num_classes=2, dims=dims, plans="Dataset001/plans.json")
    assert "\n" not in str(caught.value)
    return str(caught.value)


def kwargs(**changes: Any) -> dict[str, Any]:
    return architecture("PlainConvUNet", 2, **changes)


@pytest.mark.parametrize(("arch", "message"), [
    ({**kwargs(), "network_class_name": "x.y.MyNet"},
     "Dataset001/plans.json: architecture 'x.y.MyNet' is not one SegLens imports (PlainConvUNet, ResidualEncoderUNet)"),
    ({**kwargs(), "network_class_name": "mypackage.PlainConvUNet"},
     "Dataset001/plans.json: architecture 'mypackage.PlainConvUNet' is not one SegLens imports (PlainConvUNet, "
     "ResidualEncoderUNet)"),
    (kwargs(squeeze_excitation=True),
     "Dataset001/plans.json: PlainConvUNet's argument 'squeeze_excitation' is not one SegLens can express"),
    (kwargs(norm_op="torch.nn.BatchNorm2d"),
     "Dataset001/plans.json: norm_op 'torch.nn.BatchNorm2d' is not one SegLens imports (InstanceNorm2d)"),
    (kwargs(norm_op_kwargs={"eps": 1e-5, "affine": True, "track_running_stats": True}),
     "Dataset001/plans.json: norm_op_kwargs track_running_stats True is not one SegLens imports"),
    (kwargs(nonlin="torch.nn.GELU"),
     "Dataset001/plans.json: nonlin 'torch.nn.GELU' is not one SegLens imports (LeakyReLU, ReLU)"),
    (kwargs(nonlin_kwargs={"negative_slope": 0.1, "foo": 1}),
     "Dataset001/plans.json: nonlin_kwargs 'foo' is not one SegLens can express"),
    (kwargs(conv_op="torch.nn.Conv3d"),
     "Dataset001/plans.json: conv_op 'torch.nn.Conv3d' is 3D, not the 2D this import asked for"),
    (kwargs(strides=[[1, 1], [2, 2]]),
     "Dataset001/plans.json: strides [[1, 1], [2, 2]] does not give one value to each of the 4 stages"),
    (kwargs(kernel_sizes=[[3, 3, 3]] * 4),
     "Dataset001/plans.json: kernel_sizes entry [3, 3, 3] does not give one value to each of the 2 spatial axes"),
    (kwargs(dropout_op="torch.nn.AlphaDropout"),
     "Dataset001/plans.json: dropout_op 'torch.nn.AlphaDropout' is not one SegLens imports (Dropout, Dropout2d, "
     "Dropout3d)"),
    ({**kwargs(), "arch_kwargs": None},
     "Dataset001/plans.json: the architecture's arch_kwargs are None, not a mapping"),
])
def test_plans_it_cannot_express_are_one_line(arch, message):
    assert plans_error(arch) == message


def test_residual_only_arguments_are_refused_for_the_plain_unet_and_back():
    assert "PlainConvUNet's argument 'n_blocks_per_stage'" in plans_error(kwargs(n_blocks_per_stage=[1, 1, 1, 1]))
    resenc = architecture("ResidualEncoderUNet", 3, nonlin_first=True)
    assert "ResidualEncoderUNet's argument 'nonlin_first'" in plans_error(resenc, dims=3)
