#!/usr/bin/env bash
# One script for a machine with an NVIDIA GPU (under 5 minutes): providers, CPU vs GPU p50/p95 at 1920×1080,
# pipeline ÷ raw, VRAM before/after. Run from the repository root in an environment where seglens is installed
# (e.g. `uv sync && uv pip install 'onnxruntime-gpu[cuda,cudnn]' nvidia-cublas`, or the cuda13 frozen build).
#     bash benchmarks/gpu_check.sh [MODEL]        # figures go to docs/PERFORMANCE.md by hand
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODEL=${1:-models/surface_defects.onnx}
OUTDIR=${OUT:-$(mktemp -d)}

echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv || true
echo "== doctor"; timeout 60 "$PY" -m app.cli doctor
echo "== CPU, 1920x1080 (20 runs)"
timeout 120 "$PY" -m app.cli bench "$MODEL" --size 1080x1920 --device cpu --runs 20 --json | tee "$OUTDIR/cpu.json"
echo "== GPU, 1920x1080 (200 runs, masks written)"
timeout 120 "$PY" -m app.cli bench "$MODEL" --size 1080x1920 --device cuda --runs 200 --json | tee "$OUTDIR/gpu.json"
echo "== GPU, TensorRT + device argmax (100 runs)"
timeout 120 "$PY" -m app.cli bench "$MODEL" --size 1080x1920 --device cuda --runs 100 --json \
    --runtime tensorrt=true --runtime device_argmax=on | tee "$OUTDIR/gpu_trt.json" || true
echo "== summary"
"$PY" - "$OUTDIR" <<'PY'
import json, sys, pathlib
for name in ("cpu", "gpu", "gpu_trt"):
    path = pathlib.Path(sys.argv[1]) / f"{name}.json"
    try:
        d = json.loads(path.read_text())
    except Exception as exc:
        print(f"{name}: no result ({exc})"); continue
    r, p = d["raw"], d["pipeline"]
    print(f"{name:8} {d['provider']:<16} raw p50 {r['p50_ms']:.1f} p95 {r['p95_ms']:.1f} ms ({r['images_per_s']:.1f}/s) | "
          f"pipeline {p['images_per_s']:.1f}/s | pipeline/raw {d['pipeline_over_raw']:.2f} | "
          f"GPU/CPU {d.get('gpu_over_cpu') or '-'} | VRAM {d.get('gpu_mem_used_before_mb')} -> {d.get('gpu_mem_used_after_mb')} MB")
PY
