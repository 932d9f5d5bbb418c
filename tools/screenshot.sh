#!/usr/bin/env bash
# Screenshot the viewer under a real X server (Xvfb) and offscreen, for the README and docs/, and for looking at it.
#   bash tools/screenshot.sh [OUT_DIR] [IMAGE...]
# Needs: apt-get install -y xvfb libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0 imagemagick
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs}
shift || true
IMAGES=("$@")
[ ${#IMAGES[@]} -gt 0 ] || IMAGES=(resources/samples/surface)
PY=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT"
SETTINGS=$(mktemp --suffix=.ini)

# 1. offscreen: the window grabs itself once the first overlay is painted
QT_QPA_PLATFORM=offscreen "$PY" tools/grab_window.py "$OUT/screenshot_offscreen.png" "$SETTINGS" "${IMAGES[@]}"

# 2. a real X server: the whole screen, as a user would see it
Xvfb :99 -screen 0 1600x1000x24 >/dev/null 2>&1 &
XVFB=$!
trap 'kill $XVFB 2>/dev/null || true' EXIT
sleep 1
DISPLAY=:99 QT_QPA_PLATFORM=xcb "$PY" tools/grab_window.py "$OUT/screenshot_xvfb_window.png" "$SETTINGS" \
    "${IMAGES[@]}" --then-screen "$OUT/screenshot_xvfb.png"
echo "screenshots in $OUT"
