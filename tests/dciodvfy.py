"""dciodvfy (dicom3tools), the outside validator of the DICOM files SegLens writes: its errors and warnings.

Outside CI a machine without dicom3tools skips the test with the reason; in CI (`CI` set, as `.ci/run` and the
usual CI services do) a missing validator fails the test, so the check cannot silently stop running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTALL = "apt-get install dicom3tools"


@dataclass(frozen=True)
class Findings:
    errors: tuple[str, ...]
    warnings: tuple[str, ...]


def require() -> str:
    """The dciodvfy executable; skips (fails in CI) where it is not installed."""
    found = shutil.which("dciodvfy")
    if found:
        return found
    message = f"dciodvfy (dicom3tools) is not installed: {INSTALL}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must run the outside DICOM validator)")
    pytest.skip(message)


def verify(path: Path) -> Findings:
    """dciodvfy's `Error - …` and `Warning - …` lines for one file."""
    result = subprocess.run([require(), str(path)], capture_output=True, text=True, timeout=120)
    lines = [line.strip() for line in (result.stdout + result.stderr).splitlines()]
    return Findings(errors=tuple(line for line in lines if line.startswith("Error")),
                    warnings=tuple(line for line in lines if line.startswith("Warning")))
