"""Several nnU-Net part-models imported as one model, as TotalSegmentator's CLI runs a multi-part task (its `total`:
five part-models whose label maps it merges): `seglens-cli import nnunet ROOT --out MODEL.onnx`, ROOT holding the
task's `DatasetNNN_*/<Trainer>__<Plans>__<configuration>/` folders (or those folders given one by one).

One graph holds every part's network (each part's folds averaged, as a single folder's import builds them): its
input has one channel per part channel — the same CT, each normalised as that part was trained (the sidecar's
`nnunet.channels`, `source: 0` for each) — and its output is the parts' logits side by side, which
`nnunet.parts` splits again: each part's argmax, its labels looked up in the task's merged label map, later parts
painted over earlier ones. The parts must be predicted alike (patch, spacing, axis order, resampling, mirroring);
one that is not is refused in one line naming it and the value. A single-model TotalSegmentator task (`total`'s
fast 3 mm model) imports as any folder does, with its task's tile step and name."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from app.errors import ModelError
from app.runs.imports.nnunet.folder import read_folder
from app.runs.imports.nnunet.importer import (
    Imported,
    assembled,
    folder_model,
    import_nnunet,
    provenance,
    transposed,
    under,
    written,
)
from app.runs.imports.nnunet.mapping import Mapped, mapped, sidecar_text, with_parts
from app.runs.imports.nnunet.records import NnunetFolder, Resampling
from app.runs.imports.nnunet.totalseg import TASKS, Merged, Task, dataset_id, merged, task_of

_SHOWN_FOLDERS = 3


@dataclass(frozen=True)
class Found:
    """A dataset folder given or found (`DatasetNNN_*`), or a trained-model folder given: its dataset id (None
    when its name has none)."""

    path: Path
    dataset: int | None
    trained: bool  # `path` is the trained-model folder itself


def import_folders(paths: Sequence[Path], out: Path, *, folds: Sequence[str] | None = None,
                   checkpoint: str = "final") -> Imported:
    """`seglens-cli import nnunet PATH…`: one trained-model folder (or a dataset folder holding one) imported as
    it is; the part-models of one TotalSegmentator task (ROOT holding them, or the folders) imported as one merged
    model. ModelError in one line, nothing written, for anything else."""
    found = [item for path in paths for item in _found(path)]
    task, chosen = _task(found, paths)
    if task is None:
        return import_nnunet(_trained(chosen[0]), out, folds=folds, checkpoint=checkpoint)
    if out.suffix.lower() != ".onnx":
        raise ModelError(f"--out {out}: the model's file name must end in .onnx (its sidecar is written beside it)")
    reads = [read_folder(_trained(item), folds=folds, checkpoint=checkpoint) for item in chosen]
    return _import_task(task, reads, out)


# --- which folders ------------------------------------------------------------------------------------------------

def _found(path: Path) -> list[Found]:
    if not path.is_dir():
        raise ModelError(f"{path}: not a folder (an nnU-Net trained-model folder <Trainer>__<Plans>__<configuration>, "
                         "a DatasetNNN_* folder holding one, or a folder of them)")
    if _is_trained(path):
        return [Found(path, dataset_id(path.absolute().parent.name), trained=True)]
    if dataset_id(path.name) is not None:
        return [Found(path, dataset_id(path.name), trained=False)]
    datasets = sorted(child for child in path.iterdir() if child.is_dir() and dataset_id(child.name) is not None)
    if not datasets:
        raise ModelError(f"{path}: neither an nnU-Net trained-model folder (<Trainer>__<Plans>__<configuration>) "
                         "nor a folder of nnU-Net datasets (DatasetNNN_*)")
    return [Found(child, dataset_id(child.name), trained=False) for child in datasets]


def _is_trained(path: Path) -> bool:
    """Named as a trained-model folder (what it holds is read_folder's to check, and refuse in one line)."""
    return len(path.name.split("__")) == 3 and all(path.name.split("__"))


def _task(found: list[Found], paths: Sequence[Path]) -> tuple[Task | None, list[Found]]:
    """The TotalSegmentator task `found` makes and its parts in the task's order; one folder alone is a model of
    its own (a single-model task's, or any nnU-Net model: (None, [it])), even one part of a multi-part task."""
    if len(found) == 1:
        single = task_of([found[0].dataset]) if found[0].dataset is not None else None
        return (single if single is not None and len(single.datasets) == 1 else None), found
    ids = {item.dataset for item in found if item.dataset is not None}
    several = [task for task in _multi_part_tasks() if ids & set(task.datasets)]
    where = ", ".join(str(path) for path in paths[:_SHOWN_FOLDERS])
    if len(several) > 1:
        raise ModelError(f"{where}: holds the part-models of several TotalSegmentator tasks "
                         f"({', '.join(task.name for task in several)}); give the part folders of one")
    if several:
        task = several[0]
        missing = [dataset for dataset in task.datasets if dataset not in ids]
        if missing:
            raise ModelError(f"{where}: {task.title} is {len(task.datasets)} part-models (datasets "
                             f"{', '.join(map(str, task.datasets))}); dataset {missing[0]} (Dataset{missing[0]}_…) "
                             "is missing")
        by_id = {item.dataset: item for item in found}
        return task, [by_id[dataset] for dataset in task.datasets]
    raise ModelError(f"{where}: {len(found)} nnU-Net folders that are not the part-models of one "
                     "TotalSegmentator task; import one folder at a time")


def _multi_part_tasks() -> list[Task]:
    return [task for task in TASKS if len(task.datasets) > 1]


def _trained(item: Found) -> Path:
    """The trained-model folder of a dataset folder: the one `<Trainer>__<Plans>__<configuration>` in it."""
    if item.trained:
        return item.path
    inside = sorted(child for child in item.path.iterdir() if child.is_dir() and _is_trained(child))
    if len(inside) != 1:
        names = ", ".join(child.name for child in inside[:_SHOWN_FOLDERS])
        raise ModelError(f"{item.path}: holds {'no' if not inside else len(inside)} trained-model folders "
                         f"(<Trainer>__<Plans>__<configuration>){': ' + names if names else ''}"
                         "; give the one to import")
    return inside[0]


# --- the import -------------------------------------------------------------------------------------------------

def _import_task(task: Task, reads: list[NnunetFolder], out: Path) -> Imported:
    _agree(reads)
    first = reads[0]
    for read in reads:
        _known(task, read)
    labels = merged(task, [read.labels.names for read in reads])
    values = [mapped(read) for read in reads]
    if len(reads) > 1:
        model = parts_combined([folder_model(read) for read in reads], [len(read.channel_names) for read in reads])
        combined = with_parts(values, classes=labels.classes, labels=labels.labels)
    else:
        model, combined = folder_model(first), _single(values[0], task, labels)
    combined = _named(combined, task, reads)
    if first.transpose_forward != (0, 1, 2):
        model = transposed(model, first.transpose_forward, first.transpose_backward)
    provenance(model, first, combined)
    _task_provenance(model, task, reads)
    sidecar = written(model, sidecar_text(combined, header=_header(task, reads, out)), out)
    folds = tuple(dict.fromkeys(fold.name for read in reads for fold in read.folds))
    return Imported(out, sidecar, folds, first.checkpoint_name, combined.gaps)


def _known(task: Task, read: NnunetFolder) -> None:
    """Every class of the part in the task's label map (ModelError naming its dataset.json otherwise)."""
    try:
        merged(task, [read.labels.names])
    except ValueError as exc:
        raise ModelError(f"{read.path / 'dataset.json'}: {exc}") from None


def _agree(reads: list[NnunetFolder]) -> None:
    """Every part predicted as the first is: the same patch, spacing, axis order, resampling and mirroring (one
    merged model resamples and tiles the volume once for all of them)."""
    first = reads[0]
    for read in reads[1:]:
        for what, value, expected in _compared(read, first):
            if value != expected:
                raise ModelError(f"{read.path}: its {what} {value} differs from {first.path.parent.name}'s "
                                 f"{expected}; the parts of one model must be predicted alike")
        if read.labels.region_based:
            raise ModelError(f"{read.path / 'dataset.json'}: a region-based label set; parts are merged by label")
    if first.labels.region_based:
        raise ModelError(f"{first.path / 'dataset.json'}: a region-based label set; parts are merged by label")


def _compared(read: NnunetFolder, first: NnunetFolder) -> list[tuple[str, object, object]]:
    def rule(kind: Resampling) -> str:
        return f"{kind.function}(order {kind.order}, order_z {kind.order_z}, force_separate_z {kind.force_separate_z})"

    def mirror(folder: NnunetFolder) -> list[int] | None:
        axes = folder.folds[0].mirroring_axes
        return None if axes is None else list(axes)

    return [("configuration", read.configuration.name, first.configuration.name),
            ("patch_size", list(read.configuration.patch_size), list(first.configuration.patch_size)),
            ("spacing", list(read.configuration.spacing), list(first.configuration.spacing)),
            ("transpose_forward", list(read.transpose_forward), list(first.transpose_forward)),
            ("data resampling", rule(read.configuration.resampling_data), rule(first.configuration.resampling_data)),
            ("probabilities resampling", rule(read.configuration.resampling_probabilities),
             rule(first.configuration.resampling_probabilities)),
            ("mirroring axes", mirror(read), mirror(first))]


def parts_combined(models: Sequence[onnx.ModelProto], channels: Sequence[int]) -> onnx.ModelProto:
    """One graph running part k's network on its own input channels (`channels[k]` of them, in order), its output
    the parts' logits concatenated along the channels (each part's nodes and initializers under `part<k>/`)."""
    first = models[0]
    source = first.graph.input[0].name
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    logits = []
    start = 0
    for index, (model, count) in enumerate(zip(models, channels, strict=True)):
        prefix = f"part{index}/"
        part_nodes, part_initializers, part_input, part_logits = under(model, prefix, own_input=True)
        bounds = [f"{prefix}channels.{name}" for name in ("start", "end", "axis")]
        initializers += [numpy_helper.from_array(np.array([value], np.int64), name)
                         for name, value in zip(bounds, (start, start + count, 1), strict=True)]
        nodes.append(helper.make_node("Slice", [source, *bounds], [part_input], name=f"{prefix}channels"))
        nodes += part_nodes
        initializers += part_initializers
        logits.append(part_logits)
        start += count
    result = first.graph.output[0].name
    nodes.append(helper.make_node("Concat", logits, [result], name="parts_logits", axis=1))
    model = assembled(first, nodes, initializers, _with_channels(first.graph.input[0], start),
                      _with_channels(first.graph.output[0], sum(_outputs(m) for m in models)),
                      doc=f"{first.doc_string}; {len(models)} part-models' logits side by side")
    _spatial_multiple(model, models)
    return model


def _outputs(model: onnx.ModelProto) -> int:
    return int(model.graph.output[0].type.tensor_type.shape.dim[1].dim_value)


def _with_channels(info: onnx.ValueInfoProto, channels: int) -> onnx.ValueInfoProto:
    dims = [dim.dim_param or dim.dim_value for dim in info.type.tensor_type.shape.dim]
    return helper.make_tensor_value_info(info.name, TensorProto.FLOAT, [dims[0], channels, *dims[2:]])


def _spatial_multiple(model: onnx.ModelProto, parts: Sequence[onnx.ModelProto]) -> None:
    """The merged graph's `seglens.spatial_multiple`: per axis, the least common multiple of the parts'."""
    multiples = []
    for part in parts:
        text = {entry.key: entry.value for entry in part.metadata_props}.get("seglens.spatial_multiple")
        if text:
            multiples.append([int(value) for value in text.split(",")])
    if not multiples or len({len(m) for m in multiples}) != 1:
        return
    props = {entry.key: entry.value for entry in model.metadata_props}
    props["seglens.spatial_multiple"] = ",".join(str(math.lcm(*axis)) for axis in zip(*multiples, strict=True))
    del model.metadata_props[:]
    helper.set_model_props(model, props)


# --- the sidecar ------------------------------------------------------------------------------------------------

def _single(values: Mapped, task: Task, labels: Merged) -> Mapped:
    """A single-model task: its classes as TotalSegmentator names them (by label, in its merged label map)."""
    names = dict(values.values)
    if labels.labels[0] != tuple(range(len(labels.labels[0]))):
        raise ModelError(f"{task.title}: the model's labels are not in the order of TotalSegmentator's label map")
    names["classes"] = list(labels.classes)
    return replace(values, values=names, sources={**values.sources, "classes": "nnunet dataset.json labels "
                                                  f"(equal to TotalSegmentator's class_map['{task.name}'])"})


def _named(values: Mapped, task: Task, reads: list[NnunetFolder]) -> Mapped:
    """The task's name and the tile step TotalSegmentator's CLI predicts it with."""
    parts = f"{len(reads)} part-models, " if len(reads) > 1 else ""
    named = {**values.values, "name": f"{task.title} ({parts}{reads[0].configuration.name}, nnU-Net)",
             "nnunet.step": task.step}
    step = f"TotalSegmentator's CLI predicts {task.name} with tile_step_size {task.step:g} (its nnunet.py)"
    return replace(values, values=named, sources={
        **values.sources, "name": "TotalSegmentator's task of these datasets (its map_tasks_config.py)",
        "nnunet.step": step})


def _task_provenance(model: onnx.ModelProto, task: Task, reads: list[NnunetFolder]) -> None:
    """`info`'s imported lines for a TotalSegmentator task: from its root, with its parts (the sources' `nnunet.parts`
    names them in painting order)."""
    props = {entry.key: entry.value for entry in model.metadata_props}
    root = reads[0].path.resolve().parent.parent if len(reads) > 1 else reads[0].path.resolve()
    props["seglens.imported_from"] = f"{root} ({task.title})"
    props["seglens.import.folds"] = _per_part(reads, lambda read: ",".join(fold.name for fold in read.folds))
    props["seglens.import.trainer"] = _per_part(reads, lambda read: read.trainer)
    sources = json.loads(props.get("seglens.import.sources", "{}"))
    sources["nnunet.parts"] = (f"{task.title}: " + ", ".join(read.path.parent.name for read in reads)
                               + " (painted in this order); " + sources.get("nnunet.parts", ""))
    props["seglens.import.sources"] = json.dumps(sources, ensure_ascii=False)
    del model.metadata_props[:]
    helper.set_model_props(model, props)


def _per_part(reads: list[NnunetFolder], value: Callable[[NnunetFolder], str]) -> str:
    texts = [str(value(read)) for read in reads]
    return texts[0] if len(set(texts)) == 1 else "; ".join(texts)


def _header(task: Task, reads: list[NnunetFolder], out: Path) -> list[str]:
    first = reads[0]
    parts = ", ".join(f"{read.path.parent.name} (fold {','.join(f.name for f in read.folds)})" for read in reads)
    return [f"Sidecar of {out.name}, written by seglens-cli import nnunet",
            f"{task.title}: {parts}" + (", painted in this order" if len(reads) > 1 else ""),
            f"imported from {first.path.resolve().parent.parent}",
            f"{first.checkpoint_name}; configuration {first.configuration.name}, trainer {first.trainer}, "
            f"plans {first.plans_name}",
            "each value's source is the comment after it"]
