"""SegLens: see what an ONNX image model says about an image.

Layers go one way — io → inference → runs → cli / ui — and only `app.ui` imports Qt (README, "Architecture").
Importing `app` itself is cheap: nothing heavy is imported here.
"""

import os
import sys

__version__ = "0.1.0"

# Run from a source tree (uv's editable install), SegLens's own modules get no .pyc at install time — uv's
# compile-bytecode covers site-packages only — and where PYTHONDONTWRITEBYTECODE is set (these machines) they
# would be compiled from source at every launch: ~40 ms, most of it before the window and the first overlay
# (docs/PERFORMANCE.md). Caching them beside the source is what an installer does at install time; the
# libraries imported after this point already have theirs. Frozen builds and read-only installs are untouched.
if not getattr(sys, "frozen", False) and os.access(os.path.dirname(__file__), os.W_OK):
    sys.dont_write_bytecode = False
