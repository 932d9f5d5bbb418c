"""The status bar's provider label on the three machines: no NVIDIA GPU (calm), a GPU CUDA cannot use (warning),
`--device cuda` without a GPU (warning). The probe is faked; the sessions and ONNX Runtime are real."""

from __future__ import annotations

import onnxruntime as ort
import pytest
from waiting import round_trip

from app.inference.model.builder import load_spec
from app.inference.runtime import providers
from app.inference.runtime.providers import CUDA
from app.inference.runtime.session import open_session
from app.ui.widgets.status import CPU_STYLE, WARNING_STYLE, StatusBar

TIMEOUT = 20_000
pytestmark = pytest.mark.skipif(CUDA not in ort.get_available_providers() or providers.detect_nvidia_gpu(),
                                reason="needs onnxruntime-gpu on a machine where CUDA cannot start")


def _shown(qtbot, models, monkeypatch, *, gpu: str | None, device: str) -> StatusBar:
    monkeypatch.setattr(providers, "detect_nvidia_gpu", lambda: gpu)
    bar = StatusBar()
    qtbot.addWidget(bar)
    bar.show_session(open_session(load_spec(models("rgb_classes")), device).info, "rgb_classes.onnx")
    return bar


def test_no_gpu_is_a_calm_cpu(qtbot, models, monkeypatch):
    bar = _shown(qtbot, models, monkeypatch, gpu=None, device="auto")
    assert bar.provider.text() == "CPU (no NVIDIA GPU)" and bar.provider.styleSheet() == CPU_STYLE
    assert "No NVIDIA GPU was found" in bar.provider.toolTip()


def test_a_gpu_cuda_cannot_use_is_a_warning_with_the_cause(qtbot, models, monkeypatch):
    bar = _shown(qtbot, models, monkeypatch, gpu="/dev/nvidia0", device="auto")
    assert bar.provider.text().startswith("⚠ CPU — GPU unavailable: CUDA provider could not be loaded: ")
    assert bar.provider.styleSheet() == WARNING_STYLE and ".so" in bar.provider.toolTip()


def test_cuda_by_name_without_a_gpu_is_a_warning(qtbot, models, monkeypatch):
    bar = _shown(qtbot, models, monkeypatch, gpu=None, device="cuda")
    assert bar.provider.text() == "⚠ CPU — CUDA requested but unavailable: no NVIDIA GPU on this machine"
    assert bar.provider.styleSheet() == WARNING_STYLE and "could not be loaded" in bar.provider.toolTip()


def test_the_window_on_auto_without_a_gpu_is_calm(qtbot, make_main_window, models, monkeypatch):
    monkeypatch.setattr(providers, "detect_nvidia_gpu", lambda: None)
    window = make_main_window(models("rgb_classes"), device="auto")
    assert window.summary.info.fallback_reason == "no NVIDIA GPU"  # kept for About/Diagnostics
    assert window.status.provider.text() == "CPU (no NVIDIA GPU)"
    assert window.status.provider.styleSheet() == CPU_STYLE


def test_the_gpu_memory_read_queued_by_show_session_does_not_outlive_the_status_bar(qtbot):
    """show_session queues one GPU-memory read for after the current event; a window closed at once (a test's
    teardown, a quick quit) deleted the bar's labels first and the read raised 'Internal C++ object already
    deleted' in the event loop (CI, tests/ui/test_station_view.py's teardown)."""
    import shiboken6

    from app.inference.model.session import SessionInfo
    from app.ui.widgets.status import StatusBar

    bar = StatusBar()
    bar.show_session(SessionInfo("cpu", "CPUExecutionProvider", ("CPUExecutionProvider",)), "model")
    shiboken6.delete(bar)
    round_trip(qtbot)  # the queued read (a zero timer, posted before) runs here, if it still can
