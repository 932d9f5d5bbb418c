"""A prompt model (SAM-family encoder/decoder ONNX pair) described by data: its sidecar's `prompt:` section, and
what the two graphs say about themselves (names, shapes, dtypes).

The layouts are the public exports, recognised by their decoder's input names:
- `sam`: Meta's `SamOnnxModel` (segment-anything/scripts/export_onnx_model.py) — `image_embeddings`,
  `point_coords`, `point_labels`, `mask_input`, `has_mask_input`, `orig_im_size` → `masks` (at `orig_im_size`),
  `iou_predictions`, `low_res_masks`.
- `sam2`: samexporter's export_sam2.py — `image_embed`, `high_res_feats_0`, `high_res_feats_1`, `point_coords`,
  `point_labels`, `mask_input`, `has_mask_input` → `masks` (low-res 256×256 logits), `iou_predictions`.
Every value keeps where it came from (`sidecar`, `graph`, `default`), which `seglens-cli info` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ModelError, SidecarError
from app.inference.model.onnx_graph import Dim, GraphInfo, TensorInfo, read_graph

SAM, SAM2 = "sam", "sam2"
LAYOUTS = (SAM, SAM2)
RESIZES = ("longest", "stretch")
# SAM's pixel_mean / pixel_std on 0..255 (segment-anything build_sam.py); SAM2's ImageNet values on 0..1 are the
# same numbers divided by 255
SAM_MEAN = (123.675, 116.28, 103.53)
SAM_STD = (58.395, 57.12, 57.375)

DECODER_INPUTS = {
    SAM: ("image_embeddings", "point_coords", "point_labels", "mask_input", "has_mask_input", "orig_im_size"),
    SAM2: ("image_embed", "high_res_feats_0", "high_res_feats_1", "point_coords", "point_labels", "mask_input",
           "has_mask_input"),
}
DECODER_OUTPUTS = {SAM: ("masks", "iou_predictions", "low_res_masks"), SAM2: ("masks", "iou_predictions")}
ENCODER_OUTPUTS = {SAM: ("image_embeddings",), SAM2: ("high_res_feats_0", "high_res_feats_1", "image_embed")}
# the decoder input each encoder output feeds (SAM2 renames nothing; SAM's names match too)
_FLOAT_INPUTS = ("point_coords", "point_labels", "mask_input", "has_mask_input", "orig_im_size")
_PROMPT_KEYS = ("encoder", "decoder", "layout", "input_size", "resize", "mean", "std", "mask_threshold")
_TOP_KEYS = ("name", "description", "prompt")
_SIDECAR_BYTES = 1 << 20  # app.inference.prompt.sidecar.MAX_BYTES: the most a sidecar may hold
FRAME_SIDES = (64, 4096)  # the encoder's square frame, from the graph as from the sidecar (the sidecar's check)


@dataclass(frozen=True)
class Valued:
    """A value and where it came from: `sidecar`, `graph` (read from the ONNX file) or `default`."""

    value: Any
    source: str


@dataclass(frozen=True)
class PromptSpec:
    """What the adapter needs to run a pair: files, layout, the encoder's frame and the mask threshold."""

    sidecar: Path
    name: str
    encoder: Path
    decoder: Path
    layout: str
    input_size: int  # the encoder's square frame (1024 for SAM and SAM2)
    resize: str  # "longest": longest side to input_size, padded bottom/right (SAM); "stretch": to input_size²
    mean: tuple[float, float, float]  # on 0..255
    std: tuple[float, float, float]  # on 0..255
    mask_threshold: float
    embed_outputs: tuple[str, ...]  # the encoder outputs the decoder takes, by name
    sources: dict[str, str]  # key -> where its value came from
    # what the two graphs declare of their outputs: every answer is checked against it (app.inference.runtime.finite)
    encoder_outputs: tuple[TensorInfo, ...] = ()
    decoder_outputs: tuple[TensorInfo, ...] = ()

    def describe(self) -> str:
        """Several lines for `seglens-cli info`: each value and its source."""
        rows = [("layout", self.layout), ("encoder", self.encoder.name), ("decoder", self.decoder.name),
                ("input_size", self.input_size), ("resize", self.resize), ("mean", list(self.mean)),
                ("std", list(self.std)), ("mask_threshold", self.mask_threshold)]
        lines = [f"prompt model {self.name} ({self.sidecar.name})"]
        lines += [f"  {key:<15} {value}  ({self.sources[key]})" for key, value in rows]
        lines.append(f"  embeddings      {', '.join(self.embed_outputs)}")
        return "\n".join(lines)


def is_prompt_sidecar(path: Path) -> bool:
    """Whether `path` is a YAML file with a top-level `prompt:` section (cheap: used by `info` to choose)."""
    from app.guard.untrusted import open_untrusted  # not app.inference.prompt.sidecar: it imports PyYAML

    if path.suffix.lower() not in (".yaml", ".yml") or not path.is_file():
        return False
    try:  # a sidecar's size at most (a model's big YAML is not read whole): a longer one is refused when read
        with open_untrusted(path, limit=_SIDECAR_BYTES + 1) as handle:
            head = handle.read(_SIDECAR_BYTES + 1)
    except OSError:
        return False
    # a BOM (Windows editors) before the first key: PyYAML reads past it, so must this
    return any(line.startswith(b"prompt:") for line in head.removeprefix(b"\xef\xbb\xbf").splitlines())


def prompt_sidecar_of(model: Path) -> Path | None:
    """MODEL as `info` takes it, when it is a prompt pair: its sidecar, or a bundled pair's by its bare name
    (`prompt_demo`, as `seglens-cli prompt` takes it); None for anything else."""
    if is_prompt_sidecar(model):
        return model
    if model.suffix or model.name != str(model) or model.exists():
        return None
    from app.paths import models_dir

    bundled = models_dir() / f"{model.name}.yaml"
    return bundled if is_prompt_sidecar(bundled) else None


def load_prompt_spec(sidecar: Path) -> PromptSpec:
    """The sidecar's `prompt:` section, checked against the two graphs; SidecarError or ModelError in one line."""
    from app.inference.prompt.sidecar import read_prompt_section

    name, section = read_prompt_section(sidecar, top_keys=_TOP_KEYS, prompt_keys=_PROMPT_KEYS)
    if "decoder" not in section:
        raise SidecarError(f"{sidecar}: 'prompt.decoder' is missing (the decoder ONNX file, beside the sidecar)")
    if "encoder" not in section:
        raise SidecarError(f"{sidecar}: 'prompt.encoder' is missing: the decoder {section['decoder']} needs its "
                           "encoder (the ONNX file that makes the image embeddings)")
    encoder_path = _beside(sidecar, "encoder", section["encoder"])
    decoder_path = _beside(sidecar, "decoder", section["decoder"])
    decoder, encoder = read_graph(decoder_path), read_graph(encoder_path)
    layout = _layout(decoder_path, decoder, section.get("layout"))
    size = _input_size(encoder_path, encoder)
    check_pair(encoder_path, encoder, decoder_path, decoder, layout)
    if layout == SAM and section.get("resize") == "stretch":
        raise SidecarError(f"{sidecar}: 'prompt.resize' stretch does not fit a sam decoder (SamOnnxModel crops its "
                           "masks to the longest-side resize: use longest)")
    sources = {"encoder": "sidecar", "decoder": "sidecar"}
    values = {
        "layout": Valued(layout, "sidecar" if "layout" in section else "graph"),
        "input_size": _valued_size(sidecar, section.get("input_size"), size),
        "resize": Valued(section.get("resize", "longest"), "sidecar" if "resize" in section else "default"),
        "mean": _valued_stat(section, "mean", SAM_MEAN),
        "std": _valued_stat(section, "std", SAM_STD),
        "mask_threshold": Valued(section.get("mask_threshold", 0.0),
                                 "sidecar" if "mask_threshold" in section else "default"),
    }
    sources.update({key: v.source for key, v in values.items()})
    return PromptSpec(sidecar=sidecar, name=name, encoder=encoder_path, decoder=decoder_path, layout=layout,
                      input_size=values["input_size"].value, resize=values["resize"].value,
                      mean=values["mean"].value, std=values["std"].value,
                      mask_threshold=float(values["mask_threshold"].value), embed_outputs=ENCODER_OUTPUTS[layout],
                      sources=sources, encoder_outputs=encoder.outputs, decoder_outputs=decoder.outputs)


def _beside(sidecar: Path, key: str, name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else sidecar.parent / path


def _valued_stat(section: dict[str, Any], key: str, default: tuple[float, ...]) -> Valued:
    """mean/std as 0..255 values. Given on 0..1 (every mean ≤ 1, as SAM2's ImageNet numbers; without a mean,
    every std below 1) they are scaled: the pair's scale is the mean's, so `std: [1, 1, 1]` beside a 0..255 mean
    stays 1."""
    if key not in section:
        return Valued(default, "default")
    on_01 = all(v <= 1.0 for v in section["mean"]) if "mean" in section else all(v < 1.0 for v in section[key])
    values = tuple(float(v) * (255.0 if on_01 else 1.0) for v in section[key])
    return Valued(values, "sidecar (on 0..1, ×255)" if on_01 else "sidecar")


def _valued_size(sidecar: Path, given: int | None, read: int | None) -> Valued:
    if read is None:  # a symbolic H and W: the sidecar says the frame
        if given is None:
            raise SidecarError(f"{sidecar}: the encoder's input size is not fixed in its graph: give "
                               "'prompt.input_size' (1024 for SAM and SAM2)")
        return Valued(given, "sidecar")
    if given is not None and given != read:
        raise SidecarError(f"{sidecar}: 'prompt.input_size' is {given} but the encoder's input is {read}×{read}")
    return Valued(read, "sidecar" if given is not None else "graph")


def _layout(path: Path, decoder: GraphInfo, given: str | None) -> str:
    """`sam` or `sam2` from the decoder's input names (the sidecar's `layout` only chooses, never overrides)."""
    names = {t.name for t in decoder.inputs}
    fits = [layout for layout in LAYOUTS if set(DECODER_INPUTS[layout]) <= names]
    if given is not None:
        missing = [n for n in DECODER_INPUTS[given] if n not in names]
        if missing:
            raise ModelError(f"{path}: not a {given} decoder: it has no input '{missing[0]}' "
                             f"(inputs: {', '.join(sorted(names))})")
        return given
    if len(fits) == 1:
        return fits[0]
    if len(fits) > 1:
        raise ModelError(f"{path}: the decoder fits both the sam and sam2 layouts: say which in the sidecar "
                         "('prompt.layout: sam | sam2')")
    closest = max(LAYOUTS, key=lambda layout: len(set(DECODER_INPUTS[layout]) & names))
    absent = next(n for n in DECODER_INPUTS[closest] if n not in names)
    raise ModelError(f"{path}: not a SAM or SAM2 decoder: no input '{absent}' (inputs: {', '.join(sorted(names))})")


def _input_size(path: Path, encoder: GraphInfo) -> int | None:
    """The encoder's square frame from its one image input, NCHW [1, 3, S, S] float32 (None: S is symbolic)."""
    images = list(encoder.inputs)
    if len(images) != 1:
        raise ModelError(f"{path}: a prompt encoder takes one image input, this one has {len(images)} "
                         f"({', '.join(t.name for t in images)})")
    image = images[0]
    shape = image.shape or ()
    if len(shape) == 4 and shape[1] == 3 and not isinstance(shape[2], int) and not isinstance(shape[3], int):
        size = None
    elif len(shape) != 4 or shape[1] != 3 or shape[2] != shape[3] or not isinstance(shape[2], int):
        raise ModelError(f"{path}: encoder input {image.describe()} is not a [1,3,S,S] image (SAM's 1×3×1024×1024)")
    else:
        size = int(shape[2])
        if not FRAME_SIDES[0] <= size <= FRAME_SIDES[1]:  # the encoder tensor is 3 × S² floats, made per image
            raise ModelError(f"{path}: encoder input {image.describe()} is a {size}×{size} frame; a prompt "
                             f"encoder's is {FRAME_SIDES[0]} to {FRAME_SIDES[1]} pixels a side (SAM's 1024)")
    if image.dtype != "float32":
        raise ModelError(f"{path}: encoder input '{image.name}' is {image.dtype}, expected float32")
    return size


def check_pair(encoder_path: Path, encoder: GraphInfo, decoder_path: Path, decoder: GraphInfo, layout: str) -> None:
    """Refuse a pair that does not fit, naming the input that does not: every encoder output the layout names
    is a decoder input of the same shape and dtype; the prompt inputs are float32; the outputs are there."""
    outputs = {t.name: t for t in encoder.outputs}
    inputs = {t.name: t for t in decoder.inputs}
    for name in ENCODER_OUTPUTS[layout]:
        made = outputs.get(name)
        if made is None:
            raise ModelError(f"{encoder_path}: not the {layout} decoder's encoder: it has no output '{name}' "
                             f"(outputs: {', '.join(outputs)})")
        _same(decoder_path, inputs[name], made, encoder_path)
    for name in _FLOAT_INPUTS:
        wanted = inputs.get(name)
        if wanted is not None and wanted.dtype != "float32":
            raise ModelError(f"{decoder_path}: decoder input '{name}' is {wanted.dtype}, expected float32")
    given = {t.name for t in decoder.outputs}
    missing = [n for n in DECODER_OUTPUTS[layout] if n not in given]
    if missing:
        raise ModelError(f"{decoder_path}: the {layout} decoder has no output '{missing[0]}'")
    _check_mask_input(decoder_path, inputs["mask_input"])


def _same(decoder_path: Path, wanted: TensorInfo, made: TensorInfo, encoder_path: Path) -> None:
    if wanted.dtype != made.dtype:
        raise ModelError(f"{decoder_path}: decoder input '{wanted.name}' is {wanted.dtype} but the encoder "
                         f"{encoder_path.name} makes {made.dtype}")
    if _clash(wanted.shape, made.shape):
        raise ModelError(f"{decoder_path}: decoder input '{wanted.name}' is {_dims(wanted)} but the encoder "
                         f"{encoder_path.name} makes {_dims(made)}")


def _clash(a: tuple[Dim, ...] | None, b: tuple[Dim, ...] | None) -> bool:
    """Whether two declared shapes cannot be the same tensor (a symbolic or unknown dim fits any size)."""
    if a is None or b is None:
        return False
    if len(a) != len(b):
        return True
    return any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(a, b, strict=True))


def _check_mask_input(path: Path, mask_input: TensorInfo) -> None:
    shape = mask_input.shape
    if shape is not None and (len(shape) != 4 or shape[1] not in (1, None)):
        raise ModelError(f"{path}: decoder input 'mask_input' is {_dims(mask_input)}, expected [1,1,256,256]")


def _dims(info: TensorInfo) -> str:
    dims = "?" if info.shape is None else ",".join("?" if d is None else str(d) for d in info.shape)
    return f"[{dims}]"
