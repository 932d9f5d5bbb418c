#!/usr/bin/env bash
# Ultralytics (test-only reference of tests/inference/yolo/test_yolo_parity.py and tests/runs/labels) beside the
# project's CPU torch, in the venv of the Python given as $1.
#
# Ultralytics needs torchvision. PyPI's torchvision for torch 2.13.0 (0.28.0, the only one whose metadata pins
# torch==2.13.0) is the CUDA build: its pure-Python part and its CPU kernels (nms, roi_align, ...) work beside the
# CPU torch, but its extension _C.so names libc10_cuda.so and libtorch_cuda.so (which only the CUDA torch ships) and
# fails to load, so `import torchvision` fails ("operator torchvision::nms does not exist"). Here those two
# libraries are stand-ins: every CUDA function _C.so takes from them (c10::cuda::*, at::cuda::*, listed with nm)
# is defined as a trap, never called on a CPU tensor. A .pth file loads them (RTLD_GLOBAL) at interpreter start, so
# the first `import torchvision` anywhere in the venv (MONAI tries one) finds them. Everything goes in with
# --no-deps: the pins keep pip off the multi-GB CUDA torch; Ultralytics' other requirements that its predictor
# and exporter need (numpy, OpenCV, Pillow, PyYAML, matplotlib, requests, psutil, scipy, onnx, onnxruntime) are
# already in the venv.
set -euo pipefail
python=$1
shift
find_links=("$@")

python3 -m pip --python "$python" install --quiet --no-deps "${find_links[@]}" \
    torchvision==0.28.0 ultralytics==8.4.190 onnxslim==0.1.98 colorama==0.4.6

site=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cuda=$("$python" -c "import torch; print(torch.version.cuda or '')")
extension="$site/torchvision/_C.so"
if [ -z "$cuda" ] && readelf -d "$extension" | grep -q 'NEEDED.*\[libc10_cuda.so\]'; then
    stub="$site/torchvision_cpu_stub.libs"
    if ! command -v gcc >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev binutils
    fi
    mkdir -p "$stub"
    defined=$(for lib in "$site"/torch/lib/lib{c10,torch,torch_cpu,torch_python}.so; do
        nm -D --defined-only "$lib" | awk '{print $3}'; done | sort -u)
    missing=$(nm -D --undefined-only "$extension" | awk '{print $2}' | sort -u \
        | comm -23 - <(echo "$defined") | grep -E '^_ZNK?(2at4cuda|3c104cuda)' || true)
    [ -n "$missing" ] || { echo "torchvision_cpu: no CUDA symbols found in $extension" >&2; exit 1; }
    {
        echo "/* stand-ins for the CUDA functions of torch that torchvision's _C.so links (see .ci/torchvision_cpu.sh) */"
        i=0
        for symbol in $missing; do
            case $symbol in
                *CUDACachingAllocator9allocatorE) echo "void *data_$i __asm__(\"$symbol\") = 0;" ;;  # a pointer
                *) echo "void stub_$i(void) __asm__(\"$symbol\"); void stub_$i(void) { __builtin_trap(); }" ;;
            esac
            i=$((i + 1))
        done
    } > "$stub/c10_cuda.c"
    echo 'void torchvision_cpu_stub(void) {}' > "$stub/torch_cuda.c"
    gcc -shared -fPIC -O1 -Wl,-soname,libc10_cuda.so -o "$stub/libc10_cuda.so" "$stub/c10_cuda.c"
    gcc -shared -fPIC -O1 -Wl,-soname,libtorch_cuda.so -o "$stub/libtorch_cuda.so" "$stub/torch_cuda.c"
    libraries="'libc10_cuda.so', 'libtorch_cuda.so'"
    # the CUDA runtime _C.so also names: the system's if the loader finds one, else the copy torchvision bundles
    if ldd "$extension" | grep -q 'libcudart.so.13 => not found'; then
        cp "$site"/torchvision.libs/libcudart.*.so.13 "$stub/libcudart.so.13"
        libraries="'libcudart.so.13', $libraries"
    fi
    cat > "$site/torchvision_cpu_stub.py" <<PY
"""Loads the stand-ins for torch's CUDA libraries that torchvision's _C.so names (made by .ci/torchvision_cpu.sh),
before any import of torchvision; not once a CUDA torch, with the real libraries, is installed over the CPU one."""
import ctypes
import os

if os.path.isdir("$stub") and not os.path.exists("$site/torch/lib/libc10_cuda.so"):
    for name in ($libraries):
        ctypes.CDLL(os.path.join("$stub", name), mode=ctypes.RTLD_GLOBAL)
PY
    echo "import torchvision_cpu_stub" > "$site/torchvision_cpu_stub.pth"
    echo "torchvision_cpu: $(echo "$missing" | wc -l) CUDA symbols stood in for ($stub)"
fi

"$python" - <<'EOF'
import importlib.metadata as m

import torch
import torchvision.ops
import ultralytics

boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])
kept = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
assert kept == [0, 2], kept
print("torch", torch.__version__, "| torchvision", torchvision.__version__, "| ultralytics", ultralytics.__version__,
      "| onnxslim", m.version("onnxslim"), "| nms on CPU", kept)
EOF
