"""A trained nnU-Net folder kept as the user's model (app.runs.imports.nnunet.layout, .library): told apart from other
folders by its names alone; imported once (every fold with checkpoint_final.pth) into the models folder, and the
same files again — where they lie does not matter — are the model already kept; a refusal leaves nothing behind.

Uses the committed CT fixture (tests/data/nnunet); needs neither torch nor nnunetv2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.errors import ModelError
from app.runs.imports.nnunet.layout import default_folds, looks_like_nnunet_folder
from app.runs.imports.nnunet.library import keep_imported, user_models_dir

DATASET = Path(__file__).resolve().parents[2] / "data" / "nnunet" / "Dataset901_CTPhantom"
TRAINED = DATASET / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"


def copied(tmp_path: Path, *, folds: tuple[str, ...] = ("0", "1"), name: str = TRAINED.name,
           dataset: str = "Dataset901_CTPhantom") -> Path:
    """A copy of the CT fixture with only `folds`, under `tmp_path/<dataset>/<name>`."""
    folder = tmp_path / dataset / name
    folder.mkdir(parents=True)
    for file in ("plans.json", "dataset.json", "dataset_fingerprint.json"):
        shutil.copy2(TRAINED / file, folder / file)
    for fold in folds:
        shutil.copytree(TRAINED / "fold_0", folder / f"fold_{fold}")
    return folder


def files_under(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*")) if folder.exists() else []


def test_a_trained_folder_is_told_from_other_folders_by_its_names(tmp_path):
    assert looks_like_nnunet_folder(TRAINED) and looks_like_nnunet_folder(str(TRAINED) + "/")
    assert not looks_like_nnunet_folder(DATASET)  # the dataset's folder holds trained folders: not one itself
    assert not looks_like_nnunet_folder(DATASET / "heldout") and not looks_like_nnunet_folder(TRAINED / "plans.json")
    no_folds = copied(tmp_path, folds=())
    assert not looks_like_nnunet_folder(no_folds)
    renamed = copied(tmp_path, name="nnUNetTrainer__3d_fullres")  # not <Trainer>__<Plans>__<configuration>
    assert not looks_like_nnunet_folder(renamed)
    (copied(tmp_path, dataset="D2") / "dataset.json").unlink()
    assert not looks_like_nnunet_folder(tmp_path / "D2" / TRAINED.name)


def test_unasked_an_import_takes_the_numbered_folds_final_checkpoints_else_fold_all_else_the_best(tmp_path):
    assert default_folds(TRAINED) == (("0", "1"), "final")
    folder = copied(tmp_path, folds=("0", "2", "10", "all"))
    assert default_folds(folder) == (("0", "2", "10"), "final")
    (folder / "fold_2" / "checkpoint_final.pth").rename(folder / "fold_2" / "checkpoint_best.pth")
    assert default_folds(folder) == (("0", "10"), "final")  # a fold still training has no final checkpoint yet
    only_all = copied(tmp_path, folds=("all",), dataset="D2")
    assert default_folds(only_all) == (("all",), "final")
    best = copied(tmp_path, folds=("0",), dataset="D3")
    (best / "fold_0" / "checkpoint_final.pth").rename(best / "fold_0" / "checkpoint_best.pth")
    assert default_folds(best) == (("0",), "best")
    (best / "fold_0" / "checkpoint_best.pth").unlink()
    with pytest.raises(ModelError, match="no fold_N folder holds checkpoint_final.pth or checkpoint_best.pth"):
        default_folds(best)


def test_a_folder_is_imported_once_and_the_same_files_anywhere_are_the_model_kept(tmp_path):
    models = tmp_path / "models"
    steps: list[str] = []
    first = keep_imported(TRAINED, models=models, step=steps.append)
    assert not first.reused and first.folds == ("0", "1") and first.checkpoint == "checkpoint_final.pth"
    assert first.model.parent.parent == models and first.model.name == "Dataset901_CTPhantom_3d_fullres.onnx"
    assert first.model.parent.name.startswith(f"Dataset901_CTPhantom__{TRAINED.name}-")
    assert first.model.with_suffix(".yaml").is_file()
    assert steps == [f"reading folds 0, 1 of {TRAINED.name}", f"compiling folds 0, 1 of {TRAINED.name} into ONNX"]
    written = first.model.stat().st_mtime_ns
    again = keep_imported(TRAINED, models=models)
    assert again.reused and again.model == first.model and first.model.stat().st_mtime_ns == written
    elsewhere = tmp_path / "copy" / "Dataset901_CTPhantom" / TRAINED.name  # the same files copied elsewhere
    shutil.copytree(TRAINED, elsewhere)
    assert keep_imported(elsewhere, models=models).model == first.model
    assert len(list(models.iterdir())) == 1


def test_other_checkpoints_are_another_model_and_a_model_without_its_sidecar_is_imported_again(tmp_path):
    models = tmp_path / "models"
    kept = keep_imported(TRAINED, models=models)
    one_fold = copied(tmp_path, folds=("0",))
    other = keep_imported(one_fold, models=models)
    assert not other.reused and other.folds == ("0",) and other.model.parent != kept.model.parent
    shutil.copy2(TRAINED / "fold_1" / "checkpoint_final.pth", one_fold / "fold_0" / "checkpoint_final.pth")
    changed = keep_imported(one_fold, models=models)
    assert not changed.reused and changed.model.parent not in (kept.model.parent, other.model.parent)
    kept.model.with_suffix(".yaml").unlink()  # an import stopped between its two files
    assert not keep_imported(TRAINED, models=models).reused
    assert kept.model.with_suffix(".yaml").is_file()


@pytest.mark.parametrize("broken", ["plans", "checkpoint", "fold"])
def test_a_refused_folder_is_one_line_and_leaves_nothing_in_the_models_folder(tmp_path, broken):
    folder = copied(tmp_path)
    if broken == "plans":
        (folder / "plans.json").write_text("{ not json")
    elif broken == "checkpoint":
        (folder / "fold_1" / "checkpoint_final.pth").write_bytes(b"not a zip")
    else:
        (folder / "fold_1" / "checkpoint_final.pth").unlink()
        (folder / "fold_1" / "checkpoint_final.pth").symlink_to(tmp_path / "elsewhere.pth")
        (tmp_path / "elsewhere.pth").write_bytes((TRAINED / "fold_1" / "checkpoint_final.pth").read_bytes())
    models = tmp_path / "models"
    models.mkdir()
    with pytest.raises(ModelError) as refused:
        keep_imported(folder, models=models)
    assert "\n" not in str(refused.value) and str(folder) in str(refused.value)
    assert files_under(models) == []


def test_the_models_folder_is_in_the_users_data(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert user_models_dir() == tmp_path / "data" / "SegLens" / "models"
