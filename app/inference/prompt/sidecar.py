"""Read a prompt model's sidecar YAML: its `prompt:` section validated, each problem one line naming the key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.errors import SidecarError
from app.guard.yaml_load import YAMLRefused, load_yaml
from app.inference.model.validators import choice, control_character, kind, number, read_at_most, shown, text, whole

MAX_BYTES = 1 << 20  # a sidecar is a few hundred bytes


def _three(*, positive: bool) -> Callable[[Any], tuple[float, float, float]]:
    def check(value: Any) -> tuple[float, float, float]:
        if not isinstance(value, list) or len(value) != 3:
            raise ValueError(f"must be a list of 3 numbers (R, G, B), got {shown(value)}")
        numbers = tuple(number(v) for v in value)
        if positive and min(numbers) <= 0:
            raise ValueError(f"must be 3 numbers above 0, got {shown(value)}")
        return numbers[0], numbers[1], numbers[2]

    return check


def _file_name(value: Any) -> str:
    """A file name: a NUL made os.stat raise ValueError (a traceback), an escape would reach the terminal."""
    name = text(value)
    bad = control_character(name)
    if bad is not None:
        raise ValueError(f"must be a file name without control characters, got '{bad}' in it")
    return name


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "encoder": _file_name, "decoder": _file_name, "layout": choice("sam", "sam2"), "input_size": whole(64, 4096),
    "resize": choice("longest", "stretch"), "mean": _three(positive=False), "std": _three(positive=True),
    "mask_threshold": number,
}


def read_prompt_section(path: Path, *, top_keys: tuple[str, ...], prompt_keys: tuple[str, ...],
                        ) -> tuple[str, dict[str, Any]]:
    """(the model's name, the checked `prompt:` values present). SidecarError names the file and the key."""
    data = _load(path)
    for key in data:
        if key not in top_keys:
            raise SidecarError(f"{path}: unknown key '{_key(key)}' (expected one of: {', '.join(top_keys)})")
    section = data.get("prompt")
    if not isinstance(section, dict):
        raise SidecarError(f"{path}: 'prompt' must be a mapping (encoder, decoder, ...), got {kind(section)}")
    values: dict[str, Any] = {}
    for key, raw in section.items():
        if key not in prompt_keys:
            raise SidecarError(f"{path}: unknown key 'prompt.{_key(key)}' (expected one of: {', '.join(prompt_keys)})")
        try:
            values[key] = _CHECKS[key](raw)
        except (ValueError, TypeError) as exc:
            raise SidecarError(f"{path}: 'prompt.{key}' {exc}") from None
    name = data.get("name")
    return (name.strip() if isinstance(name, str) and name.strip() else path.stem), values


def _key(key: Any) -> str:
    return key if isinstance(key, str) and len(key) <= 60 else shown(key)


def _load(path: Path) -> dict[Any, Any]:
    try:
        raw = read_at_most(path, MAX_BYTES)
    except OSError as exc:
        raise SidecarError(f"{path}: cannot read the prompt model's sidecar ({exc.strerror or exc})") from exc
    if raw is None:
        raise SidecarError(f"{path}: sidecar too large (over 1 MiB; a sidecar is a short YAML file)")
    try:  # the one loader (app.guard.yaml_load): no anchors or aliases, a depth cap, duplicate keys refused
        data = load_yaml(raw, source=str(path), what="sidecar", limit=MAX_BYTES)
    except YAMLRefused as exc:
        raise SidecarError(str(exc)) from None
    if not isinstance(data, dict):
        raise SidecarError(f"{path}: a prompt model's sidecar must be a mapping with a 'prompt:' section")
    return data
