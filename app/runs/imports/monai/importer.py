"""`seglens-cli import monai-bundle BUNDLE --out MODEL.onnx`: a MONAI bundle compiled into an ONNX graph and its
sidecar beside it, so that `seglens-cli run MODEL.onnx VOLUME` runs what MONAI's bundle inference runs.

Everything is read, translated, exported and checked in memory first (the sidecar by SegLens's own reader); only
then are the two files written, the ONNX removed again if the sidecar cannot be. Where each value came from and
what is not yet exact go into the sidecar's comments and the ONNX metadata (`seglens.imported_from`,
`seglens.import.*`), which `seglens-cli info` prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import helper

from app.errors import ModelError, SegLensError
from app.guard.shared import atomic_write, remove_under
from app.runs.imports.checks import check_sidecar
from app.runs.imports.monai.network import exported
from app.runs.imports.monai.reader import read_bundle
from app.runs.imports.monai.records import Bundle
from app.runs.imports.monai.translation import translate
from app.runs.imports.nnunet.mapping import Mapped, sidecar_text

_PROTOBUF_LIMIT = 2 << 30  # one ONNX protobuf holds at most 2 GiB


@dataclass(frozen=True)
class ImportedBundle:
    """What an import wrote and what it could not yet make exact."""

    model: Path
    sidecar: Path
    summary: str  # "bundle spleen_ct_segmentation 0.5.9, models/model.pt, network UNet, configs/inference.json"
    gaps: tuple[str, ...]


def import_monai_bundle(bundle_path: Path, out: Path) -> ImportedBundle:
    """Compile the bundle at `bundle_path` into `out` (.onnx) and its sidecar beside it. SegLensError in one line,
    nothing written, for a malformed bundle or a step SegLens cannot express."""
    if out.suffix.lower() != ".onnx":
        raise ModelError(f"--out {out}: the model's file name must end in .onnx (its sidecar is written beside it)")
    bundle = read_bundle(bundle_path)
    translated = translate(bundle)
    model = exported(bundle, translated)
    summary = _summary(bundle)
    _provenance(model, bundle, translated.mapped, summary)
    text = sidecar_text(translated.mapped, header=_header(bundle, out, summary))
    check_sidecar(text, out)
    data = model.SerializeToString()
    if len(data) >= _PROTOBUF_LIMIT:
        raise ModelError(f"--out {out}: the graph would be over 2 GiB (ONNX's limit for one file)")
    sidecar = out.with_suffix(".yaml")
    atomic_write(out, data)
    try:
        atomic_write(sidecar, text.encode("utf-8"))
    except SegLensError:
        remove_under(out.parent, out.name, folders=False)
        raise
    return ImportedBundle(out, sidecar, summary, translated.mapped.gaps)


def _summary(bundle: Bundle) -> str:
    meta = bundle.metadata
    name = " ".join(part for part in (meta.name or bundle.path.resolve().name, meta.version) if part)
    return (f"MONAI bundle {name}, weights {bundle.weights.relative_to(bundle.path)}, network {bundle.network.name}, "
            f"config {bundle.config.relative_to(bundle.path)}")


def _provenance(model: onnx.ModelProto, bundle: Bundle, mapped: Mapped, summary: str) -> None:
    props = {entry.key: entry.value for entry in model.metadata_props}
    props.update({
        "seglens.imported_from": str(bundle.path.resolve()),
        "seglens.import.summary": summary,
        "seglens.import.sources": json.dumps(mapped.sources, ensure_ascii=False),
        "seglens.import.not_exact": json.dumps(list(mapped.gaps), ensure_ascii=False),
    })
    del model.metadata_props[:]
    helper.set_model_props(model, props)


def _header(bundle: Bundle, out: Path, summary: str) -> list[str]:
    return [f"Sidecar of {out.name}, written by seglens-cli import monai-bundle",
            f"imported from {bundle.path.resolve()}",
            summary,
            "each value's source is the comment after it"]
