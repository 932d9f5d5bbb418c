"""The lesion list widget (app/ui/widgets/lesion_list.py): its rows, one class's components chosen in its class box
(the lesions under the anatomy's), kept across a new count, a row's click, no box for one class, the cut at
MAX_ROWS said."""

from __future__ import annotations

from types import SimpleNamespace

from app.inference.decide.lesions import Lesion
from app.ui.widgets import lesion_list
from app.ui.widgets.lesion_list import LesionList

CLASSES = (SimpleNamespace(name="background", color=None), SimpleNamespace(name="bone", color=(255, 214, 10)),
           SimpleNamespace(name="lesion", color=(255, 55, 95)))


def lesion(label: int, index: int, voxels: int, k0: int = 2) -> Lesion:
    return Lesion(label=label, index=index, voxels=voxels, ml=voxels / 1000, bbox=((k0, k0 + 4), (10, 20), (5, 9)),
                  centroid=(k0 + 2.0, 15.0, 7.0))


FOUND = (lesion(1, 1, 9000), lesion(1, 2, 800), lesion(2, 1, 500, k0=6), lesion(2, 2, 120, k0=9))


def test_one_class_chosen_lists_its_components_and_stays_chosen(qtbot):
    group = LesionList()
    qtbot.addWidget(group)
    group.set_lesions(FOUND, classes=CLASSES, spacing=(2.5, 0.8, 0.8), connectivity=26)
    assert group.rows()[0] == ("bone 1", "9.00", "3–6", "10 mm")  # 4 slices × 2.5 mm, the box's longest side
    assert [row[0] for row in group.rows()] == ["bone 1", "bone 2", "lesion 1", "lesion 2"]
    assert group.summary_text() == "bone: 2 · lesion: 2\n26-connected (faces, edges and corners touch)"
    group.show_class(2)
    assert [row[0] for row in group.rows()] == ["lesion 1", "lesion 2"]
    with qtbot.waitSignal(group.chosen) as chosen:
        group.click_row(1)
    assert chosen.args == [FOUND[3]]
    group.set_lesions(FOUND[:3], classes=CLASSES, spacing=(2.5, 0.8, 0.8), connectivity=26)  # another threshold
    assert [row[0] for row in group.rows()] == ["lesion 1"]


def test_the_largest_are_listed_and_the_rest_said(qtbot, monkeypatch):
    monkeypatch.setattr(lesion_list, "MAX_ROWS", 2)
    group = LesionList()
    qtbot.addWidget(group)
    group.set_lesions(FOUND, classes=CLASSES, spacing=None, connectivity=6)
    assert [row[0] for row in group.rows()] == ["bone 1", "bone 2"] and group.rows()[0][3] == "10 vox"
    assert group.summary_text() == ("bone: 2 · lesion: 2\n6-connected (faces touch)\nThe 2 largest listed; "
                                    "2 smaller not.")
