#!/usr/bin/env bash
# The GPU proof, for the lent GPU machine exactly as it is (no registry there; see docs/PERFORMANCE.md, "GPU").
# Prepared here with `bash benchmarks/gpu_prepare.sh`, which prints the device calls to send back to back:
#     bash benchmarks/gpu_check.sh --receive K     one part of the carried wheels (every call but the last)
#     bash benchmarks/gpu_check.sh [MODEL]         the last call: assemble, install, then the check (< 5 min)
# Also runs where SegLens and onnxruntime-gpu are installed already (no .gpu/manifest.json: nothing assembled).
# The check: nvidia-smi, a CUDA probe (a clear "no GPU: …" line and exit 3 when there is none), doctor, CPU vs
# GPU p50/p95 at 1920×1080, pipeline ÷ raw, VRAM before/after, IOBinding off, host-side argmax, TensorRT when
# present, and the viewer's worker on its QThread with the NVML reading. One JSON summary and the log go to $OUT.
# DRY_RUN=1 goes on past a failed probe with a tenth of the runs: every step tried where there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

if [ "${1:-}" = "--receive" ]; then
    exec "$PY" benchmarks/gpu_bundle.py receive "$2"
fi

MODEL=${1:-models/surface_defects.onnx}
IMAGE=${IMAGE:-resources/samples/surface/surface_01_scratches.jpg}
OUTDIR=${OUT:-$(mktemp -d)}
WORK=$(mktemp -d)
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/gpu_check.log") 2>&1
tee_pid=$!
started=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" "$((SECONDS - started))"; }
skip() { echo "skipped: $*" | tee -a "$WORK/skipped.txt"; }
finish() {
    step "summary"
    "$PY" benchmarks/gpu_check.py summary "$WORK" > "$OUTDIR/gpu_summary.json"
    echo "summary: $OUTDIR/gpu_summary.json (total $((SECONDS - started)) s)"
    exec >&- 2>&-
    wait "$tee_pid" 2>/dev/null   # the log is complete before the call returns $OUT
    exit "$1"
}

if [ -f "${SEGLENS_GPU_BUNDLE:-.gpu}/manifest.json" ]; then
    step "assemble the carried wheels into a scratch site"
    env_lines=$("$PY" benchmarks/gpu_bundle.py assemble) || { echo "bundle: assembly failed (see above)"; exit 2; }
    echo "$env_lines"
    eval "$env_lines"
fi
"$PY" -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.__file__, o.get_available_providers())"

step "nvidia-smi"
if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader \
        | tee "$WORK/nvidia_smi.txt"
else
    echo "nvidia-smi: not found" | tee "$WORK/nvidia_smi.txt"
fi

step "probe: a CUDA session through the app's own code"
timeout 90 "$PY" benchmarks/gpu_check.py probe "$MODEL" > "$WORK/probe.json"
rc=$?
cat "$WORK/probe.json"
if [ "$rc" -ne 0 ] && [ "${DRY_RUN:-0}" != 1 ]; then finish "$rc"; fi   # 3: no GPU, its cause on the line above
runs() { if [ "${DRY_RUN:-0}" = 1 ]; then echo $(($1 / 10)); else echo "$1"; fi; }

bench() {  # name, then bench arguments
    local name=$1; shift
    step "$name"
    timeout 100 "$PY" -m app.cli bench "$MODEL" --size 1080x1920 --json "$@" > "$WORK/$name.json" \
        || skip "$name (exit $?)"
    cat "$WORK/$name.json"
}
step "doctor"
timeout 60 "$PY" -m app.cli doctor --json > "$WORK/doctor.json" || skip "doctor (exit $?)"
timeout 5 "$PY" -c "import json,sys; d=json.load(open('$WORK/doctor.json')); print(d.get('verdict', d))" || true
bench cpu --device cpu --runs "$(runs 20)"
bench gpu --device cuda --runs "$(runs 200)" --save mask
bench gpu_no_iobinding --device cuda --runs "$(runs 100)" --runtime io_binding=off
bench gpu_host_argmax --device cuda --runs "$(runs 100)" --runtime io_binding=off --runtime device_argmax=off
if "$PY" -c "import onnxruntime as o, sys; sys.exit('TensorrtExecutionProvider' not in o.get_available_providers())" \
    && (ldconfig -p | grep -q 'libnvinfer.so' || "$PY" -c "import tensorrt" 2>/dev/null); then
    bench gpu_trt --device cuda --runs "$(runs 100)" --runtime tensorrt=true --runtime device_argmax=on
else
    skip "gpu_trt: TensorRT (libnvinfer) is not installed here"
fi

step "the viewer's worker, headless (QtCore only)"
QT_QPA_PLATFORM=offscreen timeout 120 "$PY" benchmarks/gpu_check.py worker "$MODEL" "$IMAGE" cuda \
    > "$WORK/worker.json" || skip "worker (exit $?)"
cat "$WORK/worker.json"
finish "$rc"
