"""Correcting a mask, measured (not asserted): one brush segment → the overlay repainted, on a 1920×1080 image in
the real window (offscreen), and the memory 50 undo steps hold.

    QT_QPA_PLATFORM=offscreen uv run python benchmarks/edit_bench.py [--segments 200] [--radius 12]

A segment is what one mouse move paints: the disc stamped along ~8 px (MaskEdit.segment), the changed rectangle
copied into the overlay's indexed image, and that image given to the viewer (QPixmap.fromImage). Timed around the
viewer's `edit_moved` signal, i.e. the whole work a mouse move causes on the GUI thread, then the scene painted
(the viewport's repaint, forced). Target: ≤ 16 ms per segment. Undo memory: 50 strokes of 100 segments each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.timing import wait_signal  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=200)
    parser.add_argument("--radius", type=int, default=12)
    args = parser.parse_args()
    from PIL import Image
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.ui.main_window import MainWindow
    from app.ui.state.mask_edit import MaskEdit

    app = QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / "frame.png"
        Image.open(REPO / "resources/samples/surface/surface_04_mixed.jpg").save(image)
        window = MainWindow(settings=QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat),
                            model_path=REPO / "models/surface_defects.onnx", device="cpu")
        window.persist_settings = False
        window.resize(1600, 950)
        window.show()
        window.open_model()
        wait_signal(window.model_changed)
        window.add_paths([image])
        wait_signal(window.overlay_shown)
        editor, viewer = window.editor, window.viewer
        editor.start()
        window.panel.edit.set_radius(args.radius)
        from PySide6.QtCore import Qt

        viewer.edit_pressed.emit(100.0, 300.0, Qt.KeyboardModifier.NoModifier)
        segment, painted = [], []
        for i in range(args.segments):
            x, y = 100.0 + 8 * (i % 200), 300.0 + 3 * (i // 200) + 40 * np.sin(i / 10)
            started = time.perf_counter()
            viewer.edit_moved.emit(x, y)
            segment.append((time.perf_counter() - started) * 1000)
            viewer.viewport().repaint()
            painted.append((time.perf_counter() - started) * 1000)
        viewer.edit_released.emit()
        window.editor._edit.changed = False  # a benchmark: nothing to save
        window.editor.stop()
        window.close()
    edit = MaskEdit(np.zeros((1080, 1920), np.uint8), max_steps=50)
    for stroke in range(50):
        edit.begin_stroke(1 + stroke % 3, args.radius)
        for i in range(100):
            edit.segment((100 + 8 * i, 100 + 18 * stroke), (108 + 8 * i, 100 + 18 * stroke))
        edit.end_stroke()
    print(f"brush segment (radius {args.radius}, 1920×1080), median of {args.segments}: "
          f"{statistics.median(segment):.2f} ms work, {statistics.median(painted):.2f} ms with the repaint "
          f"(p95 {sorted(painted)[int(0.95 * len(painted))]:.2f} ms)")
    print(f"undo memory, 50 strokes × 100 segments: {edit.undo_bytes / 1e6:.2f} MB "
          f"(a full 1080p mask per step would be {50 * 1920 * 1080 / 1e6:.0f} MB)")
    del app
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
