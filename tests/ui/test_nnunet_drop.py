"""An nnU-Net trained-model folder dropped on the viewer (app/ui/controllers/model_import.py, its worker on the
"import" thread, app.runs.imports.nnunet.library): imported into the user's models folder with a status line, then
opened as the model; a CT volume then runs with the dataset's labels shown; the same folder dropped again opens the
model kept, not a second import; a malformed folder is the importer's one line and nothing is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.ui.test_main_window import drop

TIMEOUT = 60_000
DATASET = Path(__file__).resolve().parents[1] / "data" / "nnunet" / "Dataset901_CTPhantom"
TRAINED = DATASET / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"


@pytest.fixture
def models_folder(monkeypatch, tmp_path) -> Path:
    """The user's models folder (platformdirs' user_data_dir), in this test's own folder."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data" / "SegLens" / "models"


def dropped(qtbot, win, folder) -> list[str]:
    """Drop `folder` on the window and wait for its import to end; every status line shown meanwhile."""
    lines: list[str] = []
    win.status.messageChanged.connect(lines.append)
    from app.ui.controllers.model_import import importer_of

    with qtbot.waitSignal(importer_of(win).finished, timeout=TIMEOUT):
        drop(win, [folder])
    return lines


def test_a_dropped_trained_folder_is_imported_opened_and_runs_a_ct_volume_with_its_labels(
        qtbot, make_main_window, models_folder):
    win = make_main_window(None)
    with qtbot.waitSignal(win.model_changed, timeout=TIMEOUT):
        lines = dropped(qtbot, win, TRAINED)
    (kept,) = models_folder.glob("*/Dataset901_CTPhantom_3d_fullres.onnx")
    assert win.model_path == kept and kept.with_suffix(".yaml").is_file()
    assert [spec_class.name for spec_class in win.summary.spec.classes] == ["background", "liver", "bone"]
    assert lines[0] == f"Importing the nnU-Net model {TRAINED.name}…"
    assert f"Importing the nnU-Net model: compiling folds 0, 1 of {TRAINED.name} into ONNX…" in lines
    assert f"{TRAINED.name}: imported (folds 0, 1) as {kept.name}" in win.status.currentMessage()
    assert win.files.paths() == []  # the folder is a model, not a list of pictures
    volume = DATASET / "heldout" / "heldout_000_0000.nii.gz"
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([volume])
    qtbot.waitUntil(lambda: win.panel.legend.volume_text().startswith("Whole volume: all"), timeout=TIMEOUT)
    figures = win.panel.legend.volume_figures()
    assert set(figures) == {1, 2} and all(float(text.split()[0]) > 0 for text in figures.values())
    labels = set()
    for k in range(win.slices.slider.maximum() + 1):  # every slice's overlay comes from the one 3D result
        with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
            win.show_path(win.files.current_path(), k)
        labels |= set(np.unique(win.state.on_screen.display_mask).tolist())
    assert labels == {0, 1, 2}


def test_the_same_folder_dropped_again_opens_the_model_kept_without_importing_it_again(
        qtbot, make_main_window, models_folder, tmp_path):
    win = make_main_window(None)
    with qtbot.waitSignal(win.model_changed, timeout=TIMEOUT):
        dropped(qtbot, win, TRAINED)
    (kept,) = models_folder.glob("*/*.onnx")
    written = kept.stat().st_mtime_ns
    copy = tmp_path / "copy" / DATASET.name / TRAINED.name  # the same files somewhere else
    shutil.copytree(TRAINED, copy)
    with qtbot.waitSignal(win.model_changed, timeout=TIMEOUT):
        lines = dropped(qtbot, win, copy)
    assert not any("compiling" in line for line in lines)
    assert f"{TRAINED.name}: imported before (folds 0, 1); opening {kept.name}" in win.status.currentMessage()
    assert win.model_path == kept and kept.stat().st_mtime_ns == written
    assert len(list(models_folder.iterdir())) == 1


def test_a_malformed_trained_folder_is_one_line_keeps_the_model_shown_and_nothing(
        qtbot, make_main_window, models_folder, models, tmp_path):
    model = models("rgb_classes")
    win = make_main_window(model)
    shown = win.summary
    broken = tmp_path / DATASET.name / TRAINED.name
    shutil.copytree(TRAINED, broken)
    (broken / "plans.json").write_text('{"configurations": {}}')
    failures = []
    from app.ui.controllers.model_import import importer_of

    importer_of(win).finished.connect(failures.append)
    dropped(qtbot, win, broken)
    (line,) = failures
    assert line and "\n" not in line and str(broken / "plans.json") in line and "3d_fullres" in line
    assert win.status.currentMessage() == f"Not imported: {line}"
    assert win.model_path == model and win.summary is shown  # the model shown stays, not reloaded
    assert not models_folder.exists() or list(models_folder.iterdir()) == []
