"""The TensorRT engine cache is kept per model file content: a retrained model never reuses a stale engine."""

from __future__ import annotations

import hashlib

from app.inference.model.runtime_options import RuntimeOptions
from app.inference.runtime.options import providers_for, tensorrt_cache_dir
from app.inference.runtime.providers import CUDA, TENSORRT


def _trt_cache_path(model, tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    providers = providers_for(RuntimeOptions(tensorrt=True), gpu=True, device_id=0, available=[TENSORRT, CUDA],
                              model_path=model)
    return providers[0][1]["trt_engine_cache_path"]


def test_retrained_weights_get_their_own_engine_cache(tmp_path, monkeypatch):
    """Same name, same structure, new weights: ONNX Runtime names engines after the graph, not the weights, so a
    shared folder served the old engine."""
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights v1")
    first = _trt_cache_path(model, tmp_path, monkeypatch)
    model.write_bytes(b"weights v2")
    second = _trt_cache_path(model, tmp_path, monkeypatch)
    assert first != second
    assert first.endswith(hashlib.sha256(b"weights v1").hexdigest()[:16])
    assert second.startswith(str(tmp_path / "cache"))


def test_the_same_model_reuses_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    a.write_bytes(b"same")
    b.write_bytes(b"same")
    assert tensorrt_cache_dir(a) == tensorrt_cache_dir(b) and tensorrt_cache_dir(a).is_dir()
