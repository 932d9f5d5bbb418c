"""A MONAI bundle's inference pipeline said in SegLens's sidecar keys: each transform, the inferer and the
post-processing mapped to the key that expresses it with the config place it came from, or refused in one line
naming it (and the config file) — never skipped. What SegLens does not yet do exactly as MONAI is listed as a gap
("not yet exact: …").

    LoadImage(d), EnsureChannelFirst(d), EnsureType(d), ToTensor(d), CastToType(d) float32, Identity(d): nothing
        to say (SegLens reads the volume as float32, channel first);
    Orientation(d) axcodes → input.axes (none: the file's voxel axes, which the graph transposes itself);
    Spacing(d) pixdim → input.spacing, its grid (the first voxel's centre kept) → input.grid corner;
    ScaleIntensityRange(d) → input.normalize ct (clip) or input.scale/mean/std;
    NormalizeIntensity(d) → input.normalize zscore (nonzero) or input.mean/std;
    SlidingWindowInferer → input.patch, input.tile (overlap, blend, batch);
    Activations(d) → output.activation, taken on the blended outputs (MONAI's inferer blends raw outputs) before
        or after Invertd as the bundle orders them → output.activate after_blend | after_resample; AsDiscrete(d)
        argmax / threshold → the labels; metadata.json's channel_def → classes; Invertd, SaveImage(d): SegLens maps
        the prediction back to the volume (on the same grid) and writes it itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from app.errors import ModelError
from app.runs.imports.monai.records import Bundle, Component
from app.runs.imports.nnunet.mapping import Mapped

_FLOAT32 = (None, "float32", "torch.float32", "np.float32", "numpy.float32")
_SIGMA = 0.125  # SegLens's Gaussian: sigma = patch / 8, MONAI's default sigma_scale
_MAX_PATCH = 1024
_D_ARGS = ("keys", "allow_missing_keys", "meta_keys", "meta_key_postfix")
Check = Callable[[object], bool]


@dataclass(frozen=True)
class Translated:
    """The sidecar's values and the network's shape the graph must be exported with."""

    mapped: Mapped
    native_order: bool  # no Orientation(d): MONAI's tensor is the file's voxel axes (i, j, k), SegLens's [k, j, i]
    in_channels: int
    out_channels: int
    patch: tuple[int, int, int]  # roi_size in MONAI's axis order (the network's input)


@dataclass
class _State:
    """What the preprocessing said so far, in MONAI's order."""

    bundle: Bundle
    values: dict[str, object] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    image_key: str | None = None
    pred_key: str | None = None  # post-processing's key (MONAI's "pred")
    axcodes: str | None = None
    pixdim: tuple[float, float, float] | None = None
    normalised: str | None = None  # the transform that set the normalisation

    def fail(self, component: Component, problem: str) -> ModelError:
        return ModelError(f"{self.bundle.shown(component.where)}: {component.name} {problem}")

    def source(self, component: Component, arg: str = "") -> str:
        return f"monai {self.bundle.shown(component.where)}{' ' + arg if arg else ''}"


def translate(bundle: Bundle) -> Translated:
    """`bundle`'s inference as sidecar keys; ModelError naming the first transform or value SegLens cannot
    express."""
    state = _State(bundle)
    state.values.update({"name": _name(bundle), "task": "segmentation"})
    state.sources["name"] = "monai configs/metadata.json name, version"
    in_channels, out_channels = _network_channels(bundle)
    for component in bundle.preprocessing:
        _PRE[component.name](state, component)
    if state.image_key is None:
        raise ModelError(f"{bundle.shown('preprocessing')}: no LoadImage(d): the pipeline does not read an image")
    native = state.axcodes is None
    patch = _inferer(state, bundle.inferer, native=native)
    _axes_and_spacing(state, native)
    if bundle.metadata.modality:
        state.values["input.modality"] = bundle.metadata.modality
        state.sources["input.modality"] = "monai configs/metadata.json network_data_format.inputs.image.modality"
    _postprocessing(state, out_channels)
    _classes(state, out_channels)
    mapped = Mapped(_ordered(state.values), state.sources, tuple(state.gaps))
    return Translated(mapped, native, in_channels, out_channels, patch)


def _name(bundle: Bundle) -> str:
    meta = bundle.metadata
    name = meta.name or bundle.path.resolve().name
    return f"{name} {meta.version} (MONAI bundle)" if meta.version else f"{name} (MONAI bundle)"


def _network_channels(bundle: Bundle) -> tuple[int, int]:
    args = bundle.network.args
    dims = args.get("spatial_dims", args.get("dimensions", 3))
    if dims != 3:
        raise ModelError(f"{bundle.shown(bundle.network.where)}: {bundle.network.name} spatial_dims is {dims!r:.20}; "
                         "SegLens imports 3D networks (spatial_dims 3)")
    found = []
    for key in ("in_channels", "out_channels"):
        value = args.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1000:
            raise ModelError(f"{bundle.shown(bundle.network.where)}: {bundle.network.name} {key} is "
                             f"{value!r:.20}, not a count from 1")
        found.append(value)
    if bundle.metadata.channels is not None and bundle.metadata.channels != found[0]:
        raise ModelError(f"{bundle.shown(bundle.network.where)}: in_channels {found[0]}, but configs/metadata.json "
                         f"says the image has {bundle.metadata.channels}")
    return found[0], found[1]


# --- checks of one component's arguments --------------------------------------------------------------------------

def _args(state: _State, component: Component, checks: Mapping[str, Check | None], *, dictionary: bool,
          post: bool = False) -> None:
    """Each argument known, and each value one SegLens expresses (`checks[name](value)`; None: any value)."""
    for name, value in component.args.items():
        if dictionary and name in _D_ARGS:
            continue
        if name not in checks:
            raise state.fail(component, f"argument {name} is not one SegLens translates: not imported")
        check = checks[name]
        if check is not None and not check(value):
            raise state.fail(component, f"{name} {value!r:.80} is not one SegLens expresses")
    if dictionary and post:
        _pred_keys(state, component)
    elif dictionary:
        _image_keys(state, component)


def _keys(state: _State, component: Component) -> list[str]:
    keys = component.args.get("keys")
    names = [keys] if isinstance(keys, str) else keys if isinstance(keys, list) else None
    if not names or not all(isinstance(k, str) for k in names):
        raise state.fail(component, f"keys {keys!r:.60} is not a key or a list of keys")
    return [str(name) for name in names]


def _pred_keys(state: _State, component: Component) -> None:
    names = _keys(state, component)
    state.pred_key = state.pred_key or names[0]
    if names != [state.pred_key]:
        raise state.fail(component, f"acts on {', '.join(names)}, not only on the prediction {state.pred_key!r}: "
                                    "not imported")


def _image_keys(state: _State, component: Component) -> None:
    names = _keys(state, component)
    if state.image_key is None:
        if len(names) != 1:
            raise state.fail(component, f"reads {len(names)} keys ({', '.join(map(str, names))}); SegLens's 3D "
                                        "models take one volume")
        state.image_key = str(names[0])
    elif names != [state.image_key]:
        raise state.fail(component, f"acts on {', '.join(map(str, names))}, not only on the image "
                                    f"{state.image_key!r}: not imported")


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _one_of(*allowed: object) -> Check:
    def check(value: object) -> bool:
        if isinstance(value, list) and value:
            return all(item in allowed for item in value)  # a per-key list of modes: each one allowed
        return value in allowed
    return check


def _is_none(value: object) -> bool:
    return value is None


def _dictionary(component: Component) -> bool:
    return component.name.endswith("d") and component.name not in ("CastToType",)


# --- preprocessing --------------------------------------------------------------------------------------------

def _load(state: _State, component: Component) -> None:
    if state.image_key is not None:
        raise state.fail(component, "reads the image a second time: not imported")
    _args(state, component, {"reader": _one_of(None, "NibabelReader", "ITKReader"), "image_only": _is_bool,
                             "dtype": _one_of(*_FLOAT32), "ensure_channel_first": _is_bool, "simple_keys": _is_bool,
                             "prune_meta_pattern": None, "prune_meta_sep": None, "expanduser": _is_bool,
                             "overwriting": _is_bool}, dictionary=_dictionary(component))
    if state.image_key is None:
        state.image_key = "image"


def _no_op(checks: Mapping[str, Check | None]) -> Callable[[_State, Component], None]:
    def translate_no_op(state: _State, component: Component) -> None:
        _after_load(state, component)
        _args(state, component, checks, dictionary=_dictionary(component))
    return translate_no_op


def _after_load(state: _State, component: Component) -> None:
    if state.image_key is None:
        raise state.fail(component, "comes before LoadImage(d): not imported")


def _orientation(state: _State, component: Component) -> None:
    _after_load(state, component)
    _args(state, component, {"axcodes": None, "as_closest_canonical": _one_of(False), "lazy": _one_of(False)},
          dictionary=_dictionary(component))
    code = component.args.get("axcodes")
    if not isinstance(code, str) or len(code) != 3 or sorted(_LINE.get(c, -1) for c in code.upper()) != [0, 1, 2]:
        raise state.fail(component, f"axcodes {code!r:.40} is not a 3-letter orientation code (RAS, LPS, …)")
    if state.pixdim is not None and len(set(state.pixdim)) > 1:
        raise state.fail(component, "comes after an anisotropic Spacing(d): the spacing of each axis would depend "
                                    "on each volume's own orientation")
    if state.axcodes is not None:
        raise state.fail(component, "orients the image a second time: not imported")
    state.axcodes = code.upper()
    state.sources["input.axes"] = state.source(component, "axcodes")


_LINE = {"R": 0, "L": 0, "A": 1, "P": 1, "S": 2, "I": 2}


def _spacing(state: _State, component: Component) -> None:
    _after_load(state, component)
    _args(state, component, {"pixdim": None, "mode": _one_of("bilinear", 1), "padding_mode": _one_of("border"),
                             "align_corners": _one_of(False), "diagonal": _one_of(False),
                             "scale_extent": _one_of(False), "recompute_affine": _is_bool,
                             "min_pixdim": _is_none, "max_pixdim": _is_none, "dtype": None, "lazy": _one_of(False)},
          dictionary=_dictionary(component))
    pixdim = component.args.get("pixdim")
    if (not isinstance(pixdim, list) or len(pixdim) != 3
            or not all(_is_number(v) and 0 < float(v) <= 100 for v in pixdim)):
        raise state.fail(component, f"pixdim {pixdim!r:.60} is not 3 spacings in mm above 0")
    if state.pixdim is not None:
        raise state.fail(component, "resamples the image a second time: not imported")
    state.pixdim = (float(pixdim[0]), float(pixdim[1]), float(pixdim[2]))
    state.sources["input.spacing"] = state.source(component, "pixdim")
    state.values["input.grid"] = "corner"
    state.sources["input.grid"] = state.source(component, "(align_corners false, scale_extent false: the first "
                                                          "voxel's centre kept, stepping by pixdim)")


def _scale_range(state: _State, component: Component) -> None:
    _after_load(state, component)
    _args(state, component, {"a_min": _is_number, "a_max": _is_number, "b_min": lambda v: v is None or _is_number(v),
                             "b_max": lambda v: v is None or _is_number(v), "clip": _is_bool,
                             "dtype": _one_of(*_FLOAT32)}, dictionary=_dictionary(component))
    args = component.args
    a_min, a_max = float(args["a_min"]), float(args["a_max"])  # type: ignore[arg-type]
    b_min, b_max = args.get("b_min"), args.get("b_max")
    scaled = b_min is not None and b_max is not None
    low, high = (float(b_min), float(b_max)) if scaled else (0.0, 1.0)  # type: ignore[arg-type]
    if a_max == a_min or (scaled and high <= low):
        raise state.fail(component, f"maps [{a_min:g}, {a_max:g}] to [{low:g}, {high:g}]: SegLens expresses a range "
                                    "of a_min < a_max (or above) onto b_min < b_max")
    std = (a_max - a_min) / (high - low)
    mean = a_min - low * std
    clip = bool(args.get("clip", False)) and scaled
    _set_normalize(state, component, "clip, a_min, a_max, b_min, b_max")
    if clip:
        state.values["input.normalize"] = {"kind": "ct", "clip": [min(a_min, a_max), max(a_min, a_max)],
                                           "mean": mean, "std": std}
        if std < 0:
            raise state.fail(component, "maps a_min above a_max with a clip: not expressible")
        if state.pixdim is not None:
            state.gaps.append("intensity clip: MONAI clips after resampling; SegLens clips each slice before it is "
                              "resampled (they differ only next to the clip's bounds)")
    else:
        state.values.update({"input.scale": 1.0 if std > 0 else -1.0, "input.mean": [mean if std > 0 else -mean],
                             "input.std": [abs(std)]})


def _normalize_intensity(state: _State, component: Component) -> None:
    _after_load(state, component)
    _args(state, component, {"subtrahend": lambda v: v is None or _is_number(v),
                             "divisor": lambda v: v is None or (_is_number(v) and v != 0), "nonzero": _is_bool,
                             "channel_wise": _is_bool, "dtype": _one_of(*_FLOAT32)},
          dictionary=_dictionary(component))
    args = component.args
    subtrahend, divisor, nonzero = args.get("subtrahend"), args.get("divisor"), bool(args.get("nonzero", False))
    _set_normalize(state, component, "nonzero, subtrahend, divisor")
    if subtrahend is None and divisor is None:
        state.values["input.normalize"] = {"kind": "zscore", "nonzero": nonzero}
        if state.pixdim is not None:
            state.gaps.append("z-score: MONAI measures the mean and standard deviation on the resampled volume; "
                              "SegLens on the volume as read (the two differ by the interpolation's smoothing)")
        return
    if subtrahend is None or divisor is None or nonzero:
        raise state.fail(component, "mixes given and measured statistics (subtrahend or divisor alone, or with "
                                    "nonzero): not expressible")
    divide = float(divisor)  # type: ignore[arg-type]
    state.values.update({"input.scale": 1.0 if divide > 0 else -1.0,
                         "input.mean": [float(subtrahend) * (1.0 if divide > 0 else -1.0)],  # type: ignore[arg-type]
                         "input.std": [abs(divide)]})


def _set_normalize(state: _State, component: Component, args: str) -> None:
    if state.normalised is not None:
        raise state.fail(component, f"normalises the intensities after {state.normalised}: SegLens expresses one "
                                    "normalisation")
    state.normalised = f"{component.name} ({component.where})"
    source = state.source(component, args)
    for key in ("input.normalize", "input.scale", "input.mean", "input.std"):
        state.sources[key] = source


def _crop_foreground(state: _State, component: Component) -> None:
    raise state.fail(component, "crops each volume to the box around its foreground before the network runs; "
                                "SegLens runs the whole volume (not expressible in a sidecar): not imported")


_PASS = {"dtype": _one_of(*_FLOAT32), "data_type": _one_of(None, "tensor", "numpy"), "device": None,
         "wrap_sequence": _is_bool, "track_meta": _is_bool, "channel_dim": _one_of(None, "no_channel"),
         "strict_check": _is_bool}
_PRE: dict[str, Callable[[_State, Component], None]] = {
    "LoadImage": _load, "LoadImaged": _load,
    "EnsureChannelFirst": _no_op(_PASS), "EnsureChannelFirstd": _no_op(_PASS),
    "Orientation": _orientation, "Orientationd": _orientation,
    "Spacing": _spacing, "Spacingd": _spacing,
    "ScaleIntensityRange": _scale_range, "ScaleIntensityRanged": _scale_range,
    "NormalizeIntensity": _normalize_intensity, "NormalizeIntensityd": _normalize_intensity,
    "CropForeground": _crop_foreground, "CropForegroundd": _crop_foreground,
    **{name: _no_op(_PASS) for name in ("EnsureType", "EnsureTyped", "ToTensor", "ToTensord", "CastToType",
                                        "CastToTyped", "Identity", "Identityd")},
}


# --- the inferer ------------------------------------------------------------------------------------------------

def _inferer(state: _State, component: Component, *, native: bool) -> tuple[int, int, int]:
    """roi_size, overlap, mode, sw_batch_size: the patch (MONAI's axis order) and input.tile."""
    if component.name != "SlidingWindowInferer":
        raise state.fail(component, "runs the network on the whole volume at once; SegLens runs 3D models on "
                                    "patches (a SlidingWindowInferer): not imported")
    _args(state, component, {
        "roi_size": None, "sw_batch_size": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 256,
        "overlap": None, "mode": _one_of("constant", "gaussian"), "sigma_scale": _is_sigma,
        "padding_mode": _one_of("constant"), "cval": lambda v: v == 0, "sw_device": None, "device": None,
        "progress": None, "cache_roi_weight_map": None, "cpu_thresh": None, "buffer_steps": None,
        "buffer_dim": None, "with_coord": _one_of(False)}, dictionary=False)
    args = component.args
    roi = args.get("roi_size")
    if (not isinstance(roi, list) or len(roi) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= _MAX_PATCH for v in roi)):
        raise state.fail(component, f"roi_size {roi!r:.60} is not 3 patch sides from 1 to {_MAX_PATCH} voxels")
    patch = (int(roi[0]), int(roi[1]), int(roi[2]))
    overlap = _overlap(state, component, args.get("overlap", 0.25))
    where = state.source(component)
    state.values["input.patch"] = list(reversed(patch)) if native else list(patch)
    state.sources["input.patch"] = f"{where} roi_size" + (" (reversed: the file's voxel axes k, j, i)" if native
                                                          else "")
    state.values["input.tile.overlap"] = overlap
    state.values["input.tile.blend"] = args.get("mode", "constant")
    state.values["input.tile.batch"] = args.get("sw_batch_size", 1)
    state.values["input.tile.pad"] = "zeros"
    state.sources["input.tile"] = f"{where} overlap, mode, sw_batch_size (padding_mode constant, cval 0: zeros)"
    return patch


def _is_sigma(value: object) -> bool:
    """MONAI's sigma_scale SegLens's Gaussian uses: one number, or one per axis, all 0.125."""
    return value == _SIGMA or (isinstance(value, list) and len(value) == 3 and all(v == _SIGMA for v in value))


def _overlap(state: _State, component: Component, value: object) -> float:
    if isinstance(value, list) and len(value) == 3 and len(set(map(str, value))) == 1:
        value = value[0]
    if not _is_number(value) or not 0 <= float(value) < 1:  # type: ignore[arg-type]
        raise state.fail(component, f"overlap {value!r:.60} is not one share from 0 to below 1 for every axis")
    return float(value)  # type: ignore[arg-type]


def _axes_and_spacing(state: _State, native: bool) -> None:
    if native:
        state.values["input.axes"] = "native"
        state.sources["input.axes"] = ("no Orientation(d) in monai preprocessing: MONAI's tensor is the file's voxel "
                                       "axes (i, j, k); the graph transposes SegLens's [k, j, i] into them")
    else:
        state.values["input.axes"] = state.axcodes
    if state.pixdim is None:
        state.values["input.spacing"] = None
        state.sources["input.spacing"] = "no Spacing(d) in monai preprocessing: each volume's own spacing"
    else:
        state.values["input.spacing"] = list(reversed(state.pixdim)) if native else list(state.pixdim)


# --- post-processing -------------------------------------------------------------------------------------------

def _postprocessing(state: _State, out_channels: int) -> None:
    activation, threshold, inverted, activate = "none", None, False, "after_blend"
    for component in state.bundle.postprocessing:
        if component.name == "Activations" or component.name == "Activationsd":
            activation = _activation(state, component)
            activate = "after_resample" if inverted else "after_blend"
            state.sources["output.activate"] = (f"{state.source(component)}, "
                                                f"{'after' if inverted else 'before'} Invertd: MONAI's inferer "
                                                "blends the network's raw outputs")
        elif component.name in ("AsDiscrete", "AsDiscreted"):
            threshold = _discrete(state, component, activation)
        elif component.name == "Invertd":
            inverted = True
        elif component.name in _PRE:  # EnsureType(d) and the like on the prediction
            _args(state, component, _PASS, dictionary=_dictionary(component), post=True)
    if activation == "none":  # MONAI's argmax of the blended raw outputs, resampled back: softmax keeps its order
        activation, activate = ("softmax" if out_channels > 1 else "sigmoid"), "after_resample"
        state.sources["output.activate"] = ("no Activations(d) in monai postprocessing: the labels decided on the "
                                            "blended raw outputs mapped back")
        state.gaps.append(f"activation: the bundle's post-processing has no Activations(d); MONAI keeps the blended "
                          f"network outputs, SegLens their {activation} (the same argmax)")
    if activation == "softmax" and out_channels == 1:
        raise ModelError(f"{state.bundle.shown('postprocessing')}: softmax over one output channel is constant; "
                         "not imported")
    state.values["output.activation"] = activation
    state.sources.setdefault("output.activation", "no Activations(d) in monai postprocessing: SegLens's default")
    state.values["output.activate"] = activate
    state.sources.setdefault("output.activate", "MONAI's inferer blends the network's raw outputs")
    if threshold is not None:
        state.values["output.threshold"] = threshold
    if (state.pixdim is not None or state.axcodes is not None) and not inverted:
        state.gaps.append("no Invertd in the bundle's post-processing: MONAI's prediction stays on the resampled, "
                          "reoriented grid; SegLens maps it back onto the volume's own")


def _activation(state: _State, component: Component) -> str:
    _args(state, component, {"softmax": _is_bool, "sigmoid": _is_bool, "other": _is_none, "dim": _one_of(0)},
          dictionary=_dictionary(component), post=True)
    softmax, sigmoid = component.args.get("softmax", False), component.args.get("sigmoid", False)
    if softmax and sigmoid:
        raise state.fail(component, "asks for both softmax and sigmoid: not expressible")
    state.sources["output.activation"] = state.source(component, "softmax, sigmoid")
    return "softmax" if softmax else "sigmoid" if sigmoid else "none"


def _discrete(state: _State, component: Component, activation: str) -> float | None:
    _args(state, component, {"argmax": _is_bool, "to_onehot": _is_none, "threshold": lambda v: v is None or (
        _is_number(v) and 0 <= float(v) <= 1), "rounding": _is_none, "dim": _one_of(0), "keepdim": _is_bool,  # type: ignore[arg-type]
        "dtype": None}, dictionary=_dictionary(component), post=True)
    argmax, threshold = bool(component.args.get("argmax", False)), component.args.get("threshold")
    if argmax == (threshold is not None):
        raise state.fail(component, "must take either the argmax or a threshold to give labels: not expressible")
    if threshold is not None:
        if activation != "sigmoid":
            raise state.fail(component, "thresholds outputs that are not sigmoid probabilities: not expressible")
        state.sources["output.threshold"] = state.source(component, "threshold")
        return float(threshold)  # type: ignore[arg-type]
    return None


def _classes(state: _State, out_channels: int) -> None:
    names = state.bundle.metadata.channel_names
    if names is None:
        state.sources["classes"] = ("monai configs/metadata.json has no network_data_format.outputs.pred.channel_def: "
                                    "SegLens's default names")
        return
    if out_channels == 1:
        state.sources["classes"] = ("one output channel (a sigmoid map): SegLens's background and foreground; "
                                    "monai configs/metadata.json channel_def not used")
        return
    if len(names) != out_channels:
        raise ModelError(f"{state.bundle.path / 'configs' / 'metadata.json'}: channel_def names {len(names)} "
                         f"channels, but the network has out_channels {out_channels}")
    state.values["classes"] = list(names)
    state.sources["classes"] = "monai configs/metadata.json network_data_format.outputs.pred.channel_def"


_ORDER = ("name", "task", "input.patch", "input.spacing", "input.grid", "input.axes", "input.modality",
          "input.normalize", "input.scale", "input.mean", "input.std", "input.tile.overlap", "input.tile.blend",
          "input.tile.batch", "input.tile.pad", "output.activation", "output.activate", "output.threshold",
          "classes")


def _ordered(values: Mapping[str, object]) -> dict[str, object]:
    return {key: values[key] for key in _ORDER if key in values}
