"""YOLO txt and data.yaml: what SegLens writes, it reads back as the same instances (masks exactly; boxes to the
six decimals YOLO files carry), and so does Ultralytics' own dataset loader where it is installed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from labels_samples import NAMES, boxes_set, masks_set, obb_set, same_instances
from yolo_models import require_ultralytics

from app.inference.model.instances import Instance, Instances
from app.runs.labels import polygons
from app.runs.labels.coco import corners
from app.runs.labels.records import LabelledImage, LabelsError, LabelSet
from app.runs.labels.yolo import data_yaml, label_parts, write_yolo
from app.runs.labels.yolo_read import read_data_yaml, read_yolo_folder


def _sizes(labels: LabelSet) -> dict[str, tuple[int, int]]:
    return {image.name: image.instances.image_hw for image in labels.images}


def _largest_part(instance: Instance, image_hw: tuple[int, int]) -> np.ndarray:
    """What a YOLO polygon keeps of a mask: its largest part (with its holes, joined by seams)."""
    assert instance.mask is not None and instance.mask_box is not None
    found = polygons.centre_polygon(instance.mask, offset=instance.mask_box[:2])
    assert found is not None
    return polygons.fill([found], image_hw)


def test_polygons_round_trip(tmp_path: Path) -> None:
    labels = masks_set()
    write_yolo(tmp_path, labels, images="images")
    names = read_data_yaml(tmp_path / "data.yaml")
    assert names == NAMES
    back = read_yolo_folder(tmp_path, _sizes(labels), names)
    for got, want in zip(back.images, labels.images, strict=True):
        assert len(got.instances) == len(want.instances)
        for g, w in zip(got.instances.items, want.instances.items, strict=True):
            assert g.class_index == w.class_index and g.score == 1.0
            expected = _largest_part(w, want.instances.image_hw)
            assert np.array_equal(g.full_mask(got.instances.image_hw), expected)
    ring, two_parts = labels.images[0].instances.items[2], labels.images[2].instances.items[0]
    ring_back, parts_back = back.images[0].instances.items[2], back.images[2].instances.items[0]
    assert np.array_equal(ring_back.full_mask((60, 80)), ring.full_mask((60, 80)))  # its hole joined by a seam
    assert parts_back.area_px < two_parts.area_px  # the smaller part is not written
    plain = back.images[1].instances.items[0]  # a shape with neither: exactly its mask
    assert np.array_equal(plain.full_mask((48, 40)), labels.images[1].instances.items[0].full_mask((48, 40)))


def test_a_hole_is_joined_by_a_seam_on_random_shapes() -> None:
    """Random shapes with holes: the YOLO polygon of the largest part fills back to that part, holes and all."""
    import cv2

    rng = np.random.default_rng(2)
    exact = with_holes = 0
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(8, 50, 2))
        mask = cv2.GaussianBlur(rng.random((h, w)), (0, 0), 1.5) > 0.45
        found = polygons.centre_polygon(mask)
        assert found is not None
        filled = polygons.fill([found], (h, w))
        count, parts = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
        exact += any(np.array_equal(filled, parts == k) for k in range(1, count))
        hierarchy = cv2.findContours(mask.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)[1]
        with_holes += bool((hierarchy[0][:, 3] >= 0).any())
    assert with_holes > 50 and exact >= 195, (with_holes, exact)


def test_boxes_and_oriented_boxes_round_trip(tmp_path: Path) -> None:
    for labels, obb in ((boxes_set(), False), (obb_set(), True)):
        write_yolo(tmp_path, labels)
        back = read_yolo_folder(tmp_path, _sizes(labels), NAMES, obb=obb)
        for got, want in zip(back.images, labels.images, strict=True):
            same_instances(got.instances, want.instances, scores=False, tolerance=1e-4)


def test_files_and_lines(tmp_path: Path) -> None:
    write_yolo(tmp_path, boxes_set(), images="images")
    assert (tmp_path / "labels" / "a.txt").read_text().splitlines() == [
        "0 0.150000 0.287500 0.218750 0.425000", "2 0.809375 0.575000 0.368750 0.816667"]
    assert (tmp_path / "data.yaml").read_text() == \
        "path: .\ntrain: images\nval: images\nnc: 3\nnames:\n  0: pit\n  1: scratch\n  2: stain\n"
    assert label_parts("sub/deeper/c.png") == ("sub", "deeper", "c.txt")
    assert label_parts(".hidden") == (".hidden.txt",)
    assert data_yaml(("a",)) == "nc: 1\nnames:\n  0: a\n"


def test_two_images_one_label_file_is_refused(tmp_path: Path) -> None:
    labels = LabelSet(NAMES, (LabelledImage("x.png", Instances((), (4, 4))),
                              LabelledImage("x.jpg", Instances((), (4, 4)))))
    with pytest.raises(LabelsError, match="'x.png' and 'x.jpg' would share the label file x.txt"):
        write_yolo(tmp_path, labels)
    assert not (tmp_path / "labels").exists()


def test_an_image_without_a_label_file_has_no_instances(tmp_path: Path) -> None:
    write_yolo(tmp_path, boxes_set())
    back = read_yolo_folder(tmp_path, {"a.png": (60, 80), "never.png": (10, 10)}, NAMES)
    assert len(back.images[0].instances) == 2 and len(back.images[1].instances) == 0


def test_ultralytics_dataset_loader_reads_the_same_instances(tmp_path: Path) -> None:
    require_ultralytics()
    import cv2
    from ultralytics.data.dataset import YOLODataset

    labels = LabelSet(NAMES, tuple(image for image in masks_set().images if image.name != "sub/b.jpg"))
    for image in labels.images:
        h, w = image.instances.image_hw
        (tmp_path / "images" / image.name).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(tmp_path / "images" / image.name), np.zeros((h, w, 3), dtype=np.uint8))
    write_yolo(tmp_path, labels, images="images")
    dataset = YOLODataset(img_path=str(tmp_path / "images"), data={"names": dict(enumerate(NAMES)), "channels": 3},
                          task="segment", imgsz=96, augment=False, rect=False)
    theirs = {Path(label["im_file"]).relative_to(tmp_path / "images").as_posix(): label for label in dataset.labels}
    for image in labels.images:
        label = theirs[image.name]
        h, w = image.instances.image_hw
        assert label["shape"] == (h, w)
        assert label["cls"].ravel().tolist() == [i.class_index for i in image.instances.items]
        for segment, instance in zip(label["segments"], image.instances.items, strict=True):
            mask = np.zeros((h, w), dtype=np.uint8)
            cv2.fillPoly(mask, [(segment * (w, h)).astype(np.int32)], 1)  # as ultralytics' polygon2mask
            assert np.array_equal(mask.astype(bool), _largest_part(instance, (h, w)))


def test_ultralytics_dataset_loader_reads_the_same_boxes_and_oriented_boxes(tmp_path: Path) -> None:
    require_ultralytics()
    import cv2
    from ultralytics.data.dataset import YOLODataset

    for labels, task in ((boxes_set(), "detect"), (obb_set(), "obb")):
        folder = tmp_path / task
        for image in labels.images:
            (folder / "images").mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(folder / "images" / image.name), np.zeros((*image.instances.image_hw, 3), np.uint8))
        write_yolo(folder, labels, images="images")
        dataset = YOLODataset(img_path=str(folder / "images"), data={"names": dict(enumerate(NAMES)), "channels": 3},
                              task=task, imgsz=96, augment=False, rect=False)
        theirs = {Path(label["im_file"]).name: label for label in dataset.labels}
        for image in labels.images:
            label, (h, w) = theirs[image.name], image.instances.image_hw
            assert label["cls"].ravel().tolist() == [i.class_index for i in image.instances.items]
            for index, instance in enumerate(image.instances.items):
                if task == "detect":
                    cx, cy, bw, bh = label["bboxes"][index] * (w, h, w, h)
                    got = (cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2)
                    assert np.allclose(got, instance.box, atol=1e-3), (got, instance.box)
                else:
                    assert instance.rotated is not None
                    want = np.reshape(corners(instance.rotated), (4, 2))
                    assert np.allclose(label["segments"][index] * (w, h), want, atol=1e-3)


def test_fill_is_opencvs_fill_of_the_whole_image() -> None:
    """`fill` works over the polygons' bounds alone; it gives what OpenCV's fill of the whole image gives (what
    Ultralytics' loader does) for polygons inside, across and outside the image's edges."""
    import cv2

    rng = np.random.default_rng(9)
    for _ in range(500):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        shape = list(rng.uniform(-10, max(h, w) + 10, 2 * int(rng.integers(3, 8))))
        whole = np.zeros((h, w), dtype=np.uint8)
        points = np.round((np.reshape(shape, (-1, 2)) - 0.5) * 256).astype(np.int32)
        cv2.fillPoly(whole, [points], 1, lineType=cv2.LINE_8, shift=8)
        assert np.array_equal(polygons.fill([shape], (h, w)), whole.astype(bool))
