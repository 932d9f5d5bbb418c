"""The mask a Result makes on use is pixel for pixel the one the pipeline made up front before labels were kept at
the working size (issue 24): the code of that time is kept here as the reference, and both are run on the same
model outputs over every output kind, grid and cleaning setting."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from app.inference.image import pipeline
from app.inference.image import postprocess as pp
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.images import from_array


def reference_mask(spec, output, geometry) -> np.ndarray:
    """postprocess.segmentation_mask as it was (7a1d01f), on the module's unchanged helpers."""
    out = spec.output
    planes = pp._planes(spec, np.asarray(output))
    strided = planes.shape[1:] != geometry.tensor_hw
    if out.kind == "labels":
        labels = np.clip(planes[0], 0, 255).astype(np.uint8)
        mask = (pp._warp_to_image(labels, geometry, cv2.INTER_NEAREST) if strided
                else pp._resize_nearest(pp._crop(labels[None], geometry)[0], geometry.image_hw))
    elif out.kind in ("binary", "anomaly"):
        plane = planes[0].astype(np.float32, copy=False)
        plane = (pp._warp_to_image(plane, geometry, cv2.INTER_LINEAR) if strided
                 else pp._crop(plane[None], geometry)[0])
        if plane.shape != geometry.image_hw:
            plane = cv2.resize(plane, geometry.image_hw[::-1], interpolation=cv2.INTER_LINEAR)
        cut = out.threshold if out.kind == "anomaly" else pp._threshold_in_output_units(out)
        mask = (plane >= cut if out.kind == "anomaly" else plane > cut).view(np.uint8)
    elif strided:
        mask = pp.argmax_planes(np.stack([pp._warp_to_image(p, geometry, cv2.INTER_LINEAR)
                                          for p in planes.astype(np.float32, copy=False)]))
    else:
        mask = pp._scores_to_mask(pp._crop(planes, geometry), geometry.image_hw)
    return pp.clean_mask(mask, spec.postprocess)


def reference_relabel(scores, geometry, spec, *, threshold=None, min_confidence=None) -> np.ndarray:
    """postprocess.relabel_scores as it was (7a1d01f)."""
    if spec.output.kind in ("binary", "anomaly"):
        cut = spec.output.threshold if threshold is None else threshold
        probability = pp.probability_at_image_size(scores, geometry)
        mask = (probability >= cut if spec.output.kind == "anomaly" else probability > cut).view(np.uint8)
    else:
        planes = scores.astype(np.float32)
        if planes.shape[1:] != geometry.tensor_hw:
            mask = pp.argmax_planes(np.stack([pp._warp_to_image(p, geometry, cv2.INTER_LINEAR) for p in planes]))
        else:
            mask = pp._scores_to_mask(pp._crop(planes, geometry), geometry.image_hw)
        if min_confidence is not None:
            mask[pp.probability_at_image_size(scores, geometry) < min_confidence] = 0
    return pp.clean_mask(mask, spec.postprocess)


CASES = {  # factory model, sidecar, gray input
    "scores, image size, cleaned": ("rgb_classes", "postprocess:\n  min_area: 30\n  close_kernel: 5\n", False),
    "scores, fixed, stretched": ("fixed_rgb_classes", "input:\n  resize: stretch\npostprocess:\n  min_area: 20\n",
                                 False),
    "scores, fixed, letterboxed": ("fixed_rgb_classes", "input:\n  resize: letterbox\npostprocess:\n  min_area: 20\n"
                                   "  close_kernel: 3\n", False),
    "scores, half-resolution output": ("half_resolution_classes", "input:\n  size: [40, 48]\n", False),
    "scores, stride 8, letterboxed": ("stride8_classes", "input:\n  size: [64, 64]\n  resize: letterbox\n", False),
    "scores, size divisor": ("needs_divisor", "input:\n  size: [50, 70]\n  size_divisor: 8\n", False),
    "binary logits": ("binary_logits", "input:\n  size: [30, 40]\npostprocess:\n  min_area: 10\n", True),
    "binary, letterboxed": ("blurred_binary", "input:\n  size: [33, 47]\n  resize: letterbox\n", True),
    "labels (argmax in the graph)": ("embedded_argmax", "input:\n  size: [40, 40]\n", False),
}


def picture(height: int, width: int, gray: bool, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(2, height // 6), max(2, width // 6), 3), dtype=np.uint8)
    image = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
    return image[:, :, 0].copy() if gray else image


@pytest.mark.parametrize("case", CASES)
def test_the_mask_made_on_use_is_the_one_made_up_front(models, case):
    kind, sidecar, gray = CASES[case]
    path = models(kind)
    path.with_suffix(".yaml").write_text(sidecar)
    model = open_session(load_spec(path), "cpu")
    spec = model.spec
    for seed, (h, w) in enumerate([(37, 53), (120, 90), (301, 517)]):
        decoded = from_array(picture(h, w, gray, seed))
        prepared = pipeline.prepare(spec, decoded)
        output, ms = pipeline.infer(model, prepared)
        result = pipeline.to_result(model, prepared, output, ms)
        np.testing.assert_array_equal(result.mask, reference_mask(spec, output, prepared.geometry),
                                      err_msg=f"{case} {h}×{w}")
        if result.scores is None:
            continue
        binary = spec.output.kind in ("binary", "anomaly")
        options = [{"threshold": 0.3}, {"threshold": 0.7}] if binary else [{"min_confidence": 0.6}, {}]
        for option in options:
            np.testing.assert_array_equal(pipeline.relabel(result, spec=spec, **option).mask,
                                          reference_relabel(result.scores, result.geometry, spec, **option),
                                          err_msg=f"{case} {h}×{w} {option}")
