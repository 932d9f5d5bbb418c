"""Tiny Ultralytics-layout ONNX models whose answer is known: every run returns the same predictions (and prototypes),
whatever the picture, so a test asserts exact instances, counts, areas and exports through SegLens's own pipeline,
without Ultralytics or trained weights. The head layouts and the metadata are Ultralytics' (app.inference.model.
yolo_head): segment `[1, 4 + nc + 32, N]` + prototypes `[1, 32, H/4, W/4]`, detect `[1, 4 + nc, N]`, obb
`[1, 4 + nc + 1, N]`, classify `[1, nc]`.

An object is (class index, score, cx, cy, w, h) in the model's input pixels; a segment model's mask of object k is
the ellipse inscribed in its box (prototype k is +8 inside it, −8 outside; its coefficients pick prototype k).
With the default 160×160 input, a 320×320 picture maps each input pixel to 2×2 image pixels (no padding).

`open_yolo` opens any export the way the app does (spec, session, the 2D pipeline) for tests that ask it as
Ultralytics' predictor is asked (BGR in, instances out): the parity tests, the bundled demo's.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx_factory import FLOAT, const, save, tensor

from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.model.instances import Instances
from app.inference.model.yolo_options import YoloOptions
from app.inference.runtime.session import open_session

NAMES = ("pit", "scratch", "stain")
# (class, score, cx, cy, w, h): two pits, one scratch, one stain below the default conf (0.25), kept only lower
OBJECTS = ((0, 0.9, 40.0, 40.0, 20.0, 20.0), (0, 0.6, 120.0, 40.0, 16.0, 16.0), (1, 0.8, 80.0, 110.0, 100.0, 12.0),
           (2, 0.2, 120.0, 130.0, 24.0, 24.0))
CANDIDATES = 64  # anchors: more than the channels, the rest score 0


def instance_model(path: Path, *, task: str = "segment", names: tuple[str, ...] = NAMES,
                   objects: tuple[tuple[int, float, float, float, float, float], ...] = OBJECTS,
                   imgsz: tuple[int, int] = (160, 160), metadata: dict[str, str] | None = None,
                   nan: bool = False) -> Path:
    """A constant `task` head (segment, detect, obb) answering `objects`; `nan` puts a NaN in the predictions."""
    nc, extra = len(names), {"segment": 32, "detect": 0, "obb": 1}[task]
    rows = np.zeros((4 + nc + extra, CANDIDATES), np.float32)
    for k, (cls, score, cx, cy, w, h) in enumerate(objects):
        rows[:4, k] = (cx, cy, w, h)
        rows[4 + cls, k] = score
        if task == "segment":
            rows[4 + nc + k, k] = 1.0
        if task == "obb":
            rows[4 + nc, k] = 0.0  # axis-aligned: the angle is 0
    if nan:
        rows[0, 0] = np.nan
    nodes, outputs, inits = _constant("output0", rows[None], "images")
    if task == "segment":
        more_nodes, more_outputs, more_inits = _constant("output1", _prototypes(objects, imgsz)[None], "images",
                                                         tag="p")
        nodes, outputs, inits = nodes + more_nodes, outputs + more_outputs, inits + more_inits
    meta = {"task": task, "names": repr(dict(enumerate(names))), "imgsz": repr(list(imgsz)), "stride": "32",
            "batch": "1", **(metadata or {})}
    return save(path, nodes, [tensor("images", FLOAT, [1, 3, *imgsz])], outputs, inits, meta)


def classify_model(path: Path, *, names: tuple[str, ...] = NAMES, probabilities: tuple[float, ...] = (0.1, 0.7, 0.2),
                   imgsz: tuple[int, int] = (96, 96)) -> Path:
    """A constant classify head: `probabilities` per class."""
    nodes, outputs, inits = _constant("output0", np.asarray([probabilities], np.float32), "images")
    meta = {"task": "classify", "names": repr(dict(enumerate(names))), "imgsz": repr(list(imgsz)), "stride": "32"}
    return save(path, nodes, [tensor("images", FLOAT, [1, 3, *imgsz])], outputs, inits, meta)


def _prototypes(objects: tuple[tuple[int, float, float, float, float, float], ...],
                imgsz: tuple[int, int]) -> np.ndarray:
    mh, mw = imgsz[0] // 4, imgsz[1] // 4
    protos = np.full((32, mh, mw), -8.0, np.float32)
    ys, xs = np.mgrid[0:mh, 0:mw].astype(np.float32) + 0.5  # prototype pixel centres, in prototype pixels
    for k, (_cls, _score, cx, cy, w, h) in enumerate(objects):
        inside = ((xs - cx / 4) / (w / 8)) ** 2 + ((ys - cy / 4) / (h / 8)) ** 2 <= 1.0
        protos[k][inside] = 8.0
    return protos


def _constant(name: str, value: np.ndarray, image: str, *, tag: str = "o") -> tuple[list, list, list]:
    """`name` = value + 0 · mean(image): a constant answer that still reads the input (ORT keeps the input bound)."""
    rank = value.ndim
    nodes = [helper.make_node("ReduceMean", [image], [f"{tag}_mean"], keepdims=1),
             helper.make_node("Reshape", [f"{tag}_mean", f"{tag}_shape"], [f"{tag}_flat"]),
             helper.make_node("Mul", [f"{tag}_flat", f"{tag}_zero"], [f"{tag}_nothing"]),
             helper.make_node("Add", [f"{tag}_value", f"{tag}_nothing"], [name])]
    inits = [const(f"{tag}_shape", np.ones(rank, np.int64)), const(f"{tag}_zero", np.zeros((), np.float32)),
             const(f"{tag}_value", value.astype(np.float32))]
    return nodes, [tensor(name, FLOAT, list(value.shape))], inits


@dataclass(frozen=True)
class ClassScores:
    """A classify export's answer as Ultralytics' `probs`: every class's probability, in the model's class order."""

    names: tuple[str, ...]
    scores: tuple[float, ...]

    @property
    def top1(self) -> int:
        return int(np.argmax(self.scores))


class YoloRun:
    """An export opened as SegLens opens any model (load_spec → open_session → the 2D pipeline), answering as
    Ultralytics' predictor is asked: a BGR picture in, its instances (or a classify head's probabilities) out.
    `options` replace the sidecar's `detect:` section."""

    def __init__(self, path: Path, *, device: str = "cpu", options: YoloOptions | None = None) -> None:
        spec = load_spec(path)
        assert spec.detector is not None, f"{path.name} is no YOLO export"
        if options is not None:
            spec = replace(spec, detector=replace(spec.detector, options=options),
                           output=replace(spec.output, threshold=options.conf))
        self.spec, self.head = spec, spec.detector.head
        self.session = open_session(spec, device)
        self.info = self.session.info

    def predict(self, image_bgr: np.ndarray) -> Instances | ClassScores:
        rgb = np.ascontiguousarray(image_bgr[..., ::-1]) if image_bgr.ndim == 3 else image_bgr
        result = run_image(self.session, rgb)
        if result.instances is not None:
            return result.instances
        probabilities = dict.fromkeys(range(self.head.nc), 0.0)
        probabilities.update({p.index: p.score for p in result.predictions})
        return ClassScores(self.head.names, tuple(probabilities[i] for i in range(self.head.nc)))

    def raw(self, tensor: np.ndarray) -> np.ndarray:
        """The predictions output of one run on `tensor` (the prototypes left out)."""
        output = self.session.run(tensor)
        return output[0] if isinstance(output, tuple) else output


def open_yolo(path: Path, *, device: str = "cpu", options: YoloOptions | None = None) -> YoloRun:
    return YoloRun(path, device=device, options=options)


INSTALL = ("`bash .ci/torchvision_cpu.sh .venv/bin/python` installs Ultralytics 8.4.190 and torchvision 0.28.0 "
           "beside the project's CPU torch")


def require_ultralytics() -> None:
    """Skips the calling test module where Ultralytics (or the torchvision it needs) does not import; fails in CI,
    which installs both. Ultralytics is kept offline, quiet and out of the user's settings."""
    os.environ.setdefault("YOLO_OFFLINE", "1")  # no download, no settings sync
    os.environ.setdefault("YOLO_VERBOSE", "False")
    os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="seglens-test-ultralytics-"))  # not the user's
    try:
        import torchvision.ops  # noqa: F401
        import ultralytics  # noqa: F401
    except (ImportError, RuntimeError) as exc:  # RuntimeError: a torchvision whose extension did not load
        message = f"Ultralytics does not import ({type(exc).__name__}: {exc}): {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must compare SegLens with Ultralytics' predictor)", pytrace=False)
        pytest.skip(message, allow_module_level=True)
