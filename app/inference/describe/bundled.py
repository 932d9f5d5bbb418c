"""The models shipped with SegLens (models/*.onnx): listed, described from their spec, and found by name.

`seglens-cli run surface_defects …` and `seglens --model nuclei` take a bundled model's name where a path is
expected; an existing path always wins. Light on purpose: the viewer resolves `--model` before Qt starts, so
this module imports nothing heavy at module level (the spec, and with it onnx, only in `bundled_summary`).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.errors import ModelError
from app.paths import models_dir

_SHOWN_NAMES = 8  # names listed in an error line before "…"


def bundled_models() -> list[Path]:
    """The bundled .onnx files (in the source tree's models/ or the frozen build's `_internal/models`), by name."""
    folder = models_dir()
    if not folder.is_dir():
        return []
    pairs = _prompt_pair_files(folder)
    return sorted((p for p in folder.glob("*.onnx") if p.is_file() and p.name not in pairs), key=lambda p: p.name)


def bundled_prompt_sidecars() -> list[Path]:
    """The bundled prompt models' sidecars (a `prompt:` section naming an encoder and a decoder), by name: what
    `seglens-cli prompt NAME` and the viewer's Smart tool take."""
    folder = models_dir()
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if _prompt_section(p) is not None)


def prompt_summary(sidecar: Path) -> BundledModel:
    """A bundled prompt pair's row of `seglens-cli models` (its spec checked against both graphs; no session)."""
    from app.errors import SegLensError
    from app.inference.prompt.spec import load_prompt_spec

    try:
        spec = load_prompt_spec(sidecar)
    except SegLensError as exc:
        return BundledModel(name=sidecar.stem, task="prompt", input="?", classes=[], size_mb=0.0,
                            sidecar=sidecar.name, path=str(sidecar), error=str(exc))
    size_mb = round(sum(p.stat().st_size for p in (spec.encoder, spec.decoder)) / 2**20, 2)
    return BundledModel(name=sidecar.stem, task="prompt", input=f"{spec.layout.upper()} {spec.input_size}²",
                        classes=[], size_mb=size_mb, sidecar=sidecar.name, path=str(sidecar), title=spec.name)


def _prompt_section(sidecar: Path) -> dict[str, Any] | None:
    from app.guard.yaml_load import YAMLRefused, read_yaml  # here: the viewer resolves --model before Qt starts

    try:
        data = read_yaml(sidecar, what="prompt sidecar")
    except (OSError, YAMLRefused):
        return None  # not a prompt sidecar this listing can read: the spec loader says what is wrong with it
    prompt = data.get("prompt") if isinstance(data, dict) else None
    return prompt if isinstance(prompt, dict) else None


def _prompt_pair_files(folder: Path) -> set[str]:
    """The .onnx files a prompt sidecar in `folder` names (`prompt.encoder`, `prompt.decoder`): halves of a prompt
    model, not image models of their own (the decoder alone is no image model at all)."""
    names: set[str] = set()
    for sidecar in folder.glob("*.yaml"):
        prompt = _prompt_section(sidecar)
        if prompt is not None:
            names |= {str(prompt[k]) for k in ("encoder", "decoder") if isinstance(prompt.get(k), str)}
    return names


def bundled_names() -> list[str]:
    """The bundled models' names (file stems), sorted: what `resolve_model` accepts besides a path."""
    return [p.stem for p in bundled_models()]


def resolve_model(text: str | Path) -> Path:
    """The model file `text` means: an existing file (always first), else a bundled model's name, with or without
    `.onnx`, else an existing folder (whose spec fails in its own words); raises ModelError in one line naming the
    text and the bundled models otherwise. A folder does not hide a bundled name: `run nuclei nuclei/ --out o` in
    a folder holding `nuclei/` images means the bundled model."""
    path = Path(text)
    if path.is_file():
        return path
    raw = os.fspath(text)
    stem = raw[: -len(".onnx")] if raw.lower().endswith(".onnx") else raw
    if stem and not _looks_like_path(raw):
        for model in bundled_models():
            if model.stem == stem:
                return model
    if path.exists():  # a folder that is no bundled name: the spec loader says what is wrong with it
        return path
    if not _looks_like_path(raw) and (nearest := nearest_name(stem)) is not None:
        raise ModelError(f"no model '{raw}': not a file, and no bundled model of that name — did you mean {nearest}?")
    if _looks_like_path(raw) or raw.lower().endswith(".onnx"):
        raise ModelError(f"{raw}: file not found (bundled models: {_names_text()})")
    raise ModelError(f"unknown model '{raw}': not a file, and not a bundled model ({_names_text()})")


def nearest_name(text: str) -> str | None:
    """The bundled model's name `text` most likely means (`ct_dem` → `ct_demo`, case aside), None when none is near:
    difflib's ratio of at least 0.6."""
    names = {name.lower(): name for name in bundled_names()}
    close = difflib.get_close_matches(text.lower(), list(names), n=1, cutoff=0.6)
    return names[close[0]] if close else None


def _looks_like_path(raw: str) -> bool:
    """`xyz/m.onnx`, `./m`, `C:\\m`: meant as a path, never as a bundled name."""
    return any(sep in raw for sep in {"/", "\\", os.sep, os.altsep or "/"})


def _names_text() -> str:
    names = bundled_names()
    if not names:
        return f"none found in {models_dir()}"
    shown = ", ".join(names[:_SHOWN_NAMES])
    return shown + (", …" if len(names) > _SHOWN_NAMES else "")


@dataclass(frozen=True)
class BundledModel:
    """One line of `seglens-cli models`: what a bundled model is, from its spec (no session opened)."""

    name: str
    task: str  # segmentation, classification, anomaly (an anomaly map and an image score), prompt
    input: str  # "gray 256×256", "rgb dynamic"
    classes: list[str]
    size_mb: float
    sidecar: str | None  # the sidecar's file name
    path: str
    title: str = ""  # the spec's display name (sidecar `name:`)
    error: str | None = None  # the spec could not be read: the one-line reason

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of `seglens-cli models --json`."""
        return asdict(self)

    def line(self, *, name_width: int = 16) -> str:
        """`nuclei  segmentation  gray 256×256  3 classes: background, nucleus, …  0.5 MB  nuclei.yaml`."""
        if self.error:
            return f"{self.name:<{name_width}}  unreadable: {self.error}"
        what = classes_text(self.classes) if self.task != "prompt" else "a click or a box → a mask"
        return (f"{self.name:<{name_width}}  {self.task:<14}  {self.input:<14}  {what:<44}  "
                f"{self.size_mb:>5.1f} MB  {self.sidecar or 'no sidecar'}")


def classes_text(names: list[str], *, first: int = 3) -> str:
    """`4 classes: background, scratch, pit, …`."""
    shown = ", ".join(names[:first]) + (", …" if len(names) > first else "")
    return f"{len(names)} class{'es' if len(names) != 1 else ''}: {shown}"


def bundled_summary(path: Path) -> BundledModel:
    """`path`'s BundledModel from its spec alone (ONNX graph + metadata + sidecar); a broken model is a row with
    its error, never an exception, so one bad file does not hide the others."""
    from app.errors import SegLensError
    from app.inference.model.builder import load_spec

    size_mb = round(path.stat().st_size / 2**20, 2)
    try:
        spec = load_spec(path)
    except SegLensError as exc:
        return BundledModel(name=path.stem, task="?", input="?", classes=[], size_mb=size_mb, sidecar=None,
                            path=str(path), error=str(exc))
    inp = spec.input
    hw = inp.size or (None if inp.dynamic_hw else inp.model_hw)
    shape = "dynamic" if hw is None or None in hw else f"{hw[0]}×{hw[1]}"
    if spec.volume is not None:  # a 3D model's size is its patch (input.size holds the patch's H×W alone)
        shape = "3D " + "×".join(map(str, spec.volume.patch))
    task = "anomaly" if spec.output.kind == "anomaly" else spec.task  # a map and an image score, not classes
    return BundledModel(name=path.stem, task=task, input=f"{inp.color} {shape}", classes=list(spec.class_names),
                        size_mb=size_mb, sidecar=spec.sidecar.name if spec.sidecar else None, path=str(path),
                        title=spec.name)
