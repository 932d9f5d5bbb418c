"""What SegLens understands of a model, for people (`seglens-cli info`) and for tools (`info --json`): every value of
the spec with where it came from, and the session's truth (provider, why not the GPU, latency). A 3D model is
worded by its own lines: the task, the volume input (tensor, patch, spacing, axes, normalisation, tiling, TTA,
divisor) and the output, each value with its source."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from app.inference.decide.band import score_band
from app.inference.describe.detector import detector_dict, detector_lines
from app.inference.describe.recipe import recipe_lines
from app.inference.model.codes import ClassCode
from app.inference.model.labels import display_name
from app.inference.model.onnx_graph import TensorInfo
from app.inference.model.session import SessionInfo
from app.inference.model.shapes import dims_text
from app.inference.model.spec import InputSpec, ModelSpec, Normalize3D, VolumeInputSpec
from app.spelling import counted

_AXIS_NAMES = ("D", "H", "W")
_ACTIVATE = {"after_blend": " of the blended raw outputs, before they are resampled back (output.activate)",
             "after_resample": " of the blended raw outputs, once resampled back (output.activate)"}
_TILE_KEYS = ("input.tile.overlap", "input.tile.blend", "input.tile.batch", "input.tile.pad")


def spec_dict(spec: ModelSpec, info: SessionInfo | None) -> dict[str, Any]:
    inp, out = spec.input, spec.output
    data = {
        "model": str(spec.path), "sidecar": str(spec.sidecar) if spec.sidecar else None, "name": spec.name,
        "task": spec.task, "opset": spec.opset, "producer": spec.producer,
        "inputs": [{"name": t.name, "shape": list(t.shape or []), "dtype": t.dtype} for t in spec.inputs],
        "outputs": [{"name": t.name, "shape": list(t.shape or []), "dtype": t.dtype} for t in spec.outputs],
        "input": {"name": inp.name, "layout": inp.layout, "channels": inp.channels, "dtype": inp.dtype,
                  "size": list(inp.size) if inp.size else None, "resize": inp.resize,
                  "size_divisor": inp.size_divisor, "color": inp.color, "scale": inp.scale,
                  "mean": list(inp.mean), "std": list(inp.std), "modality": list(inp.modality),
                  "color_matters": inp.color_matters, **_channel_names(spec),
                  **({"tile": vars(inp.tile).copy()} if inp.resize == "tile" else {})},
        "output": {"name": out.name, "kind": out.kind, "activation": out.activation, "threshold": out.threshold,
                   **({"score": out.score_name, "mask": out.mask_name, "image_threshold": out.image_threshold}
                      if out.kind == "anomaly" else {}),
                   **({"min_confidence": out.min_confidence, "min_margin": out.min_margin}
                      if spec.task == "classification" else {})},
        "classes_file": str(spec.classes_file) if spec.classes_file else None,
        "classes": [{"index": i, "name": c.name, "color": hex_color(c.color), **_code_dict(c.code)}
                    for i, c in enumerate(spec.classes)],
        "postprocess": vars(spec.postprocess).copy(),
        "verdict": None if spec.verdict is None else {
            "fail_if": [rule.as_dict() for rule in spec.verdict],
            **({"review_if": [rule.as_dict() for rule in spec.review]} if spec.review else {})},
        "sources": dict(spec.sources),
    }
    if spec.volume is not None:
        data["volume"] = _volume_dict(spec.volume)
    if imported_dict(spec) is not None:
        data["imported"] = imported_dict(spec)
    if spec.detector is not None:
        data["detector"] = detector_dict(spec)
    if info is not None:
        data["session"] = session_dict(info)
    return data


def _volume_dict(volume: VolumeInputSpec) -> dict[str, Any]:
    """A 3D model's patch, spacing, axes, normalisation, tiling and TTA as JSON values."""
    data = asdict(volume)
    return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}


def session_dict(info: SessionInfo) -> dict[str, Any]:
    return {"requested": info.requested, "provider": info.provider, "providers": list(info.providers),
            "fallback_reason": info.fallback_reason, "device_id": info.device_id, "gpu_present": info.gpu_present,
            "load_ms": round(info.load_ms, 2), "first_run_ms": round(info.first_run_ms, 2),
            "warm_run_ms": round(info.warm_run_ms, 2), "onnxruntime": info.ort_version}


def _code_dict(code: ClassCode | None) -> dict[str, Any]:
    """A class's sidecar `code:` as JSON: {"code": {"category": [scheme, value, meaning], "type": [...]}}."""
    if code is None:
        return {}
    return {"code": {part: [c.scheme, c.value, c.meaning] for part, c in (("category", code.category),
                                                                          ("type", code.type))}}


def hex_color(color: tuple[int, int, int] | None) -> str | None:
    return None if color is None else "#{:02x}{:02x}{:02x}".format(*color)


_KIND_TEXT = {"scores": "per-class scores (argmax)", "binary": "binary mask (threshold)",
              "labels": "label map (argmax inside the graph)", "classification": "class scores (top-k)",
              "anomaly": "anomaly map (pixel threshold)", "instances": "objects (boxes, classes, masks)"}


def tile_text(inp: InputSpec) -> str:
    """`256×256 tiles, overlap 0.25, gaussian, batch 1` (dynamic models: and above how many pixels)."""
    t = inp.tile
    hw = (inp.model_hw if None not in inp.model_hw else t.size)
    when = f", above {t.max_pixels} pixels" if None in inp.model_hw else ""
    return f"{hw[0]}×{hw[1]} tiles, overlap {t.overlap:g}, {t.blend}{when}, batch {t.batch}"


def spec_text(spec: ModelSpec, info: SessionInfo | None) -> str:
    src = spec.sources
    inp, out = spec.input, spec.output

    def row(label: str, value: object, key: str | None = None) -> str:
        origin = f"  [{src.get(key, '')}]" if key and src.get(key) else ""
        return f"  {label:<14}{value}{origin}"

    if spec.volume is not None:
        return _volume_text(spec, info)
    if spec.detector is not None:
        return _detector_text(spec, info, row)
    hw = "dynamic H/W" if inp.dynamic_hw else f"fixed {inp.model_hw[0]}×{inp.model_hw[1]}"
    lines = [
        f"{spec.name}  ({spec.path})",
        f"  sidecar       {spec.sidecar or 'none'}",
        _onnx_line(spec),
        row("task", spec.task, "task"),
        "input",
        row("tensor", f"{spec.inputs[0].describe()} ({inp.layout}, {hw})"),
        row("size", "keep the image's size" if inp.size is None else f"{inp.size[0]}×{inp.size[1]} (H×W)",
            "input.size"),
        row("resize", inp.resize if inp.resize != "tile" else f"tile ({tile_text(inp)})", "input.resize"),
        row("size_divisor", inp.size_divisor, "input.size_divisor"),
        row("color", inp.color, "input.color"),
        row("scale", f"{inp.scale:.8g}", "input.scale"),
        row("mean", ", ".join(f"{v:g}" for v in inp.mean), "input.mean"),
        row("std", ", ".join(f"{v:g}" for v in inp.std), "input.std"),
        *([row("modality", f"{', '.join(inp.modality)} (other images are warned)", "input.modality")]
          if inp.modality else []),
        *([row("color_matters", "yes (gray images are warned)", "input.color_matters")] if inp.color_matters else []),
        "output",
        row("tensor", f"{_tensor(spec, out.name).describe()}: {_KIND_TEXT[out.kind]}"),
        row("activation", out.activation, "output.activation"),
    ]
    if out.kind == "anomaly":
        lines.append(row("score", f"{_tensor(spec, out.score_name).describe()}: image anomaly score"))
        if out.mask_name:
            lines.append(row("mask", f"{_tensor(spec, out.mask_name).describe()}: the model's own mask (used)"))
        lines.append(row("threshold", f"{out.threshold:g} (pixel: anomalous where map >= it)", "output.threshold"))
        lines.append(row("image_thresh", f"{out.image_threshold:g} (NG where score >= it)",
                         "output.image_threshold"))
    elif out.kind == "binary":
        lines.append(row("threshold", out.threshold, "output.threshold"))
    if spec.task == "classification":
        lines.append(row("min_confidence ", f"{out.min_confidence:g} (uncertain where top-1 < it)",
                         "output.min_confidence"))
        lines.append(row("min_margin", f"{out.min_margin:g} (uncertain where top-1 − top-2 < it)",
                         "output.min_margin"))
    lines += _class_lines(spec)
    lines += _postprocess_lines(spec, row)
    lines += _verdict_lines(spec)
    if info is not None:
        lines += ["session", *(f"  {line}" for line in session_lines(info))]
    return "\n".join(lines)


def _detector_text(spec: ModelSpec, info: SessionInfo | None, row: Callable[[str, object, str], str]) -> str:
    """`info` of an Ultralytics YOLO export: what it is and how its predictions are kept (app.inference.describe.
    detector), a classify export's uncertainty limits and top-k, its classes, verdict and session."""
    lines = [f"{spec.name}  ({spec.path})", f"  sidecar       {spec.sidecar or 'none'}", _onnx_line(spec),
             *detector_lines(spec)]
    if spec.task == "classification":
        out = spec.output
        lines += [row("min_confidence ", f"{out.min_confidence:g} (uncertain where top-1 < it)",
                      "output.min_confidence"),
                  row("min_margin", f"{out.min_margin:g} (uncertain where top-1 − top-2 < it)", "output.min_margin"),
                  *_postprocess_lines(spec, row)]
    lines += _class_lines(spec)
    lines += _verdict_lines(spec)
    if info is not None:
        lines += ["session", *(f"  {line}" for line in session_lines(info))]
    return "\n".join(lines)


def _volume_text(spec: ModelSpec, info: SessionInfo | None) -> str:
    """`info` of a 3D model: its volume input (patch, spacing, axes, normalisation, tiling, TTA), output, classes."""
    lines = [
        f"{spec.name}  ({spec.path})",
        f"  sidecar       {spec.sidecar or 'none'}",
        _onnx_line(spec),
        *_imported_lines(spec),
        *volume_lines(spec, _tensor(spec, spec.output.name)),
    ]
    lines += _class_lines(spec)
    lines += _verdict_lines(spec)
    if info is not None:
        lines += ["session", *(f"  {line}" for line in session_lines(info))]
    return "\n".join(lines)


def _imported_lines(spec: ModelSpec) -> list[str]:
    """What a model compiled by `seglens-cli import` was made from (its ONNX metadata), and what is not yet exact."""
    meta = spec.metadata
    if "seglens.imported_from" not in meta:
        return []
    folds = meta.get("seglens.import.folds", "?")
    lines = [f"  imported      from {meta['seglens.imported_from']}",
             f"                {meta['seglens.import.summary']}" if "seglens.import.summary" in meta else
             f"                {'folds' if ',' in folds else 'fold'} {folds}, "
             f"{meta.get('seglens.import.checkpoint', '?')}, configuration "
             f"{meta.get('seglens.import.configuration', '?')}, trainer {meta.get('seglens.import.trainer', '?')}"]
    imported = imported_dict(spec) or {}
    lines += [f"  source of     {key}: {source}" for key, source in imported["sources"].items()]
    lines += [f"  not exact     {gap}" for gap in imported["not_exact"]]
    return lines


def imported_dict(spec: ModelSpec) -> dict[str, Any] | None:
    """A model compiled by `seglens-cli import`: where from, and each value's source and gap (its ONNX metadata)."""
    meta = spec.metadata
    if "seglens.imported_from" not in meta:
        return None
    sources = _json_metadata(meta, "seglens.import.sources", {})
    gaps = _json_metadata(meta, "seglens.import.not_exact", [])
    return {"from": meta["seglens.imported_from"], "folds": meta.get("seglens.import.folds", ""),
            "checkpoint": meta.get("seglens.import.checkpoint", ""),
            "configuration": meta.get("seglens.import.configuration", ""),
            "trainer": meta.get("seglens.import.trainer", ""),
            "summary": meta.get("seglens.import.summary", ""),  # what another importer (a MONAI bundle) says of it
            "sources": {str(k): str(v) for k, v in sources.items()} if isinstance(sources, dict) else {},
            "not_exact": [g for g in gaps if isinstance(g, str)] if isinstance(gaps, list) else []}


def _json_metadata(meta: dict[str, str], key: str, default: object) -> object:
    try:
        return json.loads(meta.get(key, ""))
    except ValueError:
        return default


def volume_lines(spec: ModelSpec, output: TensorInfo) -> list[str]:
    """The task, input and output lines of a 3D model's `info` (spec.volume is set)."""
    volume = spec.volume
    assert volume is not None  # describe calls it for 3D models only
    src, inp, out = spec.sources, spec.input, spec.output
    dims = (spec.inputs[0].shape or ())[2:]
    fixed = "fixed" if all(isinstance(d, int) for d in dims) else "dynamic"
    lines = [
        _line("task", f"{spec.task} (3D: a volume, in patches)", src.get("task")),
        "input",
        _line("tensor", f"{spec.inputs[0].describe()} (NCDHW, {counted(inp.channels, 'channel')}, {fixed} D×H×W "
                        f"{dims_text(dims)})"),
        *_channel_lines(spec),
        _line("patch", f"{dims_text(volume.patch)} (D×H×W)", src.get("input.patch")),
        _line("spacing", _spacing_text(volume), src.get("input.spacing")),
        _line("axes", _axes_text(volume.axes), src.get("input.axes")),
        *([_line(label, text, src.get("nnunet") if label == "recipe" else None)
           for label, text in recipe_lines(volume.nnunet)] if volume.nnunet is not None else
          [_line("normalize", normalize_text(volume.normalize), src.get("input.normalize")),
           _line("tiling", tiling_text(volume), _combined(spec, _TILE_KEYS))]),
        _line("tta", tta_text(volume.tta), src.get("input.tta")),
        _line("size_divisor", f"{volume.size_divisor} (a whole-volume run pads each side to a multiple)",
              src.get("input.size_divisor")),
        *([_line("modality", f"{', '.join(inp.modality)} (other volumes are warned)", src.get("input.modality"))]
          if inp.modality else []),
        "output",
        _line("tensor", f"{output.describe()}: {_output_text(spec, output)}"),
        _line("activation", out.activation + _ACTIVATE.get(volume.activate, ""), src.get("output.activation")),
    ]
    if out.kind == "binary":
        lines.append(_line("threshold", f"{out.threshold:g} (foreground where the probability >= it)",
                           src.get("output.threshold")))
    return lines


def normalize_text(norm: Normalize3D) -> str:
    """`ct: clip to [-1000, 1000] HU, then (x − 100) / 300` and the like."""
    if norm.kind == "ct":
        clip = f"clip to [{norm.clip[0]:g}, {norm.clip[1]:g}], then " if norm.clip else ""
        return f"ct: {clip}(x {_minus(norm.mean)}) / {norm.std:g} (the training set's statistics)"
    if norm.kind == "zscore":
        over = "non-zero voxels" if norm.nonzero else "all voxels"
        return f"zscore: (x − mean) / std of each volume, over {over}"
    return f"(x × {norm.scale:.8g} {_minus(norm.mean)}) / {norm.std:g}"


def _minus(mean: float) -> str:
    """`− 100`, or `+ 655.39` for a negative mean (a CT's, mostly air), never `− -655.39`."""
    return f"+ {-mean:g}" if mean < 0 else f"− {mean:g}"


def tiling_text(volume: VolumeInputSpec) -> str:
    """`patches of 64×128×128, overlap 0.5, gaussian (σ 0.125 × patch), batch 1`."""
    tile = volume.tile
    blend = f"gaussian (σ {tile.sigma_scale:g} × patch)" if tile.blend == "gaussian" else tile.blend
    whole = "the whole volume in one run" if volume.whole else f"patches of {dims_text(volume.patch)}"
    pad = ", a volume below the patch padded by repeating its border" if tile.pad == "edge" else ""
    return f"{whole}, overlap {tile.overlap:g}, {blend}, batch {tile.batch}{pad}"


def tta_text(axes: tuple[int, ...]) -> str:
    if not axes:
        return "off"
    return f"mirror over {', '.join(_AXIS_NAMES[a] for a in axes)} ({2 ** len(axes)} passes averaged)"


def _spacing_text(volume: VolumeInputSpec) -> str:
    if volume.spacing is None:
        return "the volume's own (no resampling)"
    if volume.nnunet is not None and volume.nnunet.slice_spacing == "volume":
        return (f"{' × '.join(f'{s:g}' for s in volume.spacing[1:])} mm (H×W; volumes are resampled to it in-plane, "
                "each keeps its own slice spacing)")
    grid = ", on MONAI's Spacing grid: the first voxel's centre kept" if volume.grid == "corner" else ""
    return f"{' × '.join(f'{s:g}' for s in volume.spacing)} mm (D×H×W; volumes are resampled to it{grid})"


def _axes_text(axes: str) -> str:
    if axes == "native":
        return "native (the volume's array as stored: slice, row, column)"
    return f"{axes} (tensor axes D, H, W increase toward {', '.join(axes)})"


def _output_text(spec: ModelSpec, output: TensorInfo) -> str:
    if spec.output.kind == "labels":
        return "label volume (argmax inside the graph)"
    if spec.output.kind == "binary":
        return "binary probability per voxel (threshold)"
    return "per-class probabilities per voxel (argmax)"


def _combined(spec: ModelSpec, keys: tuple[str, ...]) -> str | None:
    """One source for values read together: sidecar when any of them is the sidecar's."""
    sources = [spec.sources.get(key) for key in keys]
    return "sidecar" if "sidecar" in sources else next((s for s in sources if s), None)


def _channel_names(spec: ModelSpec) -> dict[str, list[str]]:
    from app.io.channels import model_channels

    names = model_channels(spec.input.channels, spec.metadata).names
    return {"channel_names": list(names)} if names else {}


def _channel_lines(spec: ModelSpec) -> list[str]:
    """A 3D model of several channels: which file or volume gives each (app.io.channels), by the model's names."""
    from app.io.channels import METADATA_KEY, model_channels

    channels = model_channels(spec.volume_channels, spec.metadata)
    if channels.count <= 1:
        return []
    given = ", ".join(f"{index} {name}".rstrip() for index, name in enumerate(channels.names or [""] * channels.count))
    return [_line("channels", f"{given} (files CASE_0000 … CASE_{channels.count - 1:04d}, or a 4D NIfTI's volumes, "
                              "in this order)", f"metadata {METADATA_KEY}" if channels.names else None)]


def _line(label: str, value: object, source: str | None = None) -> str:
    return f"  {label:<14}{value}" + (f"  [{source}]" if source else "")


def _postprocess_lines(spec: ModelSpec, row: Callable[[str, object, str], str]) -> list[str]:
    post = spec.postprocess
    lines = ["postprocess"]
    if spec.task == "classification":
        lines.append(row("top_k", post.top_k, "postprocess.top_k"))
    else:
        lines.append(row("min_area", post.min_area, "postprocess.min_area"))
        lines.append(row("close_kernel", post.close_kernel, "postprocess.close_kernel"))
    return lines


def _verdict_lines(spec: ModelSpec) -> list[str]:
    if spec.verdict is None:
        return []
    where = f"verdict  [{spec.sources.get('verdict', '')}]"
    if not spec.review:
        return [f"{where}  NG when any rule holds, OK otherwise", *(f"  fail if {r.describe()}" for r in spec.verdict)]
    lines = [f"{where}  NG when a fail rule holds, else REVIEW when a review rule holds, else OK",
             *(f"  fail if {r.describe()}" for r in spec.verdict),
             *(f"  review if {r.describe()}" for r in spec.review)]
    band = score_band(spec.verdict, spec.review)
    if band:
        lines.append(f"  band: {band}")
    return lines


def _class_lines(spec: ModelSpec) -> list[str]:
    """`classes [sidecar]` and one line per class; a classifier's long names (`n01440764 tench, Tinca tinca`) as
    the viewer shows them, then whole."""
    where = spec.sources.get("classes", "")
    lines = [f"classes  [{where}: {spec.classes_file}]" if spec.classes_file else f"classes  [{where}]"]
    for i, c in enumerate(spec.classes):
        if spec.task == "classification":
            short = display_name(c.name)
            lines.append(f"  {i:>3}  {short:<24}{c.name if short != c.name else ''}".rstrip())
        else:
            coded = f"  {c.code.text()}" if c.code else ""
            lines.append(f"  {i:>3}  {c.name:<24}{hex_color(c.color) or 'not painted':<12}{coded}".rstrip())
    return lines


def _tensor(spec: ModelSpec, name: str | None) -> TensorInfo:
    return next((t for t in spec.outputs if t.name == name), spec.outputs[0])


def _onnx_line(spec: ModelSpec) -> str:
    if spec.opset is None and not spec.producer and spec.remote is not None:  # the wire says neither
        return "  ONNX          served: its metadata says no opset or producer"
    return f"  ONNX          opset {spec.opset}, {spec.producer or 'unknown producer'}"


def session_lines(info: SessionInfo) -> list[str]:
    if info.remote is not None:  # ONNX Runtime runs on the server: its device is what the server says
        lines = [f"provider      {info.provider_label} (requested remote, over {info.remote.protocol})"]
        if info.remote.server_fallback and info.remote.server_fallback not in (info.remote.server_device or ""):
            lines.append(f"not on GPU    the server's session: {info.remote.server_fallback}")
    else:
        lines = [f"provider      {info.provider_label} (requested {info.requested}; "
                 f"onnxruntime {info.ort_version})"]
    if info.fallback_reason:
        lines.append(f"not on GPU    {info.fallback_reason}")
    lines.append(f"latency       load {info.load_ms:.0f} ms, first run {info.first_run_ms:.1f} ms"
                 + (f", warmed run {info.warm_run_ms:.1f} ms" if info.warm_run_ms else ""))
    return lines
