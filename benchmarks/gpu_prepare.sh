#!/usr/bin/env bash
# Run here, on the development machine: downloads the cp312 wheels uv.lock pins for the GPU check (onnxruntime-gpu,
# pydicom, platformdirs, shiboken6, PySide6 trimmed to QtCore), splits them into parts that fit a device call
# beside the working tree (.gpu/, git-ignored) and prints the calls to send back to back. Commit first: files
# added to the tree afterwards count against each call's 64 MiB. See docs/PERFORMANCE.md, "GPU".
#     bash benchmarks/gpu_prepare.sh [--python 3.12] [--part-mib N] [--offline-wheels DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3   # needs the `packaging` module (in the project's environment: `uv sync`)
exec "$PY" benchmarks/gpu_bundle.py prepare "$@"
