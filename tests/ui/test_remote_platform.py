"""The remote badge and Test connection name the server's platform in words ("ONNX Runtime"), not its
configuration token ("onnxruntime_onnx"); a platform SegLens does not know is shown as the server says it."""

from __future__ import annotations

from app.inference.model.session import RemoteInfo
from app.ui.state.remote_messages import server_about, server_label


def _remote(platform: str, device: str = "CPU") -> RemoteInfo:
    return RemoteInfo("10.0.0.5:8001", "nuclei", "", platform, server_device=device)


def test_the_platforms_are_said_in_words():
    assert server_label(_remote("onnxruntime_onnx")) == "remote: 10.0.0.5:8001/nuclei (ONNX Runtime, server: CPU)"
    assert server_about(_remote("tensorrt_plan", "CUDA (GPU 0)")) == "TensorRT, server: CUDA (GPU 0)"
    assert server_about(_remote("pytorch_libtorch", "")) == "PyTorch (LibTorch)"


def test_an_unknown_platform_is_shown_as_the_server_says_it():
    assert server_about(_remote("my_backend")) == "my_backend, server: CPU"
    assert server_about(_remote("")) == "server: CPU"
