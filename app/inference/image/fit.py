"""Does the image fit the model? A colour photo into a gray CT model, or an MR series into it, runs and gives
numbers ("lung 77.57 %") that mean nothing: say so beside the result, never refuse to run. The other way too: a
photo model (3 channels and no `input.modality`, or only photo modalities such as `[XC, OT]`) on a scan (a CT or
MR DICOM, a NIfTI volume, a gray image of more than 8 bits).

Pure: the spec and a few facts about the image (`ImageFacts`, read from a DecodedImage without touching more than
a small sample of its pixels) → the reasons it does not fit, one line each; empty when it fits. The CLI writes
them into the report's `warning` column, the viewer shows them as an amber line in the panel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.errors import with_article
from app.inference.model.spec import ModelSpec
from app.io.images import DecodedImage

SAMPLE_SIDE = 128  # pixels per side of the grid the colour test looks at: enough for a photo, O(1) in its size
COLOUR_STEP = 12  # channel difference (of 255) above JPEG's chroma noise on a gray picture saved as RGB
COLOUR_SHARE = 0.02  # share of sampled pixels that must differ that much for the image to be "in colour"


@dataclass(frozen=True)
class ImageFacts:
    """What the fit check needs to know of an image."""

    kind: str  # "DICOM", "NIfTI" or the file's format ("PNG", "JPEG", "TIFF"; "image" for an in-memory array)
    colour: bool  # its channels differ (an RGB file whose channels are equal is a gray picture)
    modality: str | None  # DICOM Modality ("CT", "MR"); None where the file carries none
    high_range: bool  # values beyond 8 bits are kept (HU, 16-bit counts): a scan, not a photo or screenshot


def image_facts(image: DecodedImage) -> ImageFacts:
    """The facts of a decoded image (a sample of at most SAMPLE_SIDE² pixels is read for the colour test)."""
    modality = str(image.info.get("Modality") or "").strip().upper() or None
    return ImageFacts(_kind(image), _in_colour(image.pixels), modality, image.raw is not None)


def fit_problems(spec: ModelSpec, facts: ImageFacts) -> tuple[str, ...]:
    """Why an image with `facts` does not fit the model of `spec`, one line each (empty: it fits)."""
    problems = []
    inp, name = spec.input, spec.path.name
    if inp.channels == 1 and facts.colour:
        problems.append(f"a colour image into {name}, a gray (1-channel) model: its colours are lost")
    if inp.color_matters and not facts.colour:
        problems.append(f"a gray image into {name}, a colour model whose sidecar says colour matters "
                        "(input.color_matters)")
    expected = " or ".join(inp.modality)
    photo_model = _photo_model(spec)
    if inp.modality and facts.modality is not None and facts.modality not in inp.modality:
        problems.append(f"{name} expects {expected} (input.modality) but this {facts.kind} is {facts.modality}")
    elif photo_model and _scan(facts):
        why = (f"expects {expected} (input.modality)" if inp.modality else "takes 3-channel pictures and its "
               "sidecar names no input.modality (a scan model names its modality, e.g. input.modality: CT)")
        problems.append(f"a photo model on {_scan(facts)}: {name} {why}")
    elif inp.modality and not photo_model and facts.modality is None and facts.kind not in ("DICOM", "NIfTI") \
            and not facts.high_range:
        # a DICOM without the tag, a NIfTI or a 16-bit scan cannot be told apart: only an 8-bit picture can
        problems.append(f"{name} expects {expected} (input.modality) but this is an 8-bit {facts.kind} "
                        f"{'photo' if facts.colour else 'picture'}, not {with_article(expected)} scan")
    return tuple(problems)


# DICOM modalities whose images are pictures (a camera, a microscope, a scope, a screen capture), not scans
PHOTO_MODALITIES = frozenset({"XC", "GM", "SM", "ES", "OT", "SC"})


def _photo_model(spec: ModelSpec) -> bool:
    """A model for photos: its sidecar names only photo modalities (`input.modality: [XC, OT]`), or it takes three
    channels and names none (a 3-channel scan model — three CT windows stacked — names its modality)."""
    if spec.input.modality:
        return set(spec.input.modality) <= PHOTO_MODALITIES
    return spec.input.channels == 3


def _scan(facts: ImageFacts) -> str | None:
    """What makes the image a scan rather than a picture, in words (`a CT DICOM`), or None: a DICOM of a
    non-photo modality, a NIfTI volume, or one channel of more than 8 bits (a photo is 8-bit, a scan's HU and
    counts are not)."""
    if facts.modality is not None:
        if facts.modality in PHOTO_MODALITIES:
            return None
        return with_article(f"{facts.modality} {facts.kind}")
    if facts.kind == "NIfTI":
        return "a NIfTI volume"
    if facts.high_range and not facts.colour:
        return f"a gray {facts.kind} with values beyond 8 bits"
    return None


def image_fit(spec: ModelSpec, image: DecodedImage) -> tuple[str, ...]:
    """`fit_problems` of a decoded image."""
    return fit_problems(spec, image_facts(image))


_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF", ".bmp": "BMP",
            ".webp": "WebP", ".gif": "GIF"}


def _kind(image: DecodedImage) -> str:
    if image.source_mode in ("DICOM", "NIfTI"):
        return image.source_mode
    if image.path is None:
        return "image"
    return _FORMATS.get(image.path.suffix.lower(), image.path.suffix.lstrip(".").upper() or "image")


def _in_colour(pixels: np.ndarray) -> bool:
    if pixels.ndim != 3 or pixels.shape[2] < 3:
        return False
    step_y, step_x = max(1, pixels.shape[0] // SAMPLE_SIDE), max(1, pixels.shape[1] // SAMPLE_SIDE)
    sample = pixels[::step_y, ::step_x, :3].astype(np.int16)
    spread = sample.max(axis=2) - sample.min(axis=2)
    return bool(np.mean(spread > COLOUR_STEP) >= COLOUR_SHARE)
