"""Render the app icon (resources/icons/seglens.svg) to the PNG and ICO files the app and the frozen build use.

    uv run python tools/make_icons.py

Writes resources/icons/seglens-<n>.png (16 … 512 px; the window icon), resources/seglens.png (256 px; the Linux
executable and .desktop icon) and resources/seglens.ico (16 … 256 px, PNG-compressed entries, which Windows Vista
and later read; the Windows executable's icon). Rendered by Qt's own SVG renderer, offscreen, so no extra package
is needed; the output is deterministic (the same SVG gives the same bytes), and the files are committed.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "resources" / "icons" / "seglens.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def render_png(renderer, size: int) -> bytes:
    """The SVG at size×size, as PNG bytes (ARGB, transparent outside the tile)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter

    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RuntimeError(f"could not encode the {size} px icon")
    buffer.close()
    return bytes(data)


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """A Windows .ico holding the given PNG images: ICONDIR, one ICONDIRENTRY each, then the PNG data."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))  # reserved, type 1 = icon, count
    offset = len(header) + 16 * len(sizes)
    entries, blobs = [], []
    for size in sizes:
        blob = pngs[size]
        side = 0 if size >= 256 else size  # 0 means 256 in an ICONDIRENTRY
        entries.append(struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(blob), offset))
        blobs.append(blob)
        offset += len(blob)
    return header + b"".join(entries) + b"".join(blobs)


def make_icons(svg: Path = SVG, root: Path = ROOT) -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # QPainter needs one
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise RuntimeError(f"{svg} is not a valid SVG")
    pngs = {size: render_png(renderer, size) for size in PNG_SIZES}
    written = []
    icons = root / "resources" / "icons"
    icons.mkdir(parents=True, exist_ok=True)
    for size, blob in pngs.items():
        written.append(icons / f"seglens-{size}.png")
        written[-1].write_bytes(blob)
    written.append(root / "resources" / "seglens.png")
    written[-1].write_bytes(pngs[256])
    written.append(root / "resources" / "seglens.ico")
    written[-1].write_bytes(ico_bytes({size: pngs[size] for size in ICO_SIZES}))
    return written


def main() -> int:
    for path in make_icons():
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
