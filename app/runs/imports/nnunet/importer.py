"""`seglens-cli import nnunet FOLDER --out MODEL.onnx`: an nnU-Net v2 trained-model folder compiled into MODEL.onnx
(the plans' network with the fold's weights; several folds: one graph whose logits are their mean, as
nnUNetPredictor averages the folds' logits) and MODEL.yaml (the sidecar SegLens's 3D path reads), with where each
value came from and what is not yet exact in the sidecar's comments and the ONNX metadata `info` shows.

Everything is made in memory and checked (the graph by onnx's checker, the sidecar by SegLens's own reader) before
anything is written; then both files are written atomically, the model first: an error leaves neither new file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from app.errors import ModelError, SegLensError
from app.guard.shared import atomic_write, remove_under
from app.io.channels import METADATA_KEY as CHANNEL_NAMES
from app.io.checkpoint import network_weights
from app.runs.imports.checks import check_sidecar, unprefixed
from app.runs.imports.nnunet.folder import read_folder
from app.runs.imports.nnunet.mapping import Mapped, mapped, sidecar_text
from app.runs.imports.nnunet.network import network_graph
from app.runs.imports.nnunet.records import Fold, NnunetFolder

_PROTOBUF_LIMIT = 2 << 30  # one ONNX protobuf holds at most 2 GiB


@dataclass(frozen=True)
class Imported:
    """What an import wrote and what it could not yet make exact."""

    model: Path
    sidecar: Path
    folds: tuple[str, ...]
    checkpoint: str
    gaps: tuple[str, ...]


def import_nnunet(folder: Path, out: Path, *, folds: Sequence[str] | None = None,
                  checkpoint: str = "final") -> Imported:
    """Compile `folder` into `out` (.onnx) and its sidecar beside it. SegLensError in one line, nothing written,
    for a malformed folder or a model SegLens cannot express."""
    if out.suffix.lower() != ".onnx":
        raise ModelError(f"--out {out}: the model's file name must end in .onnx (its sidecar is written beside it)")
    read = read_folder(folder, folds=folds, checkpoint=checkpoint)
    values = mapped(read)
    model = folder_model(read)
    if read.transpose_forward != (0, 1, 2):
        model = transposed(model, read.transpose_forward, read.transpose_backward)
    provenance(model, read, values)
    sidecar = written(model, sidecar_text(values, header=_header(read, out)), out)
    return Imported(out, sidecar, tuple(f.name for f in read.folds), read.checkpoint_name, values.gaps)


def folder_model(read: NnunetFolder) -> onnx.ModelProto:
    """The folder's network with its chosen folds' weights (several: one graph averaging their logits), in
    nnU-Net's transposed axis order."""
    graphs = [_fold_graph(read, fold) for fold in read.folds]
    return graphs[0] if len(graphs) == 1 else folds_averaged(graphs)


def written(model: onnx.ModelProto, text: str, out: Path) -> Path:
    """`model` written to `out` and the sidecar `text` beside it, both checked first (the sidecar by SegLens's own
    reader); the model removed again when the sidecar cannot be written. The sidecar's path."""
    check_sidecar(text, out)
    data = _serialized(model, out)
    sidecar = out.with_suffix(".yaml")
    atomic_write(out, data)
    try:
        atomic_write(sidecar, text.encode("utf-8"))
    except SegLensError:
        remove_under(out.parent, out.name, folders=False)
        raise
    return sidecar


def _fold_graph(read: NnunetFolder, fold: Fold) -> onnx.ModelProto:
    config = read.configuration
    dims: Literal[2, 3] = 2 if config.dims == 2 else 3
    model = network_graph(config.architecture, unprefixed(network_weights(fold.checkpoint)),
                          in_channels=len(read.channel_names), num_classes=len(read.labels.names), dims=dims,
                          plans=str(read.path / "plans.json"), checkpoint=str(fold.path))
    return slice_by_slice(model) if dims == 2 else model


def slice_by_slice(model: onnx.ModelProto) -> onnx.ModelProto:
    """A 2D network ([N, C, H, W] → [N, K, H, W]) as a 3D model ([N, C, D, H, W] → [N, K, D, H, W]) running it on
    every slice of D, as nnU-Net's 2D configurations predict a volume: the slices become the batch."""
    graph = model.graph
    source, result = graph.input[0].name, graph.output[0].name
    channels = graph.input[0].type.tensor_type.shape.dim[1].dim_value
    classes = graph.output[0].type.tensor_type.shape.dim[1].dim_value
    for node in graph.node:
        node.input[:] = ["slices" if name == source else name for name in node.input]
        node.output[:] = ["slice_logits" if name == result else name for name in node.output]
    graph.initializer.extend(numpy_helper.from_array(np.array(values, np.int64), name) for name, values in (
        ("slices.first", [-1, channels]), ("slices.classes", [classes])))
    nd = [helper.make_node("Transpose", [source], ["volume.dchw"], perm=[0, 2, 1, 3, 4]),
          helper.make_node("Shape", ["volume.dchw"], ["volume.nd"], start=0, end=2),
          helper.make_node("Shape", ["volume.dchw"], ["volume.hw"], start=3, end=5),
          helper.make_node("Concat", ["slices.first", "volume.hw"], ["slices.shape"], axis=0),
          helper.make_node("Reshape", ["volume.dchw", "slices.shape"], ["slices"])]
    back = [helper.make_node("Concat", ["volume.nd", "slices.classes", "volume.hw"], ["logits.shape"], axis=0),
            helper.make_node("Reshape", ["slice_logits", "logits.shape"], ["logits.ndkhw"]),
            helper.make_node("Transpose", ["logits.ndkhw"], [result], perm=[0, 2, 1, 3, 4])]
    nodes = [*nd, *graph.node, *back]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.input[0].CopyFrom(helper.make_tensor_value_info(source, TensorProto.FLOAT,
                                                          ["batch", channels, "depth", "height", "width"]))
    graph.output[0].CopyFrom(helper.make_tensor_value_info(result, TensorProto.FLOAT,
                                                           ["batch", classes, "depth", "height", "width"]))
    props = {entry.key: entry.value for entry in model.metadata_props}
    props["seglens.spatial_multiple"] = "1," + props.get("seglens.spatial_multiple", "1,1")
    del model.metadata_props[:]
    helper.set_model_props(model, props)
    onnx.checker.check_model(model)
    return model


def folds_averaged(models: Sequence[onnx.ModelProto]) -> onnx.ModelProto:
    """One graph running each fold's network on the same input, its output the mean of their logits (each fold's
    nodes and initializers under `fold<i>/`)."""
    first = models[0]
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    logits = []
    for index, model in enumerate(models):
        fold_nodes, fold_initializers, _, fold_logits = under(model, f"fold{index}/")
        nodes += fold_nodes
        initializers += fold_initializers
        logits.append(fold_logits)
    nodes.append(helper.make_node("Mean", logits, [first.graph.output[0].name], name="folds_mean"))
    return assembled(first, nodes, initializers, first.graph.input[0], first.graph.output[0],
                     doc=f"{first.doc_string}; the mean of {len(models)} folds' logits")


def under(model: onnx.ModelProto, prefix: str, *, own_input: bool = False,
          ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], str, str]:
    """Copies of `model`'s nodes and initializers with their names under `prefix` (the graph's input keeps its
    name unless `own_input`), and the names its input and output have among them."""
    source, result = model.graph.input[0].name, model.graph.output[0].name
    rename = {init.name: prefix + init.name for init in model.graph.initializer}
    rename.update({out: prefix + out for node in model.graph.node for out in node.output})
    if own_input:
        rename[source] = prefix + source
    initializers = []
    for init in model.graph.initializer:
        copy = onnx.TensorProto()
        copy.CopyFrom(init)
        copy.name = rename[init.name]
        initializers.append(copy)
    nodes = []
    for node in model.graph.node:
        copy_node = onnx.NodeProto()
        copy_node.CopyFrom(node)
        copy_node.name = prefix + node.name if node.name else ""
        copy_node.input[:] = [rename.get(name, name) for name in node.input]
        copy_node.output[:] = [rename[name] for name in node.output]
        nodes.append(copy_node)
    return nodes, initializers, rename.get(source, source), rename[result]


def assembled(first: onnx.ModelProto, nodes: Sequence[onnx.NodeProto], initializers: Sequence[onnx.TensorProto],
              source: onnx.ValueInfoProto, result: onnx.ValueInfoProto, *, doc: str) -> onnx.ModelProto:
    """One checked model of `nodes` from `source` to `result`, with `first`'s opsets, IR version and metadata."""
    graph = helper.make_graph(list(nodes), first.graph.name, [source], [result], list(initializers),
                              doc_string=first.graph.doc_string)
    model = helper.make_model(graph, opset_imports=list(first.opset_import), producer_name=first.producer_name,
                              doc_string=doc)
    model.ir_version = first.ir_version
    helper.set_model_props(model, {entry.key: entry.value for entry in first.metadata_props})
    onnx.checker.check_model(model)
    return model


def transposed(model: onnx.ModelProto, forward: Sequence[int], backward: Sequence[int]) -> onnx.ModelProto:
    """`model` taking the volume in its own axis order: transpose_forward applied to the input and
    transpose_backward to the logits inside the graph, as nnU-Net's predictor does around the network."""
    graph = model.graph
    inner_in, inner_out = "input.transposed", "logits.transposed"
    source, result = graph.input[0].name, graph.output[0].name
    for node in graph.node:
        node.input[:] = [inner_in if name == source else name for name in node.input]
        node.output[:] = [inner_out if name == result else name for name in node.output]
    graph.node.insert(0, helper.make_node("Transpose", [source], [inner_in], name="transpose_forward",
                                          perm=[0, 1, *(2 + axis for axis in forward)]))
    graph.node.append(helper.make_node("Transpose", [inner_out], [result], name="transpose_backward",
                                       perm=[0, 1, *(2 + axis for axis in backward)]))
    props = {entry.key: entry.value for entry in model.metadata_props}
    multiple = props.get("seglens.spatial_multiple", "").split(",")
    if len(multiple) == len(backward):
        props["seglens.spatial_multiple"] = ",".join(multiple[axis] for axis in backward)
        del model.metadata_props[:]
        helper.set_model_props(model, props)
    onnx.checker.check_model(model)
    return model


def provenance(model: onnx.ModelProto, read: NnunetFolder, values: Mapped) -> None:
    props = {entry.key: entry.value for entry in model.metadata_props}
    trainers = sorted({fold.trainer_name for fold in read.folds if fold.trainer_name})
    props.update({
        "seglens.imported_from": str(read.path.resolve()),
        "seglens.import.folds": ",".join(fold.name for fold in read.folds),
        "seglens.import.checkpoint": read.checkpoint_name,
        "seglens.import.configuration": read.configuration.name,
        "seglens.import.trainer": ", ".join(trainers) or read.trainer,
        "seglens.import.sources": json.dumps(values.sources, ensure_ascii=False),
        "seglens.import.not_exact": json.dumps(list(values.gaps), ensure_ascii=False),
        CHANNEL_NAMES: json.dumps(list(read.channel_names), ensure_ascii=False),  # dataset.json's, in its order
    })
    del model.metadata_props[:]
    helper.set_model_props(model, props)


def _header(read: NnunetFolder, out: Path) -> list[str]:
    folds = ", ".join(fold.name for fold in read.folds)
    ensemble = " (their logits averaged in the graph)" if len(read.folds) > 1 else ""
    return [f"Sidecar of {out.name}, written by seglens-cli import nnunet",
            f"imported from {read.path.resolve()}",
            f"{'folds' if len(read.folds) > 1 else 'fold'} {folds}{ensemble}, {read.checkpoint_name}; "
            f"configuration {read.configuration.name}, "
            f"trainer {read.trainer}, plans {read.plans_name}",
            "each value's source is the comment after it"]


def _serialized(model: onnx.ModelProto, out: Path) -> bytes:
    if model.ByteSize() >= _PROTOBUF_LIMIT:
        raise ModelError(f"--out {out}: the graph would be over 2 GiB (ONNX's limit for one file); import fewer "
                         "folds at once (--folds 0)")
    data: bytes = model.SerializeToString()
    return data
