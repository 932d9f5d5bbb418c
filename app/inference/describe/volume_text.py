"""How `seglens-cli info` words a 3D model's spec (app.inference.describe.info calls it): the task, the volume input
(tensor, patch, spacing, axes, normalisation, tiling, TTA, divisor) and the output, each value with its source."""

from __future__ import annotations

from app.inference.model.onnx_graph import TensorInfo
from app.inference.model.shapes import dims_text
from app.inference.model.spec import ModelSpec, Normalize3D, VolumeInputSpec

_AXIS_NAMES = ("D", "H", "W")
_TILE_KEYS = ("input.tile.overlap", "input.tile.blend", "input.tile.batch", "input.tile.pad")


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
        _line("tensor", f"{spec.inputs[0].describe()} (NCDHW, {inp.channels} channel(s), {fixed} D×H×W "
                        f"{dims_text(dims)})"),
        _line("patch", f"{dims_text(volume.patch)} (D×H×W)", src.get("input.patch")),
        _line("spacing", _spacing_text(volume), src.get("input.spacing")),
        _line("axes", _axes_text(volume.axes), src.get("input.axes")),
        _line("normalize", normalize_text(volume.normalize), src.get("input.normalize")),
        _line("tiling", tiling_text(volume), _combined(spec, _TILE_KEYS)),
        _line("tta", tta_text(volume.tta), src.get("input.tta")),
        _line("size_divisor", f"{volume.size_divisor} (a whole-volume run pads each side to a multiple)",
              src.get("input.size_divisor")),
        *([_line("modality", f"{', '.join(inp.modality)} (other volumes are warned)", src.get("input.modality"))]
          if inp.modality else []),
        "output",
        _line("tensor", f"{output.describe()}: {_output_text(spec, output)}"),
        _line("activation", out.activation, src.get("output.activation")),
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
    return f"{' × '.join(f'{s:g}' for s in volume.spacing)} mm (D×H×W; volumes are resampled to it)"


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


def _line(label: str, value: object, source: str | None = None) -> str:
    return f"  {label:<14}{value}" + (f"  [{source}]" if source else "")
