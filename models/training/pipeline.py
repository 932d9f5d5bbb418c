"""Run a bundled model on a decoded image, through the app's own pipeline when it is importable.

``open_model(name)`` returns a runner whose ``run(image)`` gives ``(mask, topk, timings)``; for an anomaly model
the image score of the last run is ``runner.score``:

* backend ``app``: ``app.inference`` (load_spec / open_session / run_image) - the code path users get, so a
  preprocessing mismatch between training and the app shows up in the metrics;
* backend ``onnxruntime``: a direct ONNX Runtime (CPU) reimplementation of the sidecar semantics, used when
  the app is not importable (``--backend ort`` forces it).
"""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
import yaml

from . import common


def model_path(name: str) -> Path:
    return common.MODELS_DIR / f"{name}.onnx"


class OrtRunner:
    backend = "onnxruntime"
    score: float | None = None

    def __init__(self, name: str, threads: int = 2):
        import onnxruntime as ort

        self.path = model_path(name)
        self.spec = yaml.safe_load(self.path.with_suffix(".yaml").read_text())
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.log_severity_level = 3
        self.sess = ort.InferenceSession(str(self.path), so, providers=["CPUExecutionProvider"])
        self.inp = self.sess.get_inputs()[0]
        self.dtype = np.float16 if "float16" in self.inp.type else np.float32
        warm = np.zeros([d if isinstance(d, int) else 1 for d in self.inp.shape], self.dtype)
        if not all(isinstance(d, int) for d in self.inp.shape[2:]):
            h, w = self.spec["input"]["size"] or (64, 64)
            warm = np.zeros((1, self.inp.shape[1], h, w), self.dtype)
        self.sess.run(None, {self.inp.name: warm})

    def run(self, image: np.ndarray):
        spec, inp = self.spec, self.spec["input"]
        t0 = time.perf_counter()
        x = common.convert_color(image, inp["color"])
        if inp.get("size"):
            x = common.resize_image(x, inp["size"])
        wh, ww = x.shape[:2]
        x = common.normalize(x, inp)[None].astype(self.dtype)
        t1 = time.perf_counter()
        outs = self.sess.run(None, {self.inp.name: x})
        out = outs[0].astype(np.float32)
        t2 = time.perf_counter()
        act = spec["output"]["activation"]
        mask, topk = None, None
        if spec["task"] == "classification":
            logits = out[0]
            p = np.exp(logits - logits.max())
            p = p / p.sum() if act in ("softmax", "auto") else logits
            order = np.argsort(-p)[: spec["postprocess"].get("top_k", 5)]
            topk = [(int(i), spec["classes"][i]["name"], float(p[i])) for i in order]
        else:
            o = out[0, :, :wh, :ww]
            if len(outs) > 1:  # anomaly model (anomaly_map, pred_score): the map clipped to 0..1, map >= threshold
                self.score = float(np.asarray(outs[1]).reshape(-1)[0])
                prob = np.clip(o[0], 0, 1)
                m = (prob >= spec["output"]["threshold"]).astype(np.uint8)
            elif o.shape[0] == 1:
                prob = 1 / (1 + np.exp(-o[0])) if act == "sigmoid" else o[0]
                m = (prob > spec["output"]["threshold"]).astype(np.uint8)
            else:
                m = o.argmax(0).astype(np.uint8)
            mask = cv2.resize(m, (image.shape[1], image.shape[0]), interpolation=cv2.INTER_NEAREST)
        t3 = time.perf_counter()
        ms = {"preprocess": (t1 - t0) * 1e3, "inference": (t2 - t1) * 1e3, "postprocess": (t3 - t2) * 1e3}
        return mask, topk, ms


class AppRunner:
    backend = "app"
    score: float | None = None

    def __init__(self, name: str, threads: int = 2):
        from app.inference.image.pipeline import run_image
        from app.inference.model.spec import load_spec
        from app.inference.runtime.session import open_session

        self._run_image = run_image
        self.spec = load_spec(model_path(name))
        self.session = open_session(self.spec, device="cpu")

    def run(self, image: np.ndarray):
        r = self._run_image(self.session, image)
        self.score = r.image_score
        preds = getattr(r, "predictions", None) or getattr(r, "topk", None)
        topk = None
        if preds:
            topk = [(int(p.index), str(p.name), float(p.score)) if hasattr(p, "index") else
                    (int(p[0]), str(p[1]), float(p[2])) for p in preds]
        return r.mask, topk, dict(r.timings)


def open_model(name: str, backend: str = "auto"):
    """Runner for models/<name>.onnx: the app pipeline if importable (backend 'auto' or 'app'), else ORT."""
    if backend in ("auto", "app"):
        try:
            return AppRunner(name)
        except ImportError as e:  # the app (or its inference core) is not importable here
            if backend == "app":
                raise
            print(f"  note: app.inference not importable ({e}); evaluating with onnxruntime directly")
    return OrtRunner(name)
