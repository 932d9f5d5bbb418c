"""A TotalSegmentator-layout results folder imports as one model, as TotalSegmentator's CLI runs its `total` task:
the committed miniature (tests/data/nnunet/totalseg, five part-models trained by nnU-Net 2.8.1 in the folders
TotalSegmentator downloads; models/training/totalseg_fixtures.py) becomes one graph holding every part's network —
its input one channel per part (each normalised as that part was trained), its output the parts' logits side by
side — and a sidecar whose classes are TotalSegmentator's merged names, in its order. Parts that would be predicted
differently, a missing part and a class TotalSegmentator does not know are one line each, with nothing written.

The last tests run the imported model end to end and compare it with nnUNetPredictor's part predictions merged as
TotalSegmentator's CLI merges them (nnunet.py: each part's labels looked up by name, later parts painted over
earlier ones); they run SegLens's nnU-Net recipe for `nnunet.parts` (app.inference.volume3d.nnunet).
"""

from __future__ import annotations

import json
import shutil
from itertools import pairwise
from pathlib import Path

import nibabel as nib
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from label_agreement import dice_per_label

from app.cli import main
from app.inference.model.builder import load_spec
from app.runs.imports.nnunet.totalseg import TASKS, merged, task_of

DATA = Path(__file__).resolve().parents[2] / "data" / "nnunet" / "totalseg"
ROOT = DATA / "results"
PARTS = (291, 292, 293, 294, 295)
TRAINED = "nnUNetTrainerNoMirroring__nnUNetPlansTiny__3d_fullres"
MERGED = ["background", "spleen", "liver", "vertebrae_L1", "heart", "autochthon_left", "autochthon_right", "sternum"]
TOTAL_PART_SIZES = (24, 26, 18, 23, 26)  # TotalSegmentator's class_map_5_parts: organs, vertebrae, cardiac, …


def part_folder(root: Path, dataset: int) -> Path:
    (found,) = root.glob(f"Dataset{dataset}_*")
    return found / TRAINED


def imported_root(tmp_path: Path, root: Path = ROOT) -> tuple[int, Path]:
    out = tmp_path / "models" / "total.onnx"
    return main(["import", "nnunet", str(root), "--out", str(out)]), out


def copied_root(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(ROOT, root)
    return root


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def one_line_nothing_written(code: int, capsys: pytest.CaptureFixture[str], out: Path) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert not out.parent.exists() or not any(out.parent.iterdir())
    return err


# --- the merged model ---------------------------------------------------------------------------------------------

def test_the_fixture_is_totalsegmentators_layout_and_under_5_mb():
    for dataset in PARTS:
        folder = part_folder(ROOT, dataset)
        assert (folder / "fold_0" / "checkpoint_final.pth").is_file()
        assert json.loads((folder / "plans.json").read_text())["configurations"]["3d_fullres"]
    assert sum(path.stat().st_size for path in DATA.rglob("*") if path.is_file()) <= 5 << 20


def test_the_root_imports_as_one_model_with_totalsegmentators_merged_classes(tmp_path):
    code, out = imported_root(tmp_path)
    assert code == 0
    spec = load_spec(out)
    assert [info.name for info in spec.classes] == MERGED
    recipe = spec.volume.nnunet
    assert [(part.outputs, part.labels) for part in recipe.parts] == [
        (3, (0, 1, 2)), (2, (0, 3)), (2, (0, 4)), (3, (0, 5, 6)), (2, (0, 7))]
    assert recipe.step == 0.8  # TotalSegmentator's CLI predicts its total task with tile_step_size 0.8
    assert spec.volume.tta == ()  # nnUNetTrainerNoMirroring: no mirroring at inference


def test_each_part_normalises_the_ct_as_it_was_trained(tmp_path):
    code, out = imported_root(tmp_path)
    assert code == 0
    channels = load_spec(out).volume.nnunet.channels
    assert len(channels) == len(PARTS)
    for channel, dataset in zip(channels, PARTS, strict=True):
        stats = json.loads((part_folder(ROOT, dataset) / "plans.json").read_text())[
            "foreground_intensity_properties_per_channel"]["0"]
        assert channel.scheme == "ct" and channel.source == 0
        assert channel.clip == (stats["percentile_00_5"], stats["percentile_99_5"])
        assert (channel.mean, channel.std) == (stats["mean"], stats["std"])
    assert len({channel.mean for channel in channels}) == len(PARTS)  # each part's own foreground


def test_the_graph_gives_each_parts_network_logits_side_by_side(tmp_path):
    """The stored patches (each part's own preprocessing of a held-out volume) as the graph's channels: its output
    is the logits PyTorch gave for each part's network, concatenated in the parts' order."""
    code, out = imported_root(tmp_path)
    assert code == 0
    patch = np.concatenate([np.load(DATA / "network" / f"{dataset}_input.npy") for dataset in PARTS], axis=1)
    expected = np.concatenate([np.load(DATA / "network" / f"{dataset}_logits.npy") for dataset in PARTS], axis=1)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {session.get_inputs()[0].name: patch})
    assert logits.shape == expected.shape == (1, 12, *patch.shape[2:])
    assert np.abs(logits - expected).max() <= 1e-4 * max(1.0, float(np.abs(expected).max()))
    assert len(np.unique(expected.argmax(axis=1))) > 1


def test_the_part_folders_given_in_any_order_make_the_same_model(tmp_path):
    out = tmp_path / "given.onnx"
    folders = [str(part_folder(ROOT, dataset).parent) for dataset in reversed(PARTS)]
    assert main(["import", "nnunet", *folders, "--out", str(out)]) == 0
    code, from_root = imported_root(tmp_path)
    assert code == 0
    assert out.with_suffix(".yaml").read_text().split("\n", 1)[1] == \
        from_root.with_suffix(".yaml").read_text().split("\n", 1)[1]  # after the header's file name
    assert len(onnx.load(str(out)).graph.node) == len(onnx.load(str(from_root)).graph.node)


def test_a_results_root_with_other_datasets_imports_the_tasks_parts(tmp_path):
    """TotalSegmentator's weights folder holds every task downloaded; the parts of the multi-part task are taken."""
    root = copied_root(tmp_path)
    shutil.copytree(part_folder(ROOT, 291), root / "Dataset299_body_1559subj" / TRAINED)
    code, out = imported_root(tmp_path, root)
    assert code == 0
    assert [info.name for info in load_spec(out).classes] == MERGED


def test_one_part_folder_alone_imports_as_its_own_model(tmp_path):
    out = tmp_path / "organs.onnx"
    assert main(["import", "nnunet", str(part_folder(ROOT, 291)), "--out", str(out)]) == 0
    spec = load_spec(out)
    assert [info.name for info in spec.classes] == ["background", "spleen", "liver"]
    assert spec.volume.nnunet.parts is None


def test_info_says_which_totalsegmentator_task_and_parts(tmp_path, capsys):
    code, out = imported_root(tmp_path)
    assert code == 0
    capsys.readouterr()
    assert main(["info", str(out), "--no-session"]) == 0
    text = capsys.readouterr().out
    assert "TotalSegmentator task total" in text
    parts = text.index("source of     nnunet.parts")
    for dataset in PARTS:
        assert part_folder(ROOT, dataset).parent.name in text[parts:]
    # one CT feeds all five parts: no "channels … CASE_0000 … CASE_0004" line asking for five files
    assert "  channels " not in text and "CASE_0004" not in text
    assert text.count("volume channel 0: CT, clip to") == len(PARTS)


# --- TotalSegmentator's own label maps ------------------------------------------------------------------------

def test_the_five_real_parts_merge_into_totalsegmentators_117_labels():
    """TotalSegmentator's released parts hold every class of its map (class_map_5_parts: 24, 26, 18, 23, 26 classes,
    in class_map's order): merged, each class keeps TotalSegmentator's own label."""
    task = task_of(PARTS)
    assert task is not None and task.name == "total" and len(task.classes) == 117
    bounds = [int(bound) for bound in np.cumsum((0, *TOTAL_PART_SIZES))]
    names = [["background", *task.classes[a:b]] for a, b in pairwise(bounds)]
    result = merged(task, names)
    assert result.classes == ("background", *task.classes)
    assert [label for part in result.labels for label in part[1:]] == list(range(1, 118))
    assert task.classes[:5] == ("spleen", "kidney_right", "kidney_left", "gallbladder", "liver")
    assert task.classes[-2:] == ("sternum", "costal_cartilages")


def test_the_tasks_know_totalsegmentators_datasets():
    assert task_of([297]).mode == "fast: 3 mm" and task_of([297]).classes == task_of(PARTS).classes
    assert task_of([850, 851]).name == "total_mr" and len(task_of([850]).classes) == 50
    assert task_of([291, 850]) is None
    assert {task.step for task in TASKS if task.name.startswith("total")} == {0.8}


# --- refusals -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "said"), [
    ("patch_size", [32, 48, 48], "patch_size [32, 48, 48]"), ("spacing", [2.0, 2.0, 2.0], "spacing [2.0, 2.0, 2.0]"),
    ("resampling_fn_data_kwargs", {"is_seg": False, "order": 1, "order_z": 0, "force_separate_z": None},
     "data resampling resample_data_or_seg_to_shape(order 1,")])
def test_parts_that_would_be_predicted_differently_are_refused_in_one_line(tmp_path, capsys, key, value, said):
    root = copied_root(tmp_path)

    def change(plans: dict) -> None:
        plans["configurations"]["3d_fullres"][key] = value

    edit_json(part_folder(root, 293) / "plans.json", change)
    code, out = imported_root(tmp_path, root)
    err = one_line_nothing_written(code, capsys, out)
    assert "Dataset293_TotalSegmentator_part3_cardiac" in err and said in err


def test_a_missing_part_is_refused_in_one_line(tmp_path, capsys):
    root = copied_root(tmp_path)
    shutil.rmtree(part_folder(root, 294).parent)
    code, out = imported_root(tmp_path, root)
    err = one_line_nothing_written(code, capsys, out)
    assert "TotalSegmentator task total" in err and "dataset 294" in err


def test_a_class_totalsegmentator_does_not_know_is_refused_in_one_line(tmp_path, capsys):
    root = copied_root(tmp_path)
    edit_json(part_folder(root, 292) / "dataset.json",
              lambda dataset: dataset.update(labels={"background": 0, "vertebra_lumbar_one": 1}))
    code, out = imported_root(tmp_path, root)
    err = one_line_nothing_written(code, capsys, out)
    assert "vertebra_lumbar_one" in err and "dataset.json" in err


def test_a_single_model_task_imports_with_totalsegmentators_step_and_name(tmp_path):
    """The fast (3 mm) task is one model whose labels are TotalSegmentator's own (made here from a part's
    network renamed: its two classes named as the task's labels 1 and 2)."""
    fast = (tmp_path / "Dataset297_TotalSegmentator_total_3mm_1559subj"
            / "nnUNetTrainer_4000epochs_NoMirroring__nnUNetPlans__3d_fullres")
    shutil.copytree(part_folder(ROOT, 291), fast)
    edit_json(fast / "dataset.json",
              lambda dataset: dataset.update(labels={"background": 0, "spleen": 1, "kidney_right": 2}))
    out = tmp_path / "fast.onnx"
    assert main(["import", "nnunet", str(fast.parent), "--out", str(out)]) == 0
    spec = load_spec(out)
    assert spec.name.startswith("TotalSegmentator task total (fast: 3 mm)")
    assert spec.volume.nnunet.step == 0.8 and spec.volume.nnunet.parts is None


# --- end to end: the recipe (app.inference.volume3d.nnunet) merging the parts ----------------------------------

def merged_reference(case: str) -> np.ndarray:
    """nnUNetPredictor's part segmentations of `case` merged as TotalSegmentator's CLI does (nnunet.py: label j of
    a part → its name → the merged label; np.copyto where the mapped part is not 0, parts in the task's order),
    as class names' indices in MERGED, in SegLens's [slice, row, column] order."""
    result: np.ndarray | None = None
    for dataset in PARTS:
        names = json.loads((part_folder(ROOT, dataset) / "dataset.json").read_text())["labels"]
        lut = np.zeros(len(names), np.uint8)
        for name, value in names.items():
            lut[value] = MERGED.index(name)
        seg = np.asarray(nib.load(DATA / "predictions" / str(dataset) / f"{case}.nii.gz").dataobj).astype(np.uint8)
        mapped = lut[seg]
        result = np.zeros_like(mapped) if result is None else result
        np.copyto(result, mapped, where=mapped != 0)
    assert result is not None
    return np.transpose(result, (2, 1, 0))


@pytest.mark.parametrize("case", ["heldout_000", "heldout_001"])
def test_seglens_run_equals_totalsegmentators_merge_of_nnunets_part_predictions(tmp_path, capsys, case):
    code, model = imported_root(tmp_path)
    assert code == 0
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / f"{case}_0000.nii.gz").symlink_to(DATA / "heldout" / f"{case}_0000.nii.gz")
    out = tmp_path / "out"
    assert main(["run", str(model), str(inputs), "--out", str(out), "--export", "nifti",
                 "--device", "cpu"]) == 0, capsys.readouterr().err
    (written,) = [p for p in out.rglob("*.nii.gz") if "score" not in p.name]
    ours = np.transpose(np.asarray(nib.load(written).dataobj), (2, 1, 0))
    theirs = merged_reference(case)
    assert ours.shape == theirs.shape
    scores = dice_per_label(ours, theirs)
    assert len(scores) >= 5, scores  # most classes predicted by the one-epoch parts
    assert min(scores.values()) >= 0.99, {MERGED[label]: round(s, 4) for label, s in scores.items()}
