"""`seglens-cli import nnunet FOLDER --out MODEL.onnx`: an nnU-Net v2 trained-model folder compiled into MODEL.onnx
(the plans' network with the fold's weights; several folds: one graph whose logits are their mean, as
nnUNetPredictor averages the folds' logits) and MODEL.yaml (the sidecar SegLens's 3D path reads), with where each
value came from and what is not yet exact in the sidecar's comments and the ONNX metadata `info` shows.

Everything is made in memory and checked (the graph by onnx's checker, the sidecar by SegLens's own reader) before
anything is written; then both files are written atomically, the model first: an error leaves neither new file."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from app.errors import ModelError, SegLensError, SidecarError
from app.guard.shared import atomic_write, remove_under
from app.io.checkpoint import network_weights
from app.runs.imports.nnunet.folder import read_folder
from app.runs.imports.nnunet.mapping import Mapped, mapped, sidecar_text
from app.runs.imports.nnunet.network import network_graph
from app.runs.imports.nnunet.records import Fold, NnunetFolder

_PREFIXES = ("module.", "_orig_mod.")  # DDP and torch.compile, stripped as nnUNetTrainer.load_checkpoint does
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
    graphs = [_fold_graph(read, fold) for fold in read.folds]
    model = graphs[0] if len(graphs) == 1 else folds_averaged(graphs)
    _provenance(model, read, values)
    text = sidecar_text(values, header=_header(read, out))
    _check_sidecar(text, out)
    data = _serialized(model, out)
    sidecar = out.with_suffix(".yaml")
    atomic_write(out, data)
    try:
        atomic_write(sidecar, text.encode("utf-8"))
    except SegLensError:
        remove_under(out.parent, out.name, folders=False)
        raise
    return Imported(out, sidecar, tuple(f.name for f in read.folds), read.checkpoint_name, values.gaps)


def _fold_graph(read: NnunetFolder, fold: Fold) -> onnx.ModelProto:
    config = read.configuration
    return network_graph(config.architecture, _unprefixed(network_weights(fold.checkpoint)),
                         in_channels=len(read.channel_names), num_classes=len(read.labels.names), dims=3,
                         plans=str(read.path / "plans.json"), checkpoint=str(fold.path))


def _unprefixed(weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    for key, value in weights.items():
        for prefix in _PREFIXES:
            key = key.removeprefix(prefix)
        found[key] = value
    return found


def folds_averaged(models: Sequence[onnx.ModelProto]) -> onnx.ModelProto:
    """One graph running each fold's network on the same input, its output the mean of their logits (each fold's
    nodes and initializers under `fold<i>/`)."""
    first = models[0]
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    logits = []
    output_name = first.graph.output[0].name
    for index, model in enumerate(models):
        prefix = f"fold{index}/"
        rename = {init.name: prefix + init.name for init in model.graph.initializer}
        rename.update({out: prefix + out for node in model.graph.node for out in node.output})
        for init in model.graph.initializer:
            copy = onnx.TensorProto()
            copy.CopyFrom(init)
            copy.name = rename[init.name]
            initializers.append(copy)
        for node in model.graph.node:
            copy_node = onnx.NodeProto()
            copy_node.CopyFrom(node)
            copy_node.name = prefix + node.name if node.name else ""
            copy_node.input[:] = [rename.get(name, name) for name in node.input]
            copy_node.output[:] = [rename[name] for name in node.output]
            nodes.append(copy_node)
        logits.append(rename[output_name])
    nodes.append(helper.make_node("Mean", logits, [output_name], name="folds_mean"))
    graph = helper.make_graph(nodes, first.graph.name, [first.graph.input[0]], [first.graph.output[0]], initializers,
                              doc_string=first.graph.doc_string)
    model = helper.make_model(graph, opset_imports=list(first.opset_import), producer_name=first.producer_name,
                              doc_string=f"{first.doc_string}; the mean of {len(models)} folds' logits")
    model.ir_version = first.ir_version
    helper.set_model_props(model, {entry.key: entry.value for entry in first.metadata_props})
    onnx.checker.check_model(model)
    return model


def _provenance(model: onnx.ModelProto, read: NnunetFolder, values: Mapped) -> None:
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
    })
    del model.metadata_props[:]
    helper.set_model_props(model, props)


def _header(read: NnunetFolder, out: Path) -> list[str]:
    folds = ", ".join(fold.name for fold in read.folds)
    ensemble = " (their logits averaged in the graph)" if len(read.folds) > 1 else ""
    return [f"Sidecar of {out.name}, written by seglens-cli import nnunet",
            f"imported from {read.path.resolve()}",
            f"fold(s) {folds}{ensemble}, {read.checkpoint_name}; configuration {read.configuration.name}, "
            f"trainer {read.trainer}, plans {read.plans_name}",
            "each value's source is the comment after it"]


def _check_sidecar(text: str, out: Path) -> None:
    """SegLens's own sidecar reader on the text, before anything is written (a refusal names the model's file)."""
    from app.inference.model.sidecar import load_sidecar

    with tempfile.TemporaryDirectory(prefix="seglens-import-") as scratch:
        path = Path(scratch) / out.with_suffix(".yaml").name
        atomic_write(path, text.encode("utf-8"), private=True)
        try:
            load_sidecar(path)
        except SidecarError as exc:
            raise ModelError(str(exc).replace(str(path), str(out.with_suffix(".yaml")))) from None


def _serialized(model: onnx.ModelProto, out: Path) -> bytes:
    if model.ByteSize() >= _PROTOBUF_LIMIT:
        raise ModelError(f"--out {out}: the graph would be over 2 GiB (ONNX's limit for one file); import fewer "
                         "folds at once (--folds 0)")
    data: bytes = model.SerializeToString()
    return data
