"""A MONAI bundle's network as an ONNX graph: the config's `network_def` (one of MONAI's networks on an allowlist,
made with its literal arguments) with models/model.pt's weights, exported by PyTorch and checked against itself.

The one module of SegLens that imports PyTorch and MONAI (the `import` extra, pyproject.toml; the no-torch
contract names it as its one exception), and only inside `exported`: without them the import stops with the line
that names the extra. The weights are read by SegLens's own checkpoint reader (app.io.checkpoint: a restricted
pickle machine, tensors only, through the reading gate) — torch.load never sees the file — and the network is
first made on PyTorch's "meta" device, so a config asking for a huge network costs no memory before its parameters
are compared with the file's. The graph takes [N, C, *roi_size] (batch dynamic, the patch fixed); without an
Orientation(d) it takes the volume in SegLens's [k, j, i] order and transposes it into MONAI's (i, j, k) itself.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from app.errors import ModelError, need_extra
from app.guard.untrusted import read_untrusted, untrusted_problem
from app.io.checkpoint import CHECKPOINT_FILE_LIMIT, read_checkpoint, read_tensors
from app.io.checkpoint_pickle import TensorRef
from app.runs.imports.checks import unprefixed
from app.runs.imports.monai.records import NETWORKS, Bundle
from app.runs.imports.monai.translation import Translated

FEATURE = "seglens-cli import monai-bundle (PyTorch and MONAI build the bundle's network)"
OPSET = 17
_WRAPPERS = ("model", "network", "state_dict", "net")  # {"model": state dict}, as MONAI's CheckpointSaver writes
_TOLERANCE = 1e-4  # of the largest output: the graph against the network it was exported from
_PROTOBUF_LIMIT = 2 << 30  # one ONNX protobuf holds at most 2 GiB


def exported(bundle: Bundle, translated: Translated) -> onnx.ModelProto:
    """The bundle's network with its weights as ONNX: input `image` [N, C, D, H, W], output `logits`."""
    need_extra("torch", extra="import", feature=FEATURE)
    need_extra("monai", extra="import", feature=FEATURE)
    weights = state_dict(bundle)
    network = _network(bundle, weights)
    module = _in_native_order(network) if translated.native_order else network
    patch = tuple(reversed(translated.patch)) if translated.native_order else translated.patch
    data = _export(module, (1, translated.in_channels, *patch),
                   where=f"{bundle.shown(bundle.network.where)}: {bundle.network.name}")
    return onnx.load_from_string(data)


def state_dict(bundle: Bundle) -> dict[str, np.ndarray]:
    """models/model.pt's parameters (a plain state dict, or one under "model"), prefixes stripped; ModelError for
    anything else in the file."""
    path = bundle.weights
    problem = untrusted_problem(path, limit=CHECKPOINT_FILE_LIMIT, root=bundle.path)
    if problem is not None:
        raise ModelError(f"{path}: {problem}")
    checkpoint = read_checkpoint(path)
    content = checkpoint.content
    if isinstance(content, dict) and len(content) == 1 and next(iter(content)) in _WRAPPERS:
        content = next(iter(content.values()))
    items = content.items() if isinstance(content, dict) else ()
    refs = {key: value for key, value in items if isinstance(key, str) and isinstance(value, TensorRef)}
    if not refs or len(refs) != len(items):
        raise ModelError(f"{path}: not a state dict of named tensors (torch.save(network.state_dict()) or "
                         "{'model': state dict})")
    return unprefixed(read_tensors(checkpoint, refs))


def _network(bundle: Bundle, weights: Mapping[str, np.ndarray]) -> Any:
    """The allowlisted network made with the config's literal arguments, its parameters the file's."""
    import torch
    from monai.networks import nets

    component = bundle.network
    if component.name not in NETWORKS:  # the reader refused it already; kept here beside the getattr it guards
        raise ModelError(f"{bundle.shown(component.where)}: {component.name} is not an allowlisted network")
    factory = getattr(nets, component.name)
    where = f"{bundle.shown(component.where)}: {component.name}"
    try:
        with torch.device("meta"):
            shapes = {k: tuple(v.shape) for k, v in factory(**component.args).state_dict().items()}
    except Exception as exc:  # MONAI's own checks of its arguments: TypeError, ValueError, AssertionError, …
        raise ModelError(f"{where} cannot be made with these arguments ({type(exc).__name__}: {exc!s:.200})") \
            from None
    _same_parameters(bundle, where, shapes, weights)
    network = factory(**component.args)
    network.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()}, strict=True)
    return network.eval()


def _same_parameters(bundle: Bundle, where: str, shapes: Mapping[str, tuple[int, ...]],
                     weights: Mapping[str, np.ndarray]) -> None:
    file = bundle.weights.relative_to(bundle.path)
    missing = [key for key in shapes if key not in weights]
    extra = [key for key in weights if key not in shapes]
    if missing or extra:
        odd = f"lacks {missing[0]}" if missing else f"has {extra[0]}, which the network has not"
        raise ModelError(f"{where}: {file} does not fit it ({odd}; {len(missing)} missing, {len(extra)} "
                         "unexpected)")
    for key, shape in shapes.items():
        if tuple(weights[key].shape) != shape:
            raise ModelError(f"{where}: {file}'s {key} is {list(weights[key].shape)}, the network's {list(shape)}")


def _in_native_order(network: Any) -> Any:
    import torch

    class NativeOrder(torch.nn.Module):
        """The network on SegLens's [N, C, k, j, i] volume: transposed into MONAI's (i, j, k) and back."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, volume: torch.Tensor) -> torch.Tensor:
            result: torch.Tensor = self.inner(volume.permute(0, 1, 4, 3, 2)).permute(0, 1, 4, 3, 2)
            return result

    return NativeOrder(network).eval()


def _export(module: Any, shape: tuple[int, ...], *, where: str) -> bytes:
    """The module traced into ONNX at `shape` (batch dynamic), read back and run once beside the module: the graph
    gives the network's outputs on a random batch of two patches (within 1e-4 of the largest) or ModelError."""
    import onnxruntime as ort
    import torch

    with tempfile.TemporaryDirectory(prefix="seglens-import-") as scratch, warnings.catch_warnings(), \
            torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notices
        path = Path(scratch) / "network.onnx"
        torch.onnx.export(module, (torch.zeros(shape),), path, input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, opset_version=OPSET,
                          dynamo=False)
        data = read_untrusted(path, limit=_PROTOBUF_LIMIT, root=scratch)
        sample = np.random.default_rng(0).standard_normal((2, *shape[1:])).astype(np.float32)
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        ours = session.run(None, {session.get_inputs()[0].name: sample})[0]
        theirs = module(torch.from_numpy(sample)).numpy()
    scale = max(float(np.abs(theirs).max()), 1.0)
    error = float(np.abs(ours - theirs).max()) if ours.shape == theirs.shape else math.inf
    if not error <= _TOLERANCE * scale:
        raise ModelError(f"{where}: the exported graph differs from the network by {error:.3g} (outputs up to "
                         f"{scale:.3g}): not imported")
    return data
