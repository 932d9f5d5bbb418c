"""A MONAI bundle folder read: configs/inference.json (or .yaml), configs/metadata.json and models/model.pt.

Someone else's folder: every file through the reading gate (regular only, bounded, no link out of the bundle), JSON
with no NaN or Infinity, YAML through the one YAML loader. A bundle's config is a program for MONAI's ConfigParser —
`_target_` names any class and `$…` is Python that parser evaluates — so nothing here evaluates or instantiates
anything: only the parts inference needs are read (`network_def`, `preprocessing`, `inferer`, `postprocessing`),
references `@id` (and `$@id`) are looked up as plain values, a `_target_` must be one of the MONAI names SegLens
translates (records.PREPROCESSING, …), and any other `$` expression, `%` macro or `_requires_` is refused in one
line naming its place. The rest of the config (datalists, devices, handlers, `run`) is never read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from app.errors import ModelError
from app.guard.yaml_load import YAMLRefused, read_yaml
from app.runs.imports.monai.records import (
    CONFIG_NAMES,
    INFERERS,
    METADATA_NAME,
    NETWORKS,
    OPAQUE,
    POSTPROCESSING,
    PREPROCESSING,
    TORCHSCRIPT_NAME,
    WEIGHTS_NAME,
    Bundle,
    Component,
    Metadata,
)
from app.runs.imports.nnunet.folder import load_json

CONFIG_YAML_LIMIT = 4 << 20  # a bundle's inference config is a few KB; a datalist written into it, a few MB
MAX_TRANSFORMS = 200
_MAX_REFERENCES = 32  # a reference to a reference …: deeper is a circle
_SPECIAL = ("_target_", "_disabled_", "_desc_", "_mode_", "_requires_")
_DTYPE = re.compile(r"^\$(?:torch|np|numpy)\.(?:float16|float32|float64|int8|int16|int32|int64|uint8|bool)$")
_REFERENCE = re.compile(r"^\$?@([A-Za-z0-9_#:.\-]+)$")


class _Bad(Exception):
    """A value's problem; the caller names the config file."""


def read_bundle(folder: Path) -> Bundle:
    """The bundle at `folder`; ModelError in one line for anything missing, malformed or not translatable."""
    if not folder.is_dir():
        raise ModelError(f"{folder}: not a folder (a MONAI bundle: configs/inference.json, configs/metadata.json, "
                         "models/model.pt)")
    config_path = _config_path(folder)
    config = load_config(config_path, root=folder)
    metadata = _metadata(folder)
    weights = _weights(folder)
    parts = _Parts(config, config_path.relative_to(folder))
    return Bundle(path=folder, config=config_path, metadata=metadata, weights=weights,
                  network=parts.component("network_def", NETWORKS, "network"),
                  preprocessing=parts.pipeline("preprocessing", PREPROCESSING),
                  inferer=parts.component("inferer", INFERERS, "inferer"),
                  postprocessing=parts.pipeline("postprocessing", POSTPROCESSING, optional=True))


# --- the files ---------------------------------------------------------------------------------------------------

def _config_path(folder: Path) -> Path:
    for name in CONFIG_NAMES:
        path = folder / "configs" / name
        if path.exists() or path.is_symlink():
            return path
    raise ModelError(f"{folder / 'configs'}: no {' or '.join(CONFIG_NAMES)} (a MONAI bundle's inference config)")


def load_config(path: Path, *, root: Path) -> dict[str, object]:
    """A bundle config (JSON or YAML) as a mapping, through the reading gate beneath `root`."""
    if path.suffix.lower() == ".json":
        return load_json(path, root=root)
    try:
        document = read_yaml(path, limit=CONFIG_YAML_LIMIT, what="MONAI bundle config", root=root)
    except YAMLRefused as exc:
        raise ModelError(str(exc)) from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not isinstance(document, dict):
        raise ModelError(f"{path}: not a mapping of ids to values (a MONAI bundle config)")
    return document


def _metadata(folder: Path) -> Metadata:
    path = folder / "configs" / METADATA_NAME
    if not path.exists() and not path.is_symlink():
        raise ModelError(f"{path}: missing (a MONAI bundle describes itself and its network's input and output in "
                         "configs/metadata.json)")
    document = load_json(path, root=folder)
    try:
        return _metadata_of(document)
    except _Bad as exc:
        raise ModelError(f"{path}: {exc}") from None


def _metadata_of(document: Mapping[str, object]) -> Metadata:
    formats = _mapping(document.get("network_data_format", {}), "network_data_format")
    image = _mapping(_mapping(formats.get("inputs", {}), "network_data_format.inputs").get("image", {}),
                     "network_data_format.inputs.image")
    pred = _mapping(_mapping(formats.get("outputs", {}), "network_data_format.outputs").get("pred", {}),
                    "network_data_format.outputs.pred")
    channels = image.get("num_channels")
    if channels is not None and (not isinstance(channels, int) or isinstance(channels, bool) or channels < 1):
        raise _Bad(f"network_data_format.inputs.image.num_channels is {channels!r:.40}, not a count from 1")
    modality = image.get("modality")
    return Metadata(name=_text(document, "name"), version=_text(document, "version"), channels=channels,
                    modality=modality.strip().upper() if isinstance(modality, str) and modality.strip() else None,
                    channel_names=_channel_def(pred.get("channel_def")))


def _channel_def(value: object) -> tuple[str, ...] | None:
    """channel_def {"0": "background", "1": "spleen"}: names in channel order, or None when there is none."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise _Bad("network_data_format.outputs.pred.channel_def is not a mapping of channel numbers to names")
    if sorted(value) != sorted(str(i) for i in range(len(value))):
        raise _Bad(f"network_data_format.outputs.pred.channel_def's keys are {sorted(value)!r:.80}, not "
                   f"\"0\" … \"{len(value) - 1}\"")
    names = [value[str(i)] for i in range(len(value))]
    if not all(isinstance(name, str) and name.strip() for name in names):
        raise _Bad("network_data_format.outputs.pred.channel_def has a name that is not text")
    return tuple(str(name).strip() for name in names)


def _weights(folder: Path) -> Path:
    weights = folder / "models" / WEIGHTS_NAME
    if weights.exists() or weights.is_symlink():
        return weights
    if (folder / "models" / TORCHSCRIPT_NAME).exists():
        raise ModelError(f"{folder / 'models' / TORCHSCRIPT_NAME}: a TorchScript model is code that runs when it is "
                         f"loaded, and this bundle has no {WEIGHTS_NAME} (its weights as tensors): SegLens imports "
                         f"models/{WEIGHTS_NAME} with the config's network_def")
    raise ModelError(f"{weights}: missing (a MONAI bundle's weights, saved with torch.save)")


def _mapping(value: object, key: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise _Bad(f"{key} is not a mapping")
    return value


def _text(document: Mapping[str, object], key: str) -> str:
    value = document.get(key, "")
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise _Bad(f"{key} is {value!r:.40}, not text")
    return str(value).strip()


# --- the config's parts ------------------------------------------------------------------------------------------

class _Parts:
    """The config's values looked up by id, references followed, nothing evaluated."""

    def __init__(self, config: Mapping[str, object], name: Path) -> None:
        self.config, self.name = config, name

    def fail(self, where: str, problem: str) -> ModelError:
        return ModelError(f"{self.name} {where}: {problem}")

    def component(self, key: str, known: frozenset[str], what: str) -> Component:
        if key not in self.config:
            raise self.fail(key, f"missing (the {what} of the bundle's inference config)")
        value = self.value(self.config[key], key, depth=0)
        component = self._component(value, key, known, what)
        if component is None:
            raise self.fail(key, f"is disabled (_disabled_): the bundle has no {what}")
        return component

    def pipeline(self, key: str, known: frozenset[str], *, optional: bool = False) -> tuple[Component, ...]:
        """A Compose's transforms (or a plain list of them), disabled ones left out."""
        if key not in self.config:
            if optional:
                return ()
            raise self.fail(key, "missing (the transforms MONAI applies before the network)")
        value = self.reference(self.config[key], key, depth=0)
        where = key
        if isinstance(value, dict):
            target = self._target(value, key)
            if target != "Compose":
                raise self.fail(key, f"is {target}, not a Compose of transforms")
            odd = next((k for k in value if k not in (*_SPECIAL, "transforms", "map_items", "log_stats")), None)
            if odd is not None:
                raise self.fail(f"{key}#{odd}", "is an argument of Compose SegLens does not translate")
            where = f"{key}#transforms"
            value = self.reference(value.get("transforms", []), where, depth=0)
        if not isinstance(value, list) or len(value) > MAX_TRANSFORMS:
            raise self.fail(where, f"is not a list of up to {MAX_TRANSFORMS} transforms")
        found = (self._component(self.reference(item, f"{where}#{i}", depth=0), f"{where}#{i}", known, "transform")
                 for i, item in enumerate(value))
        return tuple(component for component in found if component is not None)

    def _component(self, value: object, where: str, known: frozenset[str], what: str) -> Component | None:
        if not isinstance(value, dict):
            raise self.fail(where, f"is not a {what} (a mapping with _target_)")
        name = self._target(value, where)
        if name not in known:
            raise self.fail(where, f"{what} {name} is not one SegLens translates (it knows "
                                   f"{', '.join(sorted(known))}): not imported")
        if self._disabled(value.get("_disabled_", False), where):
            return None
        if "_requires_" in value:
            raise self.fail(f"{where}#_requires_", "runs other config items first; SegLens does not evaluate them")
        mode = value.get("_mode_", "default")
        if mode != "default":
            raise self.fail(f"{where}#_mode_", f"is {mode!r:.40}; SegLens reads only components made the default "
                                               "way")
        if name in OPAQUE:
            return Component(name, {}, where)
        args = {str(k): self.value(v, f"{where}#{k}", depth=0) for k, v in value.items() if k not in _SPECIAL}
        return Component(name, args, where)

    def _target(self, value: Mapping[str, object], where: str) -> str:
        target = value.get("_target_")
        if not isinstance(target, str) or not target.strip():
            raise self.fail(where, "has no _target_ (the class MONAI would make)")
        parts = target.strip().split(".")
        if (len(parts) > 1 and parts[0] != "monai") or not all(part.isidentifier() for part in parts):
            raise self.fail(f"{where}#_target_", f"is {target!r:.80}, not one of MONAI's classes: SegLens does not "
                                                 "import other code")
        return parts[-1]

    def _disabled(self, value: object, where: str) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise self.fail(f"{where}#_disabled_", f"is {value!r:.60}, not true or false (SegLens evaluates no "
                                               "expression)")

    def value(self, value: object, where: str, *, depth: int) -> object:
        """`value` with every reference replaced by what it names; a `$` expression or `%` macro refused."""
        value = self.reference(value, where, depth=depth)
        if isinstance(value, dict):
            return {str(k): self.value(v, f"{where}#{k}", depth=depth) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, f"{where}#{i}", depth=depth) for i, v in enumerate(value)]
        return value

    def reference(self, value: object, where: str, *, depth: int) -> object:
        """What a reference (`@id`, `$@id`) names, followed; a dtype (`$torch.float32`) as its name; other
        values as they are (a `$` expression or `%` macro refused)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if _DTYPE.match(text):
            return text[1:]
        match = _REFERENCE.match(text)
        if match:
            if depth >= _MAX_REFERENCES:
                raise self.fail(where, f"references refer to each other more than {_MAX_REFERENCES} deep "
                                       "(a circle)")
            return self.reference(self._lookup(match.group(1), where), match.group(1), depth=depth + 1)
        if text.startswith("$"):
            raise self.fail(where, f"is a Python expression ({text:.80}), which SegLens never evaluates (a "
                                   "bundle's `$` code runs in MONAI's parser): write the value itself")
        if text.startswith("%"):
            raise self.fail(where, f"is a macro ({text:.80}) reading another file; SegLens reads only this config")
        if text.startswith("@"):
            raise self.fail(where, f"is a reference SegLens cannot follow ({text:.80})")
        return value

    def _lookup(self, ident: str, where: str) -> object:
        node: object = self.config
        for part in re.split(r"::|#", ident):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise self.fail(where, f"refers to @{ident}, which the config does not have")
        return node
