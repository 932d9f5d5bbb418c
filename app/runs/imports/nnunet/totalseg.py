"""TotalSegmentator's tasks as its own CLI runs them, learnt from its code (totalsegmentator/map_tasks_config.py,
map_to_binary.py, nnunet.py; Apache-2.0): which nnU-Net v2 datasets (by id) make a task, in the order its CLI paints
their label maps over each other; the task's merged label map (class_map[task]: the class names, label 1 first);
the tile step its CLI predicts with. A multi-part task (`total`: five part-models) is merged as its CLI does: each
part's label j is looked up by name (the part's dataset.json names are TotalSegmentator's, as its conversion script
writes them) in the merged map, and a later part's non-background voxels paint over an earlier part's.

Data and pure functions only; the import that builds one model from the parts is app.runs.imports.nnunet.parts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_DATASET = re.compile(r"Dataset(\d{3,})_")


@dataclass(frozen=True)
class Task:
    """One TotalSegmentator task: its name, its datasets (several: part-models painted in this order), its merged
    label map's names (label 1 first), the tile step its CLI uses, and which of its modes this is."""

    name: str
    datasets: tuple[int, ...]
    classes: tuple[str, ...]
    step: float
    mode: str = ""  # "fast: 3 mm" …; "" for the task's default (full-resolution) mode

    @property
    def title(self) -> str:
        return f"TotalSegmentator task {self.name}" + (f" ({self.mode})" if self.mode else "")


@dataclass(frozen=True)
class Merged:
    """Several parts' label maps merged: the merged model's class names (background first) and, per part, the
    merged label of each of its output channels (0: left as it is)."""

    classes: tuple[str, ...]
    labels: tuple[tuple[int, ...], ...]


_TOTAL = (  # class_map["total"], labels 1 to 117
    "spleen", "kidney_right", "kidney_left", "gallbladder", "liver", "stomach", "pancreas", "adrenal_gland_right",
    "adrenal_gland_left", "lung_upper_lobe_left", "lung_lower_lobe_left", "lung_upper_lobe_right",
    "lung_middle_lobe_right", "lung_lower_lobe_right", "esophagus", "trachea", "thyroid_gland", "small_bowel",
    "duodenum", "colon", "urinary_bladder", "prostate", "kidney_cyst_left", "kidney_cyst_right", "sacrum",
    "vertebrae_S1", "vertebrae_L5", "vertebrae_L4", "vertebrae_L3", "vertebrae_L2", "vertebrae_L1", "vertebrae_T12",
    "vertebrae_T11", "vertebrae_T10", "vertebrae_T9", "vertebrae_T8", "vertebrae_T7", "vertebrae_T6",
    "vertebrae_T5", "vertebrae_T4", "vertebrae_T3", "vertebrae_T2", "vertebrae_T1", "vertebrae_C7", "vertebrae_C6",
    "vertebrae_C5", "vertebrae_C4", "vertebrae_C3", "vertebrae_C2", "vertebrae_C1", "heart", "aorta",
    "pulmonary_vein", "brachiocephalic_trunk", "subclavian_artery_right", "subclavian_artery_left",
    "common_carotid_artery_right", "common_carotid_artery_left", "brachiocephalic_vein_left",
    "brachiocephalic_vein_right", "atrial_appendage_left", "superior_vena_cava", "inferior_vena_cava",
    "portal_vein_and_splenic_vein", "iliac_artery_left", "iliac_artery_right", "iliac_vena_left",
    "iliac_vena_right", "humerus_left", "humerus_right", "scapula_left", "scapula_right", "clavicula_left",
    "clavicula_right", "femur_left", "femur_right", "hip_left", "hip_right", "spinal_cord", "gluteus_maximus_left",
    "gluteus_maximus_right", "gluteus_medius_left", "gluteus_medius_right", "gluteus_minimus_left",
    "gluteus_minimus_right", "autochthon_left", "autochthon_right", "iliopsoas_left", "iliopsoas_right", "brain",
    "skull", "rib_left_1", "rib_left_2", "rib_left_3", "rib_left_4", "rib_left_5", "rib_left_6", "rib_left_7",
    "rib_left_8", "rib_left_9", "rib_left_10", "rib_left_11", "rib_left_12", "rib_right_1", "rib_right_2",
    "rib_right_3", "rib_right_4", "rib_right_5", "rib_right_6", "rib_right_7", "rib_right_8", "rib_right_9",
    "rib_right_10", "rib_right_11", "rib_right_12", "sternum", "costal_cartilages",
)

_TOTAL_MR = (  # class_map["total_mr"], labels 1 to 50
    "spleen", "kidney_right", "kidney_left", "gallbladder", "liver", "stomach", "pancreas", "adrenal_gland_right",
    "adrenal_gland_left", "lung_left", "lung_right", "esophagus", "small_bowel", "duodenum", "colon",
    "urinary_bladder", "prostate", "sacrum", "vertebrae", "intervertebral_discs", "spinal_cord", "heart", "aorta",
    "inferior_vena_cava", "portal_vein_and_splenic_vein", "iliac_artery_left", "iliac_artery_right",
    "iliac_vena_left", "iliac_vena_right", "humerus_left", "humerus_right", "scapula_left", "scapula_right",
    "clavicula_left", "clavicula_right", "femur_left", "femur_right", "hip_left", "hip_right",
    "gluteus_maximus_left", "gluteus_maximus_right", "gluteus_medius_left", "gluteus_medius_right",
    "gluteus_minimus_left", "gluteus_minimus_right", "autochthon_left", "autochthon_right", "iliopsoas_left",
    "iliopsoas_right", "brain",
)

_HEADNECK_MUSCLES = (  # class_map["headneck_muscles"], labels 1 to 23
    "sternocleidomastoid_right", "sternocleidomastoid_left", "superior_pharyngeal_constrictor",
    "middle_pharyngeal_constrictor", "inferior_pharyngeal_constrictor", "trapezius_right", "trapezius_left",
    "platysma_right", "platysma_left", "levator_scapulae_right", "levator_scapulae_left", "anterior_scalene_right",
    "anterior_scalene_left", "middle_scalene_right", "middle_scalene_left", "posterior_scalene_right",
    "posterior_scalene_left", "sterno_thyroid_right", "sterno_thyroid_left", "thyrohyoid_right", "thyrohyoid_left",
    "prevertebral_right", "prevertebral_left",
)

_TOTAL_V3 = tuple("vertebrae_L6" if name == "vertebrae_S1" else name for name in _TOTAL)  # class_map["total_v3"]

# map_tasks_config.py TASK_CONFIGS: task_id per mode; nnunet.py: step_size 0.8 for total, total_v3, total_mr
TASKS = (
    Task("total", (291, 292, 293, 294, 295), _TOTAL, 0.8),
    Task("total", (297,), _TOTAL, 0.8, "fast: 3 mm"),
    Task("total", (298,), _TOTAL, 0.8, "fastest: 6 mm"),
    Task("total_v3", (831, 832, 833, 834, 835), _TOTAL_V3, 0.8),
    Task("total_v3", (836,), _TOTAL_V3, 0.8, "fast: 3 mm"),
    Task("total_v3", (837,), _TOTAL_V3, 0.8, "fastest: 6 mm"),
    Task("total_mr", (850, 851), _TOTAL_MR, 0.8),
    Task("total_mr", (852,), _TOTAL_MR, 0.8, "fast: 3 mm"),
    Task("total_mr", (853,), _TOTAL_MR, 0.8, "fastest: 6 mm"),
    Task("headneck_muscles", (778, 779), _HEADNECK_MUSCLES, 0.5),
)


def dataset_id(folder_name: str) -> int | None:
    """The dataset id of an nnU-Net dataset folder's name (`Dataset291_TotalSegmentator_part1_organs_1559subj`)."""
    found = _DATASET.match(folder_name)
    return int(found.group(1)) if found else None


def task_of(datasets: Sequence[int]) -> Task | None:
    """The task `datasets` belong to: the one every dataset is part of (None: not one TotalSegmentator task)."""
    return next((task for task in TASKS if datasets and set(datasets) <= set(task.datasets)), None)


def merged(task: Task, part_classes: Sequence[Sequence[str]]) -> Merged:
    """The parts' label maps (each part's class names by its output channel, background first, parts in the
    task's order) merged as TotalSegmentator's CLI merges them. The merged labels are the task's labels when the
    parts hold every class of the task (as its released weights do); parts holding fewer classes get consecutive
    labels in the task's order. ValueError naming a class the task's label map does not have."""
    known = {name: label for label, name in enumerate(task.classes, start=1)}
    task_labels = []
    for classes in part_classes:
        unknown = next((name for name in classes[1:] if name not in known), None)
        if unknown is not None:
            raise ValueError(f"class {unknown!r:.80} is not in {task.title}'s label map")
        task_labels.append((0, *(known[name] for name in classes[1:])))
    present = sorted({label for labels in task_labels for label in labels} - {0})
    rank = {label: index for index, label in enumerate(present, start=1)}
    return Merged(("background", *(task.classes[label - 1] for label in present)),
                  tuple(tuple(rank.get(label, 0) for label in labels) for labels in task_labels))
