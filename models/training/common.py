"""What the demo models are: sidecar contents, preprocessing, data sets (numpy + OpenCV, no torch).

The sidecar dicts below are written next to each ONNX file by ``export.py``; ``preprocess`` implements the
sidecar semantics that the app applies (decode -> colour -> resize -> pad to divisor -> scale/mean/std ->
NCHW), so that the models are trained on exactly what the app feeds them.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from . import synth

MODELS_DIR = Path(__file__).resolve().parents[1]
RUNS_DIR = MODELS_DIR / "training" / "runs"  # checkpoints (git-ignored)
RESULTS = MODELS_DIR / "training" / "results.json"  # metrics, latencies, training times (committed)
SAMPLES_DIR = MODELS_DIR.parent / "resources" / "samples"

# Seeds: training data, held-out evaluation data and the bundled samples never share one.
TRAIN_SEED = 1
EVAL_SEED = 7001
SAMPLE_SEED = 2024
PARITY_SEED = 99

IMAGENET_MEAN_01 = [0.485, 0.456, 0.406]
IMAGENET_STD_01 = [0.229, 0.224, 0.225]

SIDECARS: dict[str, dict] = {
    "surface_defects": {
        "name": "Surface defects (demo)",
        "task": "segmentation",
        "input": {
            # 1080p / 2 exactly: the resize is a 2x2 box average (~1 ms instead of ~16 ms for 544 rows);
            # the divisor pads the 540 rows to 544 for the network
            "size": [540, 960],
            "resize": "stretch",
            "size_divisor": 32,
            "color": "rgb",
            "scale": 1 / 255,
            "mean": IMAGENET_MEAN_01,
            "std": IMAGENET_STD_01,
        },
        "output": {"activation": "softmax", "threshold": 0.5},
        "classes": [
            {"name": "background"},
            {"name": "scratch", "color": "#ff3b30"},
            {"name": "pit", "color": "#ffcc00"},
            {"name": "stain", "color": "#34c759"},
        ],
        # the smallest pits cover ~150 px at 1080p: smaller blobs are speckle
        "postprocess": {"min_area": 60, "close_kernel": 0, "top_k": 5},
    },
    "nuclei": {
        "name": "Nuclei (demo, fluorescence)",
        "task": "segmentation",
        "input": {
            "size": [256, 256],
            "resize": "stretch",
            "size_divisor": 1,
            "color": "gray",
            "scale": 1 / 255,
            "mean": [0.1],
            "std": [0.15],
        },
        # the graph ends in Sigmoid: its output already is a probability
        "output": {"activation": "none", "threshold": 0.5},
        "classes": [{"name": "background"}, {"name": "nucleus", "color": "#00e5ff"}],
        # drops single bright debris specks; nuclei cover > 100 px in any field the model is meant for
        "postprocess": {"min_area": 20, "close_kernel": 0, "top_k": 5},
    },
    "defect_type": {
        "name": "Defect type (demo classifier)",
        "task": "classification",
        "input": {
            "size": [224, 224],
            "resize": "stretch",
            "size_divisor": 1,
            "color": "rgb",
            "scale": 1.0,
            "mean": [123.675, 116.28, 103.53],
            "std": [58.395, 57.12, 57.375],
        },
        "output": {"activation": "softmax", "threshold": 0.5},
        "classes": [
            {"name": "OK", "color": "#34c759"},
            {"name": "scratch", "color": "#ff3b30"},
            {"name": "pit", "color": "#ffcc00"},
            {"name": "stain", "color": "#af52de"},
        ],
        "postprocess": {"min_area": 0, "close_kernel": 0, "top_k": 4},
    },
}
# Anomaly detection (anomalib-style outputs anomaly_map + pred_score): trained on clean surfaces only. The two
# thresholds are calibrated on held-out clean frames by export.py, which writes them into the sidecar (the values
# here are placeholders until then; models/surface_anomaly.yaml holds the calibrated ones).
SIDECARS["surface_anomaly"] = {
    "name": "Surface anomaly (demo, trained on clean surfaces)",
    "task": "segmentation",
    "input": {
        # 1080p / 3.75 exactly (288 / 512 = 1080 / 1920): no padding for 16:9 frames, so no black border that
        # the model would call an anomaly
        "size": [288, 512],
        "resize": "stretch",
        "size_divisor": 16,
        "color": "rgb",
        # 0..1: the graph itself takes the log intensity (nets.AnomalyAE)
        "scale": 1 / 255,
        "mean": [0.0, 0.0, 0.0],
        "std": [1.0, 1.0, 1.0],
    },
    "output": {"activation": "none", "threshold": 0.5, "image_threshold": 0.5},
    "classes": [{"name": "normal"}, {"name": "anomaly", "color": "#ff2d55"}],
    "postprocess": {"min_area": 0, "close_kernel": 0, "top_k": 5},
}
# CT demo: axial slices in HU, windowed by the app (input.window) to uint8 before scale/mean/std; trained on the
# synthetic chest phantom (phantom.py). Fully convolutional (dynamic H/W, multiple of 8); 256x256 working size.
SIDECARS["ct_demo"] = {
    "name": "CT lungs & bone (demo, synthetic)",
    "task": "segmentation",
    "input": {
        "size": [256, 256],
        "resize": "stretch",
        "size_divisor": 8,
        "color": "gray",
        "window": [-300, 1800],  # center, width (HU): lung-friendly wide window, bone still above soft tissue
        "modality": "CT",  # trained on CT: a photo or an MR series gets a warning (app.inference.image.fit)
        "scale": 1 / 255,
        "mean": [0.4],
        "std": [0.3],
    },
    "output": {"activation": "softmax", "threshold": 0.5},
    # what each class is, for the DICOM SEG a PACS reads (SNOMED CT, as in pydicom's codes.SCT and CID 7150);
    # each its own list: a shared one would be dumped as a YAML alias, which the sidecar loader refuses
    "classes": [{"name": "background"},
                {"name": "lung", "color": "#4aa3ff",
                 "code": {"category": ["SCT", "91723000", "Anatomical Structure"],
                          "type": ["SCT", "39607008", "Lung"]}},
                {"name": "bone", "color": "#ffd60a",
                 "code": {"category": ["SCT", "91723000", "Anatomical Structure"],
                          "type": ["SCT", "272673000", "Bone"]}}],
    "postprocess": {"min_area": 20, "close_kernel": 0, "top_k": 3},
}
SIDECARS["nuclei_fp16"] = json.loads(json.dumps(SIDECARS["nuclei"]))
SIDECARS["nuclei_fp16"]["name"] = "Nuclei (demo, fluorescence, float16)"


def class_names(name: str) -> list[str]:
    return [c["name"] for c in SIDECARS[name]["classes"]]


# ------------------------------------------------------------------------------------------------ preprocess


def convert_color(img: np.ndarray, color: str) -> np.ndarray:
    if color == "gray":
        return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY) if img.ndim == 3 else img
    if img.ndim == 2:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
    return img[..., ::-1].copy() if color == "bgr" else img


def resize_image(img: np.ndarray, size) -> np.ndarray:
    """Stretch to (H, W): INTER_AREA when shrinking, INTER_LINEAR when enlarging (as the app does)."""
    h, w = int(size[0]), int(size[1])
    if img.shape[:2] == (h, w):
        return img
    shrink = h * w < img.shape[0] * img.shape[1]
    return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def resize_labels(label: np.ndarray, size, n_classes: int) -> np.ndarray:
    """Downscale a label map by majority of area (the best label map the model can output at ``size``)."""
    h, w = int(size[0]), int(size[1])
    if label.shape == (h, w):
        return label
    cover = np.stack(
        [cv2.resize((label == k).astype(np.float32), (w, h), interpolation=cv2.INTER_AREA) for k in range(n_classes)]
    )
    return cover.argmax(0).astype(np.uint8)


def normalize(img: np.ndarray, inp: dict) -> np.ndarray:
    """uint8 HxW(xC) at working size -> float32 CxHxW, padded to size_divisor, scaled, mean/std."""
    div = int(inp.get("size_divisor") or 1)
    h, w = img.shape[:2]
    ph, pw = -h % div, -w % div
    if ph or pw:
        pad = ((0, ph), (0, pw)) + (((0, 0),) if img.ndim == 3 else ())
        img = np.pad(img, pad)
    x = img.astype(np.float32) * np.float32(inp["scale"])
    if x.ndim == 2:
        x = x[..., None]
    mean = np.asarray(inp["mean"], np.float32)
    std = np.asarray(inp["std"], np.float32)
    x = (x - mean) / std
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def preprocess(img: np.ndarray, name: str) -> np.ndarray:
    """Full sidecar preprocessing of one decoded image (RGB or gray uint8) -> float32 CxHxW."""
    inp = SIDECARS[name]["input"]
    x = convert_color(img, inp["color"])
    if inp.get("size"):
        x = resize_image(x, inp["size"])
    return normalize(x, inp)


# ------------------------------------------------------------------------------------------------ data sets
# Each item is a pure function of (seed, index): the same seed gives the same set on every machine.

SURFACE_SIZES = [(1080, 1920)] * 6 + [(1024, 1280), (1200, 1600), (1024, 1024), (720, 1280)]


def surface_item(seed: int, index: int, full_res: bool = True):
    """(image uint8 HxWx3 at its native size, label uint8 HxW) of the surface data set ``seed``."""
    rng = synth.rng_for(seed, index, "surface")
    if full_res:
        h, w = SURFACE_SIZES[int(rng.integers(len(SURFACE_SIZES)))]
        return synth.surface_image(rng, h, w)
    # rendered directly at the working size (cheaper; px scaled as if downsampled from 1920 x 1080)
    h, w = SIDECARS["surface_defects"]["input"]["size"]
    return synth.surface_image(rng, h, w, px=w / 1920 * rng.uniform(0.8, 1.25))


def nuclei_item(seed: int, index: int, size: int | None = None):
    rng = synth.rng_for(seed, index, "nuclei")
    if size is None:
        size = int(rng.choice([256, 512, 512, 512, 512, 768]))
    return synth.nuclei_image(rng, size, empty=rng.random() < 0.04)


def anomaly_item(seed: int, index: int, defective: bool, full_res: bool = True):
    """(image uint8 HxWx3, defect mask uint8 HxW: 1 on any scratch/pit/stain) of the anomaly sets: a clean frame
    or one with at least one defect, from the same surface generator as surface_defects."""
    rng = synth.rng_for(seed, index, "anomaly-defective" if defective else "anomaly-clean")
    defects = {"scratch": 0, "pit": 0, "stain": 0}
    while defective and not any(defects.values()):
        defects = {"scratch": int(rng.choice([0, 1, 1, 2])), "pit": int(rng.choice([0, 0, 1, 2, 4])),
                   "stain": int(rng.choice([0, 0, 1, 1]))}
    if full_res:
        h, w = SURFACE_SIZES[int(rng.integers(len(SURFACE_SIZES)))]
        img, lab = synth.surface_image(rng, h, w, defects=defects)
    else:  # rendered directly at the working size (px scaled as if downsampled from 1920 x 1080)
        h, w = SIDECARS["surface_anomaly"]["input"]["size"]
        img, lab = synth.surface_image(rng, h, w, px=w / 1920 * rng.uniform(0.8, 1.25), defects=defects)
    return img, (lab > 0).astype(np.uint8)


def crop_item(seed: int, index: int):
    """(crop uint8 224x224x3, class index); classes cycle so every set is balanced."""
    kind = index % len(synth.DEFECT_TYPES)
    return synth.defect_crop(synth.rng_for(seed, index, "crop"), kind), kind


# ------------------------------------------------------------------------------------------------ results


def load_results() -> dict:
    if RESULTS.exists():
        return json.loads(RESULTS.read_text())
    return {}


def save_results(update: dict) -> dict:
    """Merge ``update`` (name -> {key: value}) into results.json."""
    res = load_results()
    for name, vals in update.items():
        res.setdefault(name, {}).update(vals)
    RESULTS.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    return res
