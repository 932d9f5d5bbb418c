"""Click → painted proposal in the real window (offscreen), for benchmarks/prompt_bench.py (read its docstring).

A click is QTest's press and release on the viewport at an image pixel, in edit mode with the Smart tool; it is
done when the Smart controller says the preview shows the proposal (`proposal_shown`, its own press → preview
figure beside) and the viewport has been repainted (forced). The first click on each picture is counted apart:
it waits for the encoder unless the picture was encoded ahead (the next picture is, while the user works here).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.timing import wait_signal  # noqa: E402

PICTURES = ("surface/surface_02_pits.jpg", "surface/surface_01_scratches.jpg", "nuclei/nuclei_01.png")


def _pictures(folder: Path) -> list[Path]:
    from PIL import Image

    chosen = []
    for name in PICTURES:
        source = REPO / "resources" / "samples" / name
        if not source.is_file():  # the sample set's names moved: take any of that folder
            source = sorted((source.parent).glob("*.*"))[0]
        target = folder / f"{len(chosen)}_{source.name}"
        Image.open(source).convert("RGB").save(target)
        chosen.append(target)
    return chosen


def click_to_paint(model: str, clicks: int) -> dict[str, object]:
    from PySide6.QtCore import QPointF, QSettings, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from app.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    painted, shown, first_painted = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pictures"
        folder.mkdir()
        pictures = _pictures(folder)
        window = MainWindow(settings=QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat),
                            model_path=REPO / "models/surface_defects.onnx", device="cpu")
        window.persist_settings = False
        window.resize(1280, 720)
        window.show()
        window.open_model()
        wait_signal(window.model_changed)
        window.add_paths([folder])
        wait_signal(window.overlay_shown)
        rng = np.random.default_rng(28)
        per_picture = max(2, clicks // len(pictures))
        for index in range(len(pictures)):
            if index:
                window.files.setCurrentRow(index)
                wait_signal(window.overlay_shown)
            editor, viewer = window.editor, window.viewer
            editor.start()
            smart = editor.smart
            window.panel.edit.set_tool("smart")
            deadline = time.time() + 60
            while smart.model_ready is None and time.time() < deadline:
                app.processEvents()
            h, w = smart.view.result.mask.shape[:2]
            for k in range(per_picture):
                x, y = float(rng.uniform(w / 4, 3 * w / 4)), float(rng.uniform(h / 4, 3 * h / 4))
                got: list[float] = []
                smart.proposal_shown.connect(lambda _id, ms, got=got: got.append(ms))
                started = time.perf_counter()
                QTest.mouseClick(viewer.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                                 viewer.mapFromScene(QPointF(x + 0.5, y + 0.5)))
                while not got and time.perf_counter() - started < 30:
                    app.processEvents()
                viewer.viewport().repaint()
                total = (time.perf_counter() - started) * 1000
                smart.proposal_shown.disconnect()
                (first_painted if k == 0 else painted).append(total)
                if k:
                    shown.extend(got)
                if k % 3 == 2:
                    smart.discard()  # a fresh prompt now and then (else the points pile up)
            smart.discard()
            editor.stop()
        window.close()
    return {"clicks": len(painted), "pictures": len(pictures),
            "click_to_painted_ms_median": round(statistics.median(painted), 1),
            "click_to_painted_ms_p95": round(float(np.percentile(painted, 95)), 1),
            "press_to_preview_ms_median": round(statistics.median(shown), 1),
            "first_click_per_picture_ms": [round(v, 1) for v in first_painted],
            "note": "first click of picture 2 and 3: encoded ahead while the user was on the one before"}
