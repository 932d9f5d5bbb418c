"""The right first picture: a bundled model opens with its own samples (`seglens --model ct_demo` shows the CT
series, not the surface photos under lung and bone labels), at start and from Model ▸ Bundled models, while the
list holds nothing the reader opened."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.paths import models_dir, samples_dir

TIMEOUT = 20_000


class _Held:
    def open_file(self):
        return None


def _listed_folders(window) -> set[Path]:
    return {Path(p).resolve().relative_to(samples_dir().resolve()).parts[0] for p in window.files.paths()}


@pytest.mark.parametrize(("name", "folder"), [("ct_demo", "ct"), ("nuclei", "nuclei"), ("defect_type", "defect_crops"),
                                              ("surface_anomaly", "anomaly"), ("surface_defects", "surface")])
def test_a_bundled_model_started_without_paths_opens_its_own_samples(make_main_window, name, folder):
    from app.ui.app import _load_initial

    window = make_main_window(models_dir() / f"{name}.onnx", load=False)
    _load_initial(window, argparse.Namespace(paths=[], model=None), _Held())
    assert window.files.paths(), "nothing was opened"
    assert _listed_folders(window) == {folder}


def test_paths_given_win_over_the_samples(make_main_window):
    from app.ui.app import _load_initial

    window = make_main_window(models_dir() / "ct_demo.onnx", load=False)
    nuclei = samples_dir() / "nuclei"
    _load_initial(window, argparse.Namespace(paths=[nuclei], model=None), _Held())
    assert _listed_folders(window) == {"nuclei"}


def _bundled_action(window, name):
    menus = {action.text().replace("&", ""): action.menu() for action in window.menuBar().actions()}
    [bundled] = [a.menu() for a in menus["Model"].actions() if a.menu() is not None and "Bundled" in a.text()]
    bundled.aboutToShow.emit()  # filled when first opened
    [action] = [a for a in bundled.actions() if a.text() == name]
    return action


def test_the_bundled_models_menu_swaps_the_samples_for_the_models_own(make_main_window, qtbot):
    window = make_main_window(models_dir() / "surface_defects.onnx", load=False)
    window.add_paths([samples_dir() / "surface"])
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        _bundled_action(window, "ct_demo").trigger()
    assert _listed_folders(window) == {"ct"}
    assert window.model_path == models_dir() / "ct_demo.onnx"


def test_the_bundled_models_menu_keeps_the_readers_own_images(make_main_window, qtbot, tmp_path):
    from PIL import Image

    Image.new("RGB", (32, 32)).save(tmp_path / "mine.png")
    window = make_main_window(models_dir() / "surface_defects.onnx", load=False)
    window.add_paths([tmp_path])
    with qtbot.waitSignal(window.model_changed, timeout=TIMEOUT):
        _bundled_action(window, "ct_demo").trigger()
    assert window.files.paths() == [str(tmp_path / "mine.png")]


def test_a_model_named_like_a_bundled_one_elsewhere_has_no_samples(tmp_path):
    from app.ui.controllers.loader import bundled_samples

    copy = tmp_path / "ct_demo.onnx"
    copy.write_bytes((models_dir() / "ct_demo.onnx").read_bytes())
    assert bundled_samples(copy) is None
    assert bundled_samples(models_dir() / "ct_demo.onnx") == samples_dir() / "ct"
