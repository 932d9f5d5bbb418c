"""The bundled anomaly demo model (models/surface_anomaly.onnx, trained on clean surfaces only) on its samples
(resources/samples/anomaly/): recognised as an anomaly model with its calibrated sidecar thresholds; clean frames
score under the image threshold (OK), defective ones over it (NG), and the mask lies on the defect. No torch:
the defect masks are regenerated with the sample generator (models/training, numpy + OpenCV only)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from app.inference.decide.verdict import verdict_of
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.images import read_image

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "models" / "surface_anomaly.onnx"
SAMPLES = REPO / "resources" / "samples" / "anomaly"


@pytest.fixture(scope="module")
def session():
    return open_session(load_spec(MODEL), "cpu")


@pytest.fixture(scope="module")
def make_samples():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from models.training import make_samples

    return make_samples


def _run(session, name: str):
    result = run_image(session, read_image(SAMPLES / name))
    return result, verdict_of(session.spec, result)


def test_loads_as_an_anomaly_model_with_the_sidecar_thresholds():
    spec = load_spec(MODEL)
    sidecar = yaml.safe_load(MODEL.with_suffix(".yaml").read_text())["output"]
    out = spec.output
    assert (out.kind, out.name, out.score_name, out.mask_name) == ("anomaly", "anomaly_map", "pred_score", None)
    assert (out.threshold, out.image_threshold) == (sidecar["threshold"], sidecar["image_threshold"])
    assert spec.sources["output.threshold"] == spec.sources["output.image_threshold"] == "sidecar"
    assert 0 < out.threshold < 1 and 0 < out.image_threshold < 1
    assert spec.class_names == ("normal", "anomaly") and spec.sources["verdict"] == "default"
    assert MODEL.stat().st_size <= 5 * 2**20


def test_class_0_is_named_for_what_it_is_not_for_a_verdict():
    """Class 0 is the surface the model saw as normal: named "ok" it read as the image's verdict (an NG image's
    legend listed "ok" beside its defect). The ONNX metadata, read without the sidecar, says the same."""
    import onnx

    assert load_spec(MODEL).class_names[0] == "normal"
    meta = {p.key: p.value for p in onnx.load(str(MODEL), load_external_data=False).metadata_props}
    assert json.loads(meta["classes"]) == ["normal", "anomaly"]


def test_the_samples_are_a_mix_of_clean_and_defective(make_samples):
    names = sorted(p.name for p in SAMPLES.glob("*.png"))
    assert names == sorted(Path(fn).name for fn, _, _ in make_samples.ANOMALY)
    assert 6 <= len(names) <= 10 and sum("clean" in n for n in names) >= 2


@pytest.mark.parametrize("name", ["anomaly_clean_01_metal.png", "anomaly_clean_02_plastic.png",
                                  "anomaly_clean_03_metal.png"])
def test_clean_frames_are_ok(session, name):
    result, verdict = _run(session, name)
    assert result.image_score < session.spec.output.image_threshold
    assert verdict.ok and verdict.reason == ""


@pytest.mark.parametrize("index", [3, 4, 5, 6, 7])
def test_defective_frames_are_ng_and_the_mask_lies_on_the_defect(session, make_samples, index):
    fn, _, _ = make_samples.ANOMALY[index]
    image, defect = make_samples.anomaly_sample(index)
    decoded = read_image(SAMPLES / Path(fn).name)
    assert np.abs(decoded.pixels.astype(int) - image).mean() < 1  # the file is what the generator makes
    result, verdict = _run(session, Path(fn).name)
    assert result.image_score >= session.spec.output.image_threshold
    assert not verdict.ok and verdict.reason.startswith("score ")
    mask = result.mask > 0
    assert mask.shape == defect.shape and mask.any()
    # the map is smoothed (7x7 at 288x512 = ~9 px at 640x360): compare with the defect grown by that much
    grown = cv2_dilate(defect, 9)
    assert (mask & grown).sum() >= 0.5 * mask.sum()  # most of the mask is on or next to the defect
    assert (mask & (defect > 0)).sum() >= 0.2 * defect.sum()  # and it covers a good part of it


def cv2_dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    import cv2

    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    return cv2.dilate(mask.astype(np.uint8), kernel) > 0
