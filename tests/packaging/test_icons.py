"""The app icon: the SVG source, the rendered PNG/ICO files (committed, made by tools/make_icons.py), the Linux
desktop entry packaging/build.py writes, and the window icon the viewer sets."""

from __future__ import annotations

import configparser
import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from PIL import Image

ICONS = REPO / "resources" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build():
    return load_module("seglens_build", REPO / "packaging" / "build.py")


def test_svg_is_self_contained():
    root = ET.parse(ICONS / "seglens.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("viewBox") == "0 0 256 256"
    text = (ICONS / "seglens.svg").read_text()
    assert "href" not in text and "url(" not in text  # no external (or any) references
    from PySide6.QtSvg import QSvgRenderer

    assert QSvgRenderer(str(ICONS / "seglens.svg")).isValid()


def assert_not_blank(image: Image.Image) -> None:
    alpha = np.asarray(image.convert("RGBA"))[..., 3]
    assert (alpha == 255).mean() > 0.5 and (alpha == 0).any()  # an opaque tile with transparent corners
    assert len(np.unique(np.asarray(image.convert("RGB")).reshape(-1, 3), axis=0)) > 4  # not one flat colour


@pytest.mark.parametrize("size", PNG_SIZES)
def test_png_sizes(size):
    with Image.open(ICONS / f"seglens-{size}.png") as image:
        assert image.size == (size, size) and image.mode == "RGBA"
        assert_not_blank(image)


def test_top_level_icons_for_the_executables():
    with Image.open(REPO / "resources" / "seglens.png") as image:
        assert image.size == (256, 256)
    assert (REPO / "resources" / "seglens.png").read_bytes() == (ICONS / "seglens-256.png").read_bytes()
    with Image.open(REPO / "resources" / "seglens.ico") as ico:
        assert ico.format == "ICO"
        assert sorted(ico.info["sizes"]) == [(s, s) for s in ICO_SIZES]
        for size in ICO_SIZES:
            ico.size = (size, size)
            ico.load()
            assert ico.size == (size, size)
            assert_not_blank(ico)


# Qt's raster engine anti-aliases edges with the SIMD paths of the CPU it runs on: the same SVG renders a few
# levels apart at edge pixels on another CPU (the bytes differ, the picture does not). A stale icon — another
# drawing — differs by far more than this in many pixels.
MAX_LEVEL_DIFFERENCE = 24  # one channel of one pixel, premultiplied by its alpha, out of 255
MAX_MEAN_DIFFERENCE = 0.5  # over every channel of every pixel


def _premultiplied(image: Image.Image) -> np.ndarray:
    """RGBA as floats with the colour multiplied by alpha (a nearly transparent pixel's colour means nothing)."""
    rgba = np.asarray(image.convert("RGBA"), dtype=np.float64)
    return np.concatenate([rgba[..., :3] * rgba[..., 3:] / 255, rgba[..., 3:]], axis=-1)


def _frames(path: Path) -> dict[tuple[int, int], np.ndarray]:
    """Each size's pixels in a PNG (one) or an ICO (one per size)."""
    with Image.open(path) as image:
        if image.format != "ICO":
            return {image.size: _premultiplied(image)}
        frames = {}
        for size in sorted(image.info["sizes"]):
            image.size = size
            image.load()
            frames[size] = _premultiplied(image)
        return frames


def assert_same_picture(made: Path, committed: Path) -> None:
    new, old = _frames(made), _frames(committed)
    assert new.keys() == old.keys(), f"{committed} is stale (sizes {sorted(old)}, made {sorted(new)})"
    for size, pixels in new.items():
        difference = np.abs(pixels - old[size])
        assert difference.max() <= MAX_LEVEL_DIFFERENCE and difference.mean() <= MAX_MEAN_DIFFERENCE, (
            f"{committed} {size}: up to {difference.max():.0f} levels apart, {difference.mean():.2f} on average: "
            "stale, run tools/make_icons.py")


def test_rendered_files_are_up_to_date(qapp, tmp_path):  # qapp first: a QApplication, not the tool's QGuiApplication
    """The committed files are what tools/make_icons.py makes from the SVG — compared as pictures, with the
    tolerance of Qt's anti-aliasing on another CPU, not byte for byte."""
    make_icons = load_module("make_icons", REPO / "tools" / "make_icons.py")
    written = make_icons.make_icons(ICONS / "seglens.svg", tmp_path)
    assert len(written) == len(PNG_SIZES) + 2
    for path in written:
        assert_same_picture(path, REPO / path.relative_to(tmp_path))


def test_another_drawing_is_not_within_the_tolerance(tmp_path):
    """The tolerance still tells a stale icon: the 64 px icon with a 6×6 patch of another colour is refused, and
    one with every edge level moved by 2 (what another CPU's anti-aliasing does) is not."""
    with Image.open(ICONS / "seglens-64.png") as image:
        pixels = np.asarray(image.convert("RGBA")).copy()
    moved = pixels.copy()
    edges = (pixels[..., 3] > 0) & (pixels[..., 3] < 255)
    moved[edges, :3] = np.clip(moved[edges, :3].astype(int) + 2, 0, 255).astype(np.uint8)
    Image.fromarray(moved).save(tmp_path / "moved.png")
    assert_same_picture(tmp_path / "moved.png", ICONS / "seglens-64.png")
    patched = pixels.copy()
    patched[29:35, 29:35] = (255, 0, 255, 255)
    Image.fromarray(patched).save(tmp_path / "patched.png")
    with pytest.raises(AssertionError, match="stale"):
        assert_same_picture(tmp_path / "patched.png", ICONS / "seglens-64.png")


@pytest.mark.parametrize("folder", ["/opt/SegLens", "/home/me/my apps/SegLens"])
def test_desktop_entry(build, folder):
    text = build.desktop_entry(Path(folder))
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read_string(text)
    entry = parser["Desktop Entry"]
    assert entry["Type"] == "Application" and entry["Name"] == "SegLens"
    assert entry["GenericName"] and entry["Comment"] and entry["Terminal"] == "false"
    assert entry["Categories"] == "Graphics;Science;MedicalSoftware;"
    assert set(entry["MimeType"].rstrip(";").split(";")) >= {"image/png", "image/jpeg", "image/tiff",
                                                             "application/dicom"}
    assert entry["Icon"] == f"{folder}/seglens.png" and Path(entry["Icon"]).is_absolute()
    assert entry["TryExec"] == f"{folder}/SegLens"
    exec_line = entry["Exec"]
    assert exec_line.endswith(" %F")
    if " " in folder:  # quoted as the spec asks
        assert exec_line == f'"{folder}/SegLens" %F'
    else:
        assert exec_line == f"{folder}/SegLens %F"


def test_add_desktop_files(build, tmp_path, monkeypatch):
    monkeypatch.setattr(build.os, "name", "posix")
    target = tmp_path / "SegLens"
    target.mkdir()
    build.add_desktop_files(target)
    assert (target / "seglens.png").read_bytes() == (REPO / "resources" / "seglens.png").read_bytes()
    assert f"Exec={target}/SegLens %F" in (target / "seglens.desktop").read_text()
    assert (target / "install-desktop-entry.sh").stat().st_mode & 0o111


def test_window_icon_is_set(qapp):
    from PySide6.QtGui import QGuiApplication

    from app.paths import icon_files
    from app.ui.app import set_app_identity

    assert [int(p.stem.split("-")[1]) for p in icon_files()] == list(PNG_SIZES)
    set_app_identity(qapp)
    icon = qapp.windowIcon()
    assert not icon.isNull() and icon.availableSizes()
    assert QGuiApplication.desktopFileName() == "seglens"
    assert QGuiApplication.applicationDisplayName() == "SegLens"


def test_main_window_shows_the_icon(qtbot, qapp, tmp_path):
    from PySide6.QtCore import QSettings

    from app.ui.app import set_app_identity
    from app.ui.main_window import MainWindow

    set_app_identity(qapp)
    window = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat),
                        model_path=None, device="cpu")
    qtbot.addWidget(window)
    window.show()
    try:
        assert not window.windowIcon().isNull()  # inherited from the application
    finally:
        window.close()
