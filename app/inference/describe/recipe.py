"""How `info` words an nnU-Net recipe (a model's sidecar `nnunet:` section): in place of the normalisation and tiling
lines of SegLens's own 3D path, what nnU-Net's predictor does — the crop, each input channel's scheme, the
resampling both ways, the window and how its outputs become labels."""

from __future__ import annotations

from app.inference.model.nnunet_recipe import ChannelNorm, NnunetRecipe, Resampling
from app.spelling import counted


def recipe_lines(recipe: NnunetRecipe) -> list[tuple[str, str]]:
    """(label, text) lines: `recipe`, one `channel N` per graph input channel, `resample`, `window`, `labels`."""
    crop = "crop to the non-zero region, " if recipe.crop_nonzero else ""
    lines = [("recipe", f"nnU-Net's own prediction (nnunet:): {crop}normalise, resample, window, resample back")]
    lines += [(f"channel {c}", channel_text(norm)) for c, norm in enumerate(recipe.channels)]
    lines.append(("resample", f"{resampling_text(recipe.resample)}; back {resampling_text(recipe.resample_back)}"
                  + ("; slices keep the volume's own spacing (a 2D configuration)"
                     if recipe.slice_spacing == "volume" else "")))
    lines.append(("window", f"step {recipe.step:g} of a patch, spread evenly; Gaussian (σ patch/8) over logits"))
    lines.append(("labels", _labels_text(recipe)))
    return lines


def channel_text(norm: ChannelNorm) -> str:
    source = f"volume channel {norm.source}: "
    if norm.scheme == "ct" and norm.clip is not None:
        return (f"{source}CT, clip to [{norm.clip[0]:g}, {norm.clip[1]:g}], then (x − {norm.mean:g}) / {norm.std:g} "
                "(the training set's foreground)")
    if norm.scheme == "zscore":
        return f"{source}z-score of each volume over {'its non-zero region' if norm.mask else 'all its voxels'}"
    return source + {"none": "as is", "rescale01": "rescaled to 0–1", "rgb01": "divided by 255"}[norm.scheme]


def resampling_text(rule: Resampling) -> str:
    spline = {0: "nearest", 1: "linear", 3: "cubic spline"}
    separate = {None: f"when the spacing is over {rule.anisotropy_threshold:g}× anisotropic",
                True: "always", False: "never"}[rule.force_separate_z]
    return f"{spline[rule.order]} (the thick axis {spline[rule.order_z]}, {separate})"


def _labels_text(recipe: NnunetRecipe) -> str:
    if recipe.regions_class_order is not None:
        return (f"{counted(len(recipe.regions_class_order), 'region')} (sigmoid > 0.5) painted in order "
                f"{list(recipe.regions_class_order)}")
    if recipe.parts is not None:
        return (f"{counted(len(recipe.parts), 'part-model')} merged: each part's argmax painted over the earlier "
                "parts' with its global labels")
    return "softmax after resampling back, then the argmax"
