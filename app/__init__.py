"""SegLens: see what an ONNX image model says about an image.

Layers go one way — io → inference → runs → cli / ui — and only `app.ui` imports Qt (README, "Architecture").
Importing `app` itself is cheap: nothing heavy is imported here.
"""

import os
import sys

__version__ = "0.1.0"

# OpenCV's own warnings ("[ WARN:0@0.09] global grfmt_png.cpp … PNG input buffer is incomplete") would reach the
# terminal before the one line SegLens prints for a damaged file; the level is read when cv2 is first imported,
# here for every process that imports `app` (Ray's workers inherit it). A user's own setting wins.
os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")

# Run from a source tree (uv's editable install), SegLens's own modules get no .pyc at install time — uv's
# compile-bytecode covers site-packages only — and where PYTHONDONTWRITEBYTECODE is set (these machines) they
# would be compiled from source at every launch: ~40 ms, most of it before the window and the first overlay
# (docs/PERFORMANCE.md). Caching them beside the source is what an installer does at install time; the
# libraries imported after this point already have theirs. Frozen builds and read-only installs are untouched.
if not getattr(sys, "frozen", False) and os.access(os.path.dirname(__file__), os.W_OK):
    sys.dont_write_bytecode = False
