"""The Python steps of benchmarks/gpu_check.sh: probe the GPU, run the viewer's worker headless, summarise.

    probe MODEL          open a CUDA session with the app's own code; exit 3 with one "no GPU: …" line if the
                         session is not on the GPU (the cause as the app would show it)
    worker MODEL IMAGE   one image through the viewer's InferenceWorker on its QThread (QtCore only), with the
                         status bar's NVML reading; exit 1 unless it ran on CUDA and NVML answered
    summary DIR          the step outputs in DIR → one JSON document (stdout) and a table (stderr)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

NO_GPU_EXIT = 3


def probe(model_path: str) -> int:
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.inference.runtime.telemetry import gpu_memory, nvml_error

    model = open_session(load_spec(model_path), "cuda", warm_up=False)
    info = model.info
    memory = gpu_memory(0)
    facts = {"provider": info.provider, "providers": list(info.providers), "fallback_reason": info.fallback_reason,
             "ort_version": info.ort_version, "load_ms": round(info.load_ms, 1),
             "gpu": memory.name if memory else None, "nvml_error": nvml_error()}
    print(json.dumps(facts))
    if not info.on_gpu:
        print(f"no GPU: the CUDA session runs on {info.provider_label}: {info.fallback_reason}", file=sys.stderr)
        return NO_GPU_EXIT
    return 0


def worker(model_path: str, image: str, device: str = "cuda", timeout_s: float = 120.0) -> int:
    """The viewer's path without a window: load_model and process sent as the window sends them (queued
    signals to the worker's thread), results received on this thread as the window receives them."""
    from PySide6.QtCore import QCoreApplication, QThread, QTimer

    from app.ui.state.view_state import LatestRequest
    from app.ui.workers.worker import InferenceWorker

    app = QCoreApplication.instance() or QCoreApplication([])
    latest = LatestRequest()  # the window's ViewState shares one of these with its worker
    thread, work = QThread(), InferenceWorker(latest=latest)
    work.moveToThread(thread)
    receiver = _receiver(work, latest, image, app)
    thread.start()
    work.note_image_waiting()  # as the window does when an image is open before the model is ready
    from app.ui.state.messages import LoadRequest

    receiver.load.emit(LoadRequest(1, model_path, device, ""))
    QTimer.singleShot(int(float(timeout_s) * 1000), lambda: receiver.fail(f"no result in {timeout_s} s"))
    app.exec()
    thread.quit()
    thread.wait()
    facts = {"device": device, **receiver.facts}
    print(json.dumps(facts))
    on_gpu = facts.get("provider") not in (None, "CPUExecutionProvider")
    ok = "error" not in facts and facts.get("session_on_worker_thread") and (device == "cpu" or
                                                                             (on_gpu and facts.get("nvml")))
    if not ok:
        print(f"worker check failed: {facts.get('error') or facts.get('fallback_reason') or facts}", file=sys.stderr)
    return 0 if ok else 1


def _receiver(work, latest, image: str, app):
    """A QObject on this (the "GUI") thread whose slots play the window's part."""
    import threading

    from PySide6.QtCore import QObject, Signal, Slot

    from app.inference.runtime.telemetry import gpu_memory
    from app.ui.state.messages import ViewKey, ViewRequest

    class Receiver(QObject):
        load = Signal(object)  # LoadRequest
        process = Signal(object)  # ViewRequest

        def __init__(self) -> None:
            super().__init__()
            self.facts: dict = {}
            self.started = time.perf_counter()

        @Slot(object)
        def on_model(self, summary) -> None:
            self.facts.update(provider=summary.info.provider, fallback_reason=summary.info.fallback_reason,
                              model_ready_ms=round((time.perf_counter() - self.started) * 1000, 1))
            self.process.emit(ViewRequest(latest.issue(), ViewKey(image, 0)))

        @Slot(object)
        def on_result(self, view) -> None:
            memory = gpu_memory(0)
            mask = view.display_mask
            self.facts.update(
                first_result_ms=round((time.perf_counter() - self.started) * 1000, 1),
                timings_ms={k: round(v, 2) for k, v in view.result.timings.items()},
                mask_classes=None if mask is None else sorted(int(c) for c in set(mask.ravel().tolist())),
                nvml=memory.text() if memory else None, process_mb=memory and memory.process_mb,
                session_on_worker_thread=bool(work.session_threads)
                and threading.get_ident() not in work.session_threads)
            app.quit()

        @Slot(object)
        def on_model_failed(self, failed) -> None:  # ModelFailed
            self.fail(failed.message)

        @Slot(object)
        def on_failed(self, failed) -> None:  # ViewFailed
            self.fail(failed.message)

        def fail(self, message: str) -> None:
            self.facts.setdefault("error", message)
            app.quit()

    receiver = Receiver()
    receiver.load.connect(work.load_model)
    receiver.process.connect(work.process_view)
    work.model_ready.connect(receiver.on_model)
    work.result_ready.connect(receiver.on_result)
    work.model_failed.connect(receiver.on_model_failed)
    work.failed.connect(receiver.on_failed)
    return receiver


def _load(folder: Path, name: str):
    path = folder / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summary(folder: str) -> int:
    """Everything the check produced, as one document, with the figures docs/PERFORMANCE.md asks for."""
    here = Path(folder)
    doc: dict = {"nvidia_smi": (here / "nvidia_smi.txt").read_text().strip() if (here / "nvidia_smi.txt").exists()
                 else None}
    for name in ("probe", "doctor", "cpu", "gpu", "gpu_no_iobinding", "gpu_host_argmax", "gpu_trt", "worker"):
        doc[name] = _load(here, name)
    doc["skipped"] = (here / "skipped.txt").read_text().splitlines() if (here / "skipped.txt").exists() else []
    cpu, gpu = doc["cpu"], doc["gpu"]
    if gpu and gpu["provider"].startswith("CPU"):
        doc["figures"] = None
        print(f"no GPU figures: the 'gpu' runs fell back to the CPU ({gpu.get('fallback_reason')})", file=sys.stderr)
    elif cpu and gpu:
        doc["figures"] = {
            "gpu_over_cpu_raw": round(gpu["raw"]["images_per_s"] / max(cpu["raw"]["images_per_s"], 1e-9), 1),
            "gpu_1080p_end_to_end_p50_ms": gpu["pipeline"]["p50_ms"],
            "gpu_pipeline_over_raw": gpu["pipeline_over_raw"],
            "vram_before_after_mb": [gpu.get("gpu_mem_used_before_mb"), gpu.get("gpu_mem_used_after_mb")],
        }
    print(json.dumps(doc, indent=2))
    for name in ("cpu", "gpu", "gpu_no_iobinding", "gpu_host_argmax", "gpu_trt"):
        d = doc[name]
        if d:
            r, p = d["raw"], d["pipeline"]
            print(f"{name:17} {d['provider']:<24} raw p50 {r['p50_ms']:7.2f} p95 {r['p95_ms']:7.2f} ms "
                  f"{r['images_per_s']:7.1f}/s | pipeline p50 {p['p50_ms']:7.2f} ms {p['images_per_s']:7.1f}/s | "
                  f"pipeline/raw {d['pipeline_over_raw']:.2f} | VRAM {d.get('gpu_mem_used_before_mb')} -> "
                  f"{d.get('gpu_mem_used_after_mb')} MB", file=sys.stderr)
    if doc.get("figures"):
        print(f"figures: {json.dumps(doc['figures'])}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    command, *rest = argv
    if command == "probe":
        return probe(*rest)
    if command == "worker":
        return worker(*rest)
    if command == "summary":
        return summary(*rest)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
