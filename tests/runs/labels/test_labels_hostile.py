"""Labels files someone else wrote: each refusal one LabelsError line naming the file and the problem, nothing
read past its limit — huge and deeply nested JSON, NaN, negative sizes, image names that are paths, ids of the
wrong kind, run-length masks that lie, YOLO lines out of range. (The FIFO, /dev/zero, sparse-file and link cases
run in tests/hostile's battery, where these readers are registered.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labels_samples import NAMES, masks_set

from app.runs.labels import coco
from app.runs.labels.coco_read import read_coco
from app.runs.labels.records import LabelsError
from app.runs.labels.yolo_read import read_data_yaml, read_yolo_folder, read_yolo_labels


def _dataset(**changes: object) -> dict[str, object]:
    document = {"images": [{"id": 1, "file_name": "a.png", "width": 10, "height": 8}],
                "categories": [{"id": 1, "name": "pit"}],
                "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 3, 3], "area": 9,
                                 "iscrowd": 0, "score": 0.5}]}
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            entry = document[section][0]  # type: ignore[index]
            entry[field] = value
        else:
            document[section] = value
    return document


def _refused(tmp_path: Path, document: object, problem: str, *, raw: str | None = None) -> None:
    path = tmp_path / "instances.json"
    path.write_text(raw if raw is not None else json.dumps(document))
    with pytest.raises(LabelsError) as caught:
        read_coco(path)
    line = str(caught.value)
    assert line.startswith(f"{path}: ") and "\n" not in line, line
    assert problem in line, line


@pytest.mark.parametrize(("changes", "problem"), [
    ({"images__width": -5}, "width -5 is out of range"),
    ({"images__height": 0}, "height 0 is out of range"),
    ({"images__width": 70000, "images__height": 70000}, "width 70000 is out of range"),
    ({"images__width": 60000, "images__height": 60000}, "over the limit"),
    ({"annotations__bbox": [1, 1, -3, 3]}, "bbox has a negative size"),
    ({"annotations__bbox": [1, 1, 3]}, "bbox holds 3 numbers, not 4"),
    ({"annotations__bbox": [1e300, 1, 3, 3]}, "more than 1e+06 pixels away"),
    ({"images__file_name": "../../etc/passwd"}, "is not a relative path inside the folder"),
    ({"images__file_name": "/etc/passwd"}, "is not a relative path inside the folder"),
    ({"images__file_name": "a\\..\\..\\b.png"}, "is not a relative path inside the folder"),
    ({"images__file_name": "C:/x.png"}, "is not a relative path inside the folder"),
    ({"images__file_name": "a/\x1b[2Jb.png"}, "is not a relative path inside the folder"),
    ({"images__id": "../x"}, "image 0's id is not a whole number"),
    ({"images__id": True}, "image 0's id is not a whole number"),
    ({"images__id": 1.5}, "image 0's id is not a whole number"),
    ({"annotations__image_id": 7}, "image_id 7 is no image of the file"),
    ({"annotations__category_id": 9}, "category_id 9 is no category of the file"),
    ({"annotations__score": "high"}, "score is not a number"),
    ({"annotations__iscrowd": 2}, "iscrowd 2 is out of range (0…1)"),
    ({"annotations__iscrowd": "yes"}, "iscrowd is not a whole number"),
    ({"annotations__segmentation": [[1, 2, 3]]}, "is not 3 or more (x, y) points"),
    ({"annotations__segmentation": {"size": [8, 10], "counts": "zz\x7f"}}, "is not of COCO's run-length code"),
    ({"annotations__segmentation": {"size": [8, 10], "counts": [5, 5]}}, "the runs hold 10 pixels, the image 80"),
    ({"annotations__segmentation": {"size": [8, 10], "counts": [-5, 85]}}, "count -5 is out of range"),
    ({"annotations__segmentation": {"size": [800, 10], "counts": [80]}}, "run-length size is not its image's"),
    ({"annotations__segmentation": "everything"}, "neither polygons nor a run-length mask"),
    ({"categories": [{"id": 1, "name": "pit"}, {"id": 1, "name": "scratch"}]}, "category id 1 is given twice"),
    ({"images": [{"id": 1, "file_name": "a.png", "width": 10, "height": 8}] * 2}, "repeats an id or a file_name"),
    ({"images": {"id": 1}}, "'images' is not a list"),
])
def test_bad_values_are_one_line(tmp_path: Path, changes: dict[str, object], problem: str) -> None:
    _refused(tmp_path, _dataset(**changes), problem)


def test_nan_infinity_deep_nesting_and_not_json(tmp_path: Path) -> None:
    text = json.dumps(_dataset())
    _refused(tmp_path, None, "NaN is not a number JSON allows", raw=text.replace('"score": 0.5', '"score": NaN'))
    _refused(tmp_path, None, "Infinity is not a number JSON allows", raw=text.replace("0.5", "-Infinity"))
    _refused(tmp_path, None, "nested too deeply", raw='{"images": ' + "[" * 200_000 + "]" * 200_000 + "}")
    _refused(tmp_path, None, "invalid JSON at line 1", raw="{images: []}")
    path = tmp_path / "bytes.json"
    path.write_bytes(b'{"images": ["caf\xe9"]}')
    with pytest.raises(LabelsError, match="not UTF-8 text"):
        read_coco(path)
    _refused(tmp_path, [1, 2], "not a COCO dataset")


def test_too_many_runs_stop_before_they_are_all_read(tmp_path: Path) -> None:
    """A run-length string of a million runs for an 80-pixel image stops at the 82nd (never a million-long list)."""
    _refused(tmp_path, _dataset(annotations__segmentation={"size": [8, 10], "counts": "1" * 1_000_000}),
             "more than 81 runs")


def test_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "instances.json"
    with open(path, "wb") as handle:
        handle.truncate(300 << 20)  # sparse: 300 MiB that cost nothing
    with pytest.raises(LabelsError, match=r"too large \(314.6 MB; the limit is 268.4 MB\)"):
        read_coco(path)
    small = tmp_path / "small.json"
    small.write_text(json.dumps(_dataset()))
    with pytest.raises(LabelsError, match="too large"):
        read_coco(small, limit=100)


def test_too_many_annotations_in_one_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.runs.labels import checks

    monkeypatch.setattr(checks, "MAX_INSTANCES", 3)
    annotation = _dataset()["annotations"][0]  # type: ignore[index]
    _refused(tmp_path, _dataset(annotations=[annotation] * 4), "has more than 3 annotations")


def test_a_category_the_model_does_not_have(tmp_path: Path) -> None:
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(_dataset(categories=[{"id": 1, "name": "dent"}])))
    with pytest.raises(LabelsError, match="category 'dent' is not a class of the model"):
        read_coco(path, names=NAMES)
    assert read_coco(path).names == ("dent",)


@pytest.mark.parametrize(("line", "problem"), [
    ("0 0.5 0.5 0.2", "neither a box"),
    ("0 0.5 0.5 0.2 nan", "nan is not a normalised"),
    ("0 0.5 0.5 0.2 inf", "inf is not a normalised"),
    ("0 0.5 0.5 0.2 -0.1", "-0.1 is not a normalised"),
    ("0 0.5 0.5 0.2 1.5", "1.5 is not a normalised"),
    ("3 0.5 0.5 0.2 0.2", "class 3 is not one of the 3 classes"),
    ("-1 0.5 0.5 0.2 0.2", "class -1 is not one of the 3 classes"),
    ("0.5 0.5 0.5 0.2 0.2", "class 0.5 is not one of the 3 classes"),
    ("pit 0.5 0.5 0.2 0.2", "the class 'pit' is not a number"),
    ("0 0.5 0.5 0.2 0.2 0.1", "neither a box"),
])
def test_bad_yolo_lines_are_one_line(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "a.txt"
    path.write_text(f"1 0.5 0.5 0.1 0.1\n{line}\n")
    with pytest.raises(LabelsError) as caught:
        read_yolo_labels(path, image_hw=(20, 30), names=NAMES)
    message = str(caught.value)
    assert message.startswith(f"{path}: line 2"), message
    assert problem in message and "\n" not in message, message


def test_yolo_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.runs.labels import checks

    path = tmp_path / "a.txt"
    path.write_text("0 0.5 0.5 0.1 0.1\n" * 3)
    with pytest.raises(LabelsError, match="width 0 is out of range"):
        read_yolo_labels(path, image_hw=(20, 0), names=NAMES)
    path.write_text("0 0.5 0.5 0.1 0.1\n" * 4)
    monkeypatch.setattr(checks, "MAX_INSTANCES", 3)
    with pytest.raises(LabelsError, match="4 instances, more than 3"):
        read_yolo_labels(path, image_hw=(20, 30), names=NAMES)


def test_yolo_image_names_that_are_paths(tmp_path: Path) -> None:
    for name in ("../x.png", "/etc/passwd", "a/../../x.png"):
        with pytest.raises(LabelsError, match="is not a relative path inside the folder"):
            read_yolo_folder(tmp_path, {name: (10, 10)}, NAMES)


@pytest.mark.parametrize(("text", "problem"), [
    ("names: [pit, 3]\n", "class 1's name is not a name"),
    ("names: {0: pit, 2: stain}\n", "'names' is not numbered 0, 1, 2"),
    ("names: []\n", "'names' is not a list of 1 to 100,000 class names"),
    ("nc: 3\n", "'names' is not a list"),
    ("names: &a [pit]\nother: *a\n", "anchor"),
    ("names: [pit]\nnames: [stain]\n", "names"),
])
def test_bad_data_yaml(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "data.yaml"
    path.write_text(text)
    with pytest.raises(LabelsError) as caught:
        read_data_yaml(path)
    assert str(caught.value).startswith(str(path)) and problem in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


def test_writing_refuses_what_coco_cannot_hold(tmp_path: Path) -> None:
    from app.inference.model.instances import Instance, Instances
    from app.runs.labels.records import LabelledImage, LabelSet

    bad = LabelSet(NAMES, (LabelledImage("a.png", Instances((Instance(0, "pit", float("nan"), (0, 0, 1, 1)),),
                                                             (4, 4))),))
    with pytest.raises(LabelsError, match="'a.png': an instance's box, score or rotation is not a finite number"):
        coco.write_coco(tmp_path / "x.json", bad)
    assert not (tmp_path / "x.json").exists()
    twice = LabelSet(NAMES, masks_set().images[:1] * 2)
    with pytest.raises(LabelsError, match="share an image id"):
        coco.write_coco(tmp_path / "x.json", twice)
