"""Whole-or-nothing files: permissions, temporaries and what a killed run leaves behind."""

from __future__ import annotations

import os
import stat
import sys

import numpy as np
import pytest

from app.io.files import atomic_write, encode_png


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_honour_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        atomic_write(tmp_path / "a_mask.png", encode_png(np.zeros((3, 4), np.uint8)))
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a_mask.png").stat().st_mode) == mode
