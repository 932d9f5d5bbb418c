from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SEGLENS_LOG_DIR", tempfile.mkdtemp(prefix="seglens-test-logs-"))  # not the user's folder
# nor the user's config folder: an --anonymize test without SEGLENS_PSEUDONYM_KEY makes its pseudonym.key here
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="seglens-test-config-")
sys.path.insert(0, str(Path(__file__).parent))  # tests/onnx_factory.py (models built on the fly)
# tests/cli's end-to-end modules lend helpers to other folders (test_cli.read_report, test_compare_volumes' series,
# test_cli_anonymize_reports' PACS export): importable from any test, even one run alone
sys.path.insert(1, str(Path(__file__).parent / "cli"))

import onnx_factory

REPO = Path(__file__).resolve().parent.parent


_PILLOW_OPEN = Image.open  # Pillow's own, taken before any test module is collected


@pytest.fixture(autouse=True)
def _pillow_opens_as_it_ships():
    """Ultralytics (a test-only reference, imported when the parity modules are collected) replaces PIL.Image.open
    for the whole process with one that imports pi_heif on a file Pillow cannot identify: SegLens's decoding is
    tested with Pillow's own, before and after every test."""
    Image.open = _PILLOW_OPEN
    yield
    Image.open = _PILLOW_OPEN


@pytest.fixture
def models(tmp_path: Path):
    """Build a named factory model in a fresh folder: `models("rgb_classes")` → path."""
    folder = tmp_path / "models"
    folder.mkdir()

    def build(kind: str, name: str | None = None, **kwargs) -> Path:
        return getattr(onnx_factory, kind)(folder / f"{name or kind}.onnx", **kwargs)

    return build


@pytest.fixture
def bad_corpus(tmp_path: Path):
    """tools/make_bad_corpus.py in a fresh folder: (folder, {file name: expected problem or None})."""
    if str(REPO / "tools") not in sys.path:
        sys.path.insert(0, str(REPO / "tools"))
    from make_bad_corpus import make_corpus

    folder = tmp_path / "dump"
    return folder, make_corpus(folder)


def stripes(height: int = 37, width: int = 53) -> np.ndarray:
    """RGB image: left third red, middle third green, right third blue (values 200)."""
    image = np.zeros((height, width, 3), np.uint8)
    a, b = width // 3, 2 * width // 3
    image[:, :a, 0] = 200
    image[:, a:b, 1] = 200
    image[:, b:, 2] = 200
    return image


def expected_stripes(height: int = 37, width: int = 53) -> np.ndarray:
    mask = np.zeros((height, width), np.uint8)
    mask[:, width // 3: 2 * width // 3] = 1
    mask[:, 2 * width // 3:] = 2
    return mask


@pytest.fixture
def model_runs(monkeypatch):
    """How many times any LocalSession ran its model since the fixture was made (each call's tensor shape)."""
    from app.inference.runtime.session import LocalSession

    calls = []
    original = LocalSession.run

    def counted(self, tensor):
        calls.append(tensor.shape)
        return original(self, tensor)

    monkeypatch.setattr(LocalSession, "run", counted)
    return calls


@pytest.fixture
def ct_model(models):
    """binary_logits on CT windowed 40/400: the +60 HU disc (0.55 of the window) is foreground, air is not."""
    path = models("binary_logits", "ct_disc")
    path.with_suffix(".yaml").write_text("input:\n  window: [40, 400]\nclasses:\n  - background\n  - {name: disc, "
                                         "color: '#ff0000'}\n")
    return path
