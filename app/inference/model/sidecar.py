"""The sidecar `<model>.yaml`: parse and validate it into plain values, naming the file and key on any error.

Only the keys a user wrote come back (as a flat dict `"input.size" -> value`), so the spec can tell
"from the sidecar" apart from "detected" and "default". Each key's check returns the clean value or raises
ValueError("must be …, got …"), which the walk prefixes with the file and key: the 2D keys, the 3D ones (input.patch,
spacing, axes, normalize, tta; app.inference.model.spec3d says which a model needs), the `verdict:` section
(`fail_if` and `review_if` rule lists, each rule one mapping of a single kind, and `calibrated`, the provenance
seglens-cli calibrate writes; class names are resolved to the model's classes later, by the spec) and the
`detect:` section (a YOLO head's conf, iou, max_det, agnostic and classes: app.inference.model.yolo_options).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from app.errors import SidecarError
from app.guard.yaml_load import YAMLRefused, load_yaml
from app.inference.model import validators
from app.inference.model.codes import ClassCode, CodeError, parse_class_code
from app.inference.model.instance_rules import INSTANCE_KINDS, class_limits, extra_checks
from app.inference.model.labels import read_labels
from app.inference.model.nnunet_recipe import NNUNET_KEYS
from app.inference.model.tiles import BLENDS, MAX_OVERLAP
from app.inference.model.validators import (
    Check,
    KeyedValueError,
    boolean,
    choice,
    class_name,
    fraction,
    kind,
    number,
    read_at_most,
    short_key,
    shown,
    whole,
)
from app.inference.model.validators import text as nonempty_text

MAX_SIDE = 16384  # a working size beyond this is a typo, and would ask for tens of GB
MAX_SIDECAR_BYTES = 1 << 20  # real sidecars are a few hundred bytes; a bigger one is not a sidecar


def _switch(value: Any) -> str:
    """auto | on | off — YAML reads a bare on/off as a boolean, so booleans are accepted too."""
    if isinstance(value, bool):
        return "on" if value else "off"
    switch: str = choice("auto", "on", "off")(value)
    return switch


# key -> check; the sidecar's `runtime:` section and `--runtime KEY=VALUE` share it.
RUNTIME_KEYS = {
    "intra_op_threads": whole(0, 1024),
    "allow_spinning": boolean,
    "cudnn_conv_algo_search": choice("HEURISTIC", "EXHAUSTIVE", "DEFAULT"),
    "arena_extend_strategy": choice("kNextPowerOfTwo", "kSameAsRequested"),
    "gpu_mem_limit_mb": whole(0, 1 << 24),
    "prefer_nhwc": boolean,
    "use_tf32": boolean,
    "tensorrt": boolean,
    "tensorrt_fp16": boolean,
    "device_argmax": _switch,
    "io_binding": _switch,
}


def find_sidecar(model_path: Path) -> Path | None:
    """`<model>.yaml` (or `.yml`) beside the model, when present. Present but not a regular file (a FIFO, a
    folder) it is still returned: reading it then refuses it in one line, rather than running without it."""
    for suffix in (".yaml", ".yml"):
        candidate = model_path.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def load_sidecar(path: Path) -> dict[str, Any]:
    """Read and validate a sidecar; returns `{"input.size": (512, 512), ...}` for the keys present. The YAML is
    parsed by the one loader (app.guard.yaml_load: no anchors or aliases, a depth cap, duplicate keys refused)."""
    text = _read_text(path)
    try:
        data = load_yaml(text, source=str(path), what="sidecar", limit=MAX_SIDECAR_BYTES)
    except YAMLRefused as exc:
        raise SidecarError(str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SidecarError(f"{path}: the sidecar must be a mapping of keys (name, task, input, ...)")
    return _with_classes_file(_validate(data, _SCHEMA, prefix="", path=path), path)


def _with_classes_file(values: dict[str, Any], path: Path) -> dict[str, Any]:
    """`classes_file:` read (relative to the sidecar) into `classes`, its resolved path kept under its own key."""
    if "classes_file" not in values:
        return values
    if "classes" in values:
        raise SidecarError(f"{path}: 'classes_file' and 'classes' both given: use one")
    labels = _beside(path, values["classes_file"])
    try:
        names = read_labels(labels)
    except ValueError as exc:
        raise SidecarError(f"{path}: 'classes_file' {exc}") from None
    return {**values, "classes_file": labels, "classes": tuple((name, _UNSET, None) for name in names)}


def _beside(path: Path, name: str) -> Path:
    """`classes_file` as a file in the sidecar's folder or below, as documented: a relative path without `..`
    whose target, symlinks followed, stays inside the folder (a model must not read the user's other files)."""
    relative = Path(name)
    if relative.anchor or ".." in relative.parts:
        raise SidecarError(f"{path}: 'classes_file' must name a file beside the sidecar (in its folder or below, "
                           f"without '..'), got {shown(name)}")
    labels = path.parent / relative
    if not labels.resolve().is_relative_to(path.parent.resolve()):
        raise SidecarError(f"{path}: 'classes_file' {labels} leads outside the sidecar's folder (a symbolic link)")
    return labels


def _read_text(path: Path) -> str:
    """The sidecar's text, refused when it is too large (read at most one byte past the limit), not UTF-8 or
    binary."""
    try:
        data = read_at_most(path, MAX_SIDECAR_BYTES)
    except OSError as exc:
        raise SidecarError(f"{path}: cannot read sidecar ({exc.strerror or exc})") from exc
    if data is None:
        raise SidecarError(f"{path}: sidecar too large (over {MAX_SIDECAR_BYTES >> 20} MiB; a sidecar is a "
                           "short YAML file)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SidecarError(f"{path}: sidecar is not UTF-8 text") from exc
    if "\x00" in text:
        raise SidecarError(f"{path}: sidecar is not text (it contains NUL bytes)")
    return text


def _validate(data: dict[Any, Any], schema: dict[str, Any], *, prefix: str, path: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, raw in data.items():
        full = f"{prefix}{key}"
        rule = schema.get(key) if isinstance(key, str) else None
        if rule is None:
            known = ", ".join(schema)
            raise SidecarError(f"{path}: unknown key '{short_key(full)}' (expected one of: {known})")
        if isinstance(rule, dict):
            if raw is None:
                continue
            if not isinstance(raw, dict):
                raise SidecarError(f"{path}: '{full}' must be a mapping, got {kind(raw)}")
            values.update(_validate(raw, rule, prefix=f"{full}.", path=path))
            continue
        try:
            values[full] = rule(raw)
        except KeyedValueError as exc:  # a problem inside a list item: `verdict.fail_if[2].class`
            raise SidecarError(f"{path}: '{full}{exc.subkey}' {exc}") from exc
        except (ValueError, TypeError) as exc:
            raise SidecarError(f"{path}: '{full}' {exc}") from exc
    return values


def _size(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_SIDE for v in value)):
        raise ValueError(f"must be [height, width] in pixels (1 to {MAX_SIDE}) or null, got {shown(value)}")
    return int(value[0]), int(value[1])


def overlap_2d(value: Any) -> float:
    """A 2D tile overlap, 0 to MAX_OVERLAP (a 3D model's patches take any below 1: app.inference.model.spec3d)."""
    share = number(value)
    if not 0.0 <= share <= MAX_OVERLAP:
        raise ValueError(f"must be at least 0 and at most {MAX_OVERLAP} (the share of a tile overlapping its "
                         f"neighbour; nearer 1 the stride shrinks to a pixel), got {shown(value)}")
    return share


def _tile_size(value: Any) -> tuple[int, int]:
    size = _size(value)
    if size is None:
        raise ValueError(f"must be [height, width] in pixels (1 to {MAX_SIDE}), got null")
    return size


def _numbers(*, nonzero: bool = False) -> Check:
    def check(value: Any) -> tuple[float, ...]:
        items = value if isinstance(value, list | tuple) else [value]
        if not items or len(items) > 4:
            raise ValueError(f"must be a number or a list of 1 or 3 numbers, got {shown(value)}")
        numbers = tuple(number(v) for v in items)
        if nonzero and any(n == 0 for n in numbers):
            raise ValueError("must not contain 0 (it divides)")
        return numbers

    return check


def _pair(shape: str, *, positive_second: bool = False, increasing: bool = False) -> Check:
    def check(value: Any) -> tuple[float, float] | None:
        if value is None:
            return None
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise ValueError(f"must be {shape} or null, got {shown(value)}")
        a, b = number(value[0]), number(value[1])
        if positive_second and b <= 0:
            raise ValueError(f"must be {shape} with a width > 0, got {shown(value)}")
        if increasing and b <= a:
            raise ValueError(f"must be {shape} with low < high, got {shown(value)}")
        return a, b

    return check


def parse_color(value: Any) -> tuple[int, int, int] | None:
    """'#rrggbb', '#rgb', [r, g, b] or null/none/transparent (not painted)."""
    if value is None or (isinstance(value, str) and value.lower() in ("none", "transparent")):
        return None
    if isinstance(value, str) and value.startswith("#") and len(value) in (4, 7):
        digits = value[1:] if len(value) == 7 else "".join(c * 2 for c in value[1:])
        try:
            return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)
        except ValueError:
            pass
    elif (isinstance(value, list | tuple) and len(value) == 3
          and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in value)):
        return int(value[0]), int(value[1]), int(value[2])
    raise ValueError(f"must be '#rrggbb', [r, g, b] (0-255) or null, got {shown(value)}")


_UNSET = object()


def _classes(value: Any) -> tuple[tuple[str, Any, ClassCode | None], ...]:
    """A list of `{name, color, code}` mappings (or plain names) as (name, color, code). Color `_UNSET` = use the
    default palette; code None = app.inference.model.codes.DEFAULT_CODE."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a non-empty list of {{name: ..., color: ...}}, got {kind(value)}")
    parsed = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            raise ValueError(f"[{index}] must be a name or {{name: ..., color: ...}}, got {kind(item)}")
        unknown = sorted(str(k) for k in set(item) - {"name", "color", "code"})
        if unknown:
            raise ValueError(f"[{index}] has unknown key '{short_key(unknown[0])}' (expected name, color, code)")
        parsed.append((_field(index, "name", class_name, item.get("name")),
                       _field(index, "color", parse_color, item["color"]) if "color" in item else _UNSET,
                       _class_code(index, item["code"]) if "code" in item else None))
    return tuple(parsed)


def _class_code(index: int, value: Any) -> ClassCode:
    try:
        return parse_class_code(value)
    except CodeError as exc:  # `classes[1].code.type` in the message
        raise KeyedValueError(f"[{index}].code.{exc.part}", str(exc)) from exc
    except ValueError as exc:
        raise KeyedValueError(f"[{index}].code", str(exc)) from exc


def _field(index: int, field: str, check: Check, value: Any) -> Any:
    try:
        return check(value)
    except ValueError as exc:
        raise ValueError(f"[{index}].{field} {exc}") from exc


# -- the 3D keys -----------------------------------------------------------------------------------------------

MAX_PATCH_SIDE = 2048  # a 3D patch side in voxels (nnU-Net's are 28 to 320)
MAX_SPACING_MM = 1000.0


def patch_size(value: Any) -> tuple[int, int, int]:
    """`input.patch`: [D, H, W] voxels, each 1 to MAX_PATCH_SIDE."""
    if (not isinstance(value, list | tuple) or len(value) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_PATCH_SIDE for v in value)):
        raise ValueError(f"must be [D, H, W] in voxels (1 to {MAX_PATCH_SIDE} each), got {shown(value)}")
    return int(value[0]), int(value[1]), int(value[2])


def spacing_mm(value: Any) -> tuple[float, float, float] | None:
    """`input.spacing`: [d, h, w] mm, each above 0, or null (the volume's own spacing)."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ValueError(f"must be [d, h, w] in mm (or null: the volume's own), got {shown(value)}")
    steps = tuple(number(v) for v in value)
    if not all(0.0 < v <= MAX_SPACING_MM for v in steps):
        raise ValueError(f"must be [d, h, w] in mm, each above 0 and at most {MAX_SPACING_MM:g}, got {shown(value)}")
    return steps[0], steps[1], steps[2]


_OPPOSITES = ("RL", "AP", "SI")


def axes_code(value: Any) -> str:
    """`native` or a 3-letter orientation code (RAS, LPS, SPL …): each of R/L, A/P and S/I exactly once."""
    code = value.strip() if isinstance(value, str) else ""
    if code.lower() == "native":
        return "native"
    code = code.upper()
    if len(code) == 3 and all(sum(letter in pair for letter in code) == 1 for pair in _OPPOSITES):
        return code
    raise ValueError(f"must be native or a 3-letter orientation code with each of R/L, A/P and S/I once (RAS, LPS, "
                     f"SPL, ...), got {shown(value)}")


def tta_axes(value: Any) -> tuple[int, ...]:
    """`mirror` (all three axes), `{mirror: [0, 2]}` (those axes: 0 = D, 1 = H, 2 = W), or null/false (off)."""
    if value is None or value is False:
        return ()
    if value == "mirror":
        return 0, 1, 2
    if not isinstance(value, dict) or set(value) != {"mirror"}:
        raise ValueError(f"must be mirror or {{mirror: [axes]}} (0 = D, 1 = H, 2 = W), got {shown(value)}")
    axes = value["mirror"]
    if (not isinstance(axes, list) or not 1 <= len(axes) <= 3
            or not all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a <= 2 for a in axes)
            or len(set(axes)) != len(axes)):
        raise ValueError(f"must mirror 1 to 3 different axes among 0 (D), 1 (H), 2 (W), got {shown(axes)}")
    return tuple(sorted(axes))


def positive(value: Any) -> float:
    """A finite number above 0 (a standard deviation: it divides)."""
    amount = number(value)
    if amount <= 0:
        raise ValueError(f"must be a number above 0, got {shown(value)}")
    return amount


def clip_range(value: Any) -> tuple[float, float] | None:
    """`input.normalize.clip`: [lo, hi] intensities (HU) with lo < hi, or null (no clip)."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"must be [lo, hi] or null, got {shown(value)}")
    low, high = number(value[0]), number(value[1])
    if high <= low:
        raise ValueError(f"must be [lo, hi] with low < high, got {shown(value)}")
    return low, high


# `input.normalize`: its keys' checks; which of them a kind needs is app.inference.model.spec3d's to say
NORMALIZE_KEYS = {
    "kind": choice("ct", "zscore"),
    "clip": clip_range,
    "mean": number,
    "std": positive,
    "nonzero": boolean,
}


# -- the verdict section ---------------------------------------------------------------------------------------

def _millilitres(value: Any) -> float:
    ml = number(value)
    if ml <= 0:
        raise ValueError(f"must be more than 0 (mL), got {shown(value)}")
    return ml


def calibrated(value: Any) -> dict[str, Any]:
    """`verdict.calibrated`: seglens-cli calibrate's provenance of the limits (a mapping, kept as written)."""
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping (written by seglens-cli calibrate), got {shown(value)}")
    return value


MAX_VERDICT_RULES = 64
_RULE_KEYS = {  # rule kind: (its keys, the check of its limit)
    "min_area_px": ({"class", "min_area_px"}, whole(1, 2**31 - 1)),
    "min_total_fraction": ({"class", "min_total_fraction"}, fraction),
    "min_component_ml": ({"class", "min_component_ml"}, _millilitres),  # volumes only; class optional
    "score_above": ({"score_above"}, number),  # a mapping of class names instead: an instance rule
    "top1_in": ({"top1_in"}, None),
    # on instances (app.inference.model.instance_rules): a limit, or a mapping of class names to limits
    **{kind: ({kind, *extra}, class_limits(kind)) for kind, extra in INSTANCE_KINDS.items()},
}


def rules(value: Any) -> tuple[dict[str, Any], ...]:
    """`verdict.fail_if` (and `verdict.review_if`): a list of rules, each one mapping of a single kind, or one such
    mapping alone (`{score_above: 0.7}`); class names are resolved to the model's classes later, by the spec."""
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value or len(value) > MAX_VERDICT_RULES:
        raise ValueError(f"must be a rule or a list of 1 to {MAX_VERDICT_RULES} rules, got {shown(value)}")
    return tuple(_verdict_rule(index, item) for index, item in enumerate(value))


def _verdict_rule(index: int, item: Any) -> dict[str, Any]:
    where = f"[{index}]"
    kinds = [k for k in _RULE_KEYS if isinstance(item, dict) and k in item]
    if len(kinds) != 1:
        raise KeyedValueError(where, f"must be one rule: {{class: ..., min_area_px: ...}}, {{class: ..., "
                                     f"min_total_fraction: ...}}, {{min_component_ml: ...}}, {{score_above: ...}} or "
                                     f"{{top1_in: [...]}}, or on instances {{count_above: ...}}, "
                                     f"{{max_area_px: ...}}, {{max_area_mm2: ...}}, got {shown(item)}")
    rule_kind = kinds[0]
    keys, check = _RULE_KEYS[rule_kind]
    unknown = sorted(str(k) for k in set(item) - keys)
    if unknown:
        raise KeyedValueError(where, f"has unknown key '{short_key(unknown[0])}' (a {rule_kind} rule takes "
                                     f"{', '.join(sorted(keys))})")
    if "class" in keys and "class" not in item and rule_kind != "min_component_ml":
        raise KeyedValueError(where, f"needs 'class' (the class the {rule_kind} rule measures)")
    rule: dict[str, Any] = {"kind": rule_kind}
    try:
        if rule_kind == "top1_in":
            names = item["top1_in"]
            if not isinstance(names, list) or not names or len(names) > 1000:
                raise ValueError(f"must be a list of 1 to 1000 class names, got {shown(names)}")
            rule["classes"] = tuple(nonempty_text(n) for n in names)
        elif rule_kind in INSTANCE_KINDS or (rule_kind == "score_above" and isinstance(item[rule_kind], dict)):
            rule["limits"] = class_limits(rule_kind)(item[rule_kind])  # resolved on an instance model only
        else:
            rule["limit"] = cast(Check, check)(item[rule_kind])  # only top1_in has no limit check
    except ValueError as exc:
        raise KeyedValueError(f"{where}.{rule_kind}", str(exc)) from exc
    for key, extra_check in extra_checks().items():
        if key in keys and key in item:
            try:
                rule[key] = extra_check(item[key])
            except ValueError as exc:
                raise KeyedValueError(f"{where}.{key}", str(exc)) from exc
    if "class" in keys and "class" in item:
        try:
            rule["class"] = nonempty_text(item["class"])
        except ValueError as exc:
            raise KeyedValueError(f"{where}.class", str(exc)) from exc
    return rule


MAX_KEPT_CLASSES = 1000


def kept_classes(value: Any) -> tuple[str | int, ...]:
    """`detect.classes`: the classes a YOLO head keeps, by name or by index (0 = the first class); the names are
    resolved to the model's classes later (app.inference.model.yolo_options)."""
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > MAX_KEPT_CLASSES:
        raise ValueError(f"must be a class name or index, or a list of 1 to {MAX_KEPT_CLASSES}, got {shown(value)}")
    kept: list[str | int] = []
    for index, item in enumerate(items):
        if isinstance(item, int) and not isinstance(item, bool) and 0 <= item < 1 << 16:
            kept.append(item)
        elif isinstance(item, str) and item.strip():
            kept.append(item.strip())
        else:
            raise KeyedValueError(f"[{index}]", f"must be a class name or an index from 0, got {shown(item)}")
    return tuple(kept)


_SCHEMA: dict[str, Any] = {
    "name": class_name,  # the model's name reaches DICOM descriptions and the terminal as class names do
    "task": choice("segmentation", "classification"),
    "input": {
        "size": _size,
        "resize": choice("stretch", "letterbox", "tile"),
        "size_divisor": whole(1, 1024),
        "color": choice("rgb", "bgr", "gray"),
        "scale": number,
        "mean": _numbers(),
        "std": _numbers(nonzero=True),
        "window": _pair("[center, width]", positive_second=True),
        "range": _pair("[low, high]", increasing=True),
        "modality": validators.modality_codes,  # trained on these: other images are warned (app.inference.image.fit)
        "color_matters": validators.boolean,  # 3 channels that tell classes apart by colour: gray is warned
        "patch": patch_size,  # 3D models: [D, H, W] of one patch (app.inference.model.spec3d)
        "spacing": spacing_mm,  # 3D: the model's target spacing in mm along the tensor's D, H, W
        "axes": axes_code,  # 3D: native or an orientation code
        "grid": choice("centre", "corner"),  # 3D: where a resampled grid's voxels lie (VolumeInputSpec.grid)
        "normalize": NORMALIZE_KEYS,  # 3D: ct (clip, then the training set's mean/std) or zscore (each volume's)
        "tta": tta_axes,  # 3D: mirroring test-time augmentation
        "tile": {  # resize: tile (app.inference.image.tiling); a 3D model's patches (overlap, blend, batch)
            "overlap": number,  # its range is the model's: 2D tiles overlap_2d, 3D patches [0, 1) (spec3d)
            "blend": choice(*BLENDS),
            "size": _tile_size,
            "max_pixels": whole(1, MAX_SIDE * MAX_SIDE * 16),
            "batch": whole(1, 256),
            "pad": choice("zeros", "edge"),  # 3D: how a volume smaller than the patch is padded (spec3d)
        },
    },
    "output": {
        "activation": choice("auto", "softmax", "sigmoid", "none"),
        "activate": choice("each_patch", "after_blend", "after_resample"),  # 3D: VolumeInputSpec.activate
        "threshold": fraction,
        "image_threshold": fraction,  # anomaly models: NG when the image score is at or above it
        "min_confidence": fraction,  # classification: uncertain when top-1 < it (app.inference.decide.verdict)
        "min_margin": fraction,  # classification: uncertain when top-1 − top-2 < it
    },
    "classes": _classes,
    "classes_file": nonempty_text,  # a labels file beside the sidecar (app.inference.model.labels)
    "runtime": RUNTIME_KEYS,
    "postprocess": {
        "min_area": whole(0, 2**31 - 1),
        "close_kernel": whole(0, 255),
        "top_k": whole(1, 1000),
    },
    "detect": {  # YOLO heads (app.inference.model.yolo_options): Ultralytics' predict arguments of the same names
        "conf": fraction,
        "iou": fraction,
        "max_det": whole(1, 100000),
        "agnostic": boolean,
        "classes": kept_classes,
    },
    "nnunet": NNUNET_KEYS,  # nnU-Net's prediction recipe (app.inference.model.nnunet_recipe), written by its import
    "verdict": {
        "fail_if": rules,
        "review_if": rules,  # the band: REVIEW when one holds and no fail rule does (app.inference.decide.band)
        "calibrated": calibrated,  # written by seglens-cli calibrate: where the limits came from (not judged)
    },
}

UNSET_COLOR = _UNSET
